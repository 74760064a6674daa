//! Object types defined in Rust: [`define_object!`](crate::define_object) declares the struct, registers its type key
//! under its parent and its fields (readable from every language through reflection);
//! [`register_method`] adds methods.

use std::ffi::{c_int, c_void};

use crate::abi::{self, TVMFFIAny, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeMetadata};
use crate::any::Any;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::string::byte_array;

/// Reads a field of type `F` at `field` into an owning value.
unsafe extern "C" fn field_getter<F: Clone + Into<Any>>(
    field: *mut c_void,
    result: *mut TVMFFIAny,
) -> c_int {
    crate::boundary::ffi_status("a reflected field getter", || {
        // SAFETY: the runtime passes the address of a live field of type `F` and a writable
        // result, which owns nothing yet.
        unsafe { result.write((*field.cast::<F>()).clone().into().into_raw()) };
        Ok(())
    })
}

fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::take_raised_or(ErrorKind::RuntimeError, what))
    }
}

/// Registers a read-only field `name` of type `F` at byte `offset` from the object header.
pub fn register_field<F: Clone + Into<Any>>(
    type_index: i32,
    name: &str,
    offset: usize,
) -> Result<()> {
    let info = TVMFFIFieldInfo {
        name: byte_array(name.as_bytes()),
        doc: byte_array(b""),
        metadata: byte_array(b""),
        flags: 0,
        size: size_of::<F>() as i64,
        alignment: align_of::<F>() as i64,
        offset: offset as i64,
        getter: Some(field_getter::<F>),
        setter: std::ptr::null_mut(),
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: abi::kTVMFFIAny,
    };
    // SAFETY: the record is valid for the call; the runtime copies it.
    check(
        unsafe { abi::TVMFFITypeRegisterField(type_index, &info) },
        name,
    )
}

/// Registers method `name` of a type; instance methods take the object as argument 0.
pub fn register_method(
    type_index: i32,
    name: &str,
    method: &Function,
    is_static: bool,
) -> Result<()> {
    let method = Any::from(method.clone());
    let info = TVMFFIMethodInfo {
        name: byte_array(name.as_bytes()),
        doc: byte_array(b""),
        metadata: byte_array(b""),
        flags: if is_static {
            abi::kTVMFFIFieldFlagBitMaskIsStaticMethod
        } else {
            0
        },
        method: *method.as_raw(),
    };
    // SAFETY: the record is valid for the call; the runtime retains the method.
    check(
        unsafe { abi::TVMFFITypeRegisterMethod(type_index, &info) },
        name,
    )
}

/// Registers the size of a type's objects.
pub fn register_metadata(type_index: i32, total_size: usize) -> Result<()> {
    let metadata = TVMFFITypeMetadata {
        doc: byte_array(b""),
        creator: None,
        total_size: i32::try_from(total_size).unwrap_or(0),
        structural_eq_hash_kind: abi::kTVMFFISEqHashKindTreeNode,
    };
    // SAFETY: the record is valid for the call; the runtime copies it.
    check(
        unsafe { abi::TVMFFITypeRegisterMetadata(type_index, &metadata) },
        "metadata",
    )
}

/// Declares an object type: a `#[repr(C)]` struct whose first field `base` is the parent type,
/// registered under `type_key` on first use along with its fields.
///
/// ```
/// # use tvm_ffi_capi as _; // a program links the process state once
/// use tvm_ffi::{define_object, Object, ObjectRef, ObjectCore};
///
/// define_object! {
///     /// A point.
///     pub struct Point : "example.Point" extends Object {
///         pub x: i64,
///         pub y: i64,
///     }
/// }
///
/// let p = ObjectRef::new(Point { base: Object::header(), x: 1, y: 2 });
/// assert_eq!(p.type_index(), Point::type_index());
/// assert_eq!(p.header().type_key(), "example.Point");
/// ```
#[macro_export]
macro_rules! define_object {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident : $key:literal extends $parent:ty {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        $vis struct $name {
            /// The parent part of the object (for direct children of the root, its header).
            pub base: $parent,
            $( $(#[$fmeta])* $fvis $field: $fty, )*
        }

        // SAFETY: repr(C) with the parent (and so the header) first; the index is the one the
        // runtime assigned to the key.
        unsafe impl $crate::ObjectCore for $name {
            const TYPE_KEY: &'static str = $key;
            fn type_index() -> i32 {
                static INDEX: ::std::sync::OnceLock<i32> = ::std::sync::OnceLock::new();
                *INDEX.get_or_init(|| {
                    let parent = <$parent as $crate::ObjectCore>::type_index();
                    let index = $crate::types::register_type($key, parent, 0, true)
                        .unwrap_or_else(|e| panic!("cannot register type `{}`: {e}", $key));
                    $(
                        $crate::reflection::register_field::<$fty>(
                            index,
                            stringify!($field),
                            ::std::mem::offset_of!($name, $field),
                        )
                        .unwrap_or_else(|e| panic!("cannot register field of `{}`: {e}", $key));
                    )*
                    // Metadata registers once per type; a repeat registration (another copy of
                    // this library) keeps the first.
                    let _ = $crate::reflection::register_metadata(index, ::std::mem::size_of::<$name>());
                    index
                })
            }
        }
    };
}
