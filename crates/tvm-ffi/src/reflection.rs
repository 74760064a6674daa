//! Reflection: object types defined in Rust ([`define_object!`](crate::define_object) declares
//! the struct, registers its type key under its parent and its fields; [`register_method`] adds
//! methods), and the safe read side of the type table for any type, whoever registered it: the
//! ancestors of a type ([`ancestors_of`]), its fields ([`fields_of`], readable through
//! [`Member::get`]) and methods ([`methods_of`]), and type attributes
//! ([`register_type_attr`]).

use std::ffi::{c_int, c_void};

use crate::abi::{
    self, TVMFFIAny, TVMFFIByteArray, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeInfo,
    TVMFFITypeMetadata,
};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::error::{Error, ErrorKind, Result};
use crate::function::{Function, schema_metadata};
use crate::types;

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

/// Writes a value converted to `F` into the field at `field` (used on fresh objects by
/// deserialization and deep copy, as the setter of a read-only field).
unsafe extern "C" fn field_setter<F: TryFromAnyView>(
    field: *mut c_void,
    value: *const TVMFFIAny,
) -> c_int {
    crate::boundary::ffi_status("a reflected field setter", || {
        // SAFETY: the runtime passes a valid value, borrowed for the call.
        let value: F = unsafe { AnyView::from_raw(*value) }.cast()?;
        // SAFETY: the runtime passes the address of a live, initialized field of type `F`,
        // which nothing else reads during the call.
        unsafe { *field.cast::<F>() = value };
        Ok(())
    })
}

/// The value a field of a freshly created, not yet filled object starts with (the object is
/// then filled through the field setters, as deserialization and deep copy do).
pub trait FieldDefault {
    /// The type index recorded as the field's static type (`-1`: any value).
    const STATIC_TYPE_INDEX: i32 = abi::kTVMFFIAny;
    /// Whether the field may hold None besides values of its type (`Optional` in its schema).
    const OPTIONAL: bool = false;
    /// The starting value.
    fn field_default() -> Self;
}

macro_rules! field_defaults {
    ($index:expr => $($t:ty),*) => {
        $(impl FieldDefault for $t {
            const STATIC_TYPE_INDEX: i32 = $index;
            fn field_default() -> Self { Default::default() }
        })*
    };
}
field_defaults!(abi::kTVMFFIInt => i8, i16, i32, i64, u8, u16, u32, u64);
field_defaults!(abi::kTVMFFIFloat => f32, f64);
field_defaults!(abi::kTVMFFIBool => bool);
field_defaults!(abi::kTVMFFIStr => crate::String);
field_defaults!(abi::kTVMFFIBytes => crate::Bytes);
field_defaults!(abi::kTVMFFIArray => crate::Array);
field_defaults!(abi::kTVMFFIList => crate::List);
field_defaults!(abi::kTVMFFIMap => crate::Map);
field_defaults!(abi::kTVMFFIDict => crate::Dict);

impl FieldDefault for crate::Shape {
    const STATIC_TYPE_INDEX: i32 = abi::kTVMFFIShape;
    fn field_default() -> Self {
        crate::Shape::new(&[])
    }
}

impl FieldDefault for crate::DataType {
    const STATIC_TYPE_INDEX: i32 = abi::kTVMFFIDataType;
    fn field_default() -> Self {
        crate::DataType::void()
    }
}

impl FieldDefault for crate::Device {
    const STATIC_TYPE_INDEX: i32 = abi::kTVMFFIDevice;
    fn field_default() -> Self {
        crate::Device::cpu(0)
    }
}
field_defaults!(abi::kTVMFFIAny => Any);

impl<T> FieldDefault for Option<T> {
    const OPTIONAL: bool = true;
    fn field_default() -> Self {
        None
    }
}

impl FieldDefault for crate::Object {
    fn field_default() -> Self {
        crate::Object::header()
    }
}

/// The metadata creator of a type: a new object whose fields hold their [`FieldDefault`].
unsafe extern "C" fn create_object<T: crate::ObjectCore + FieldDefault>(
    out: *mut abi::TVMFFIObjectHandle,
) -> c_int {
    crate::boundary::ffi_status("an object creator", || {
        let obj = crate::ObjectRef::new(T::field_default());
        // SAFETY: the runtime passes a writable handle slot; the new reference moves into it.
        unsafe { out.write(obj.into_raw().cast()) };
        Ok(())
    })
}

/// Registers the size of `T`'s objects and a creator of blank instances, which deserialization
/// and deep copy fill through the field setters.
pub fn register_metadata_with_creator<T: crate::ObjectCore + FieldDefault>(
    type_index: i32,
) -> Result<()> {
    let metadata = TVMFFITypeMetadata {
        doc: TVMFFIByteArray::EMPTY,
        creator: Some(create_object::<T>),
        total_size: i32::try_from(size_of::<T>()).unwrap_or(0),
        structural_eq_hash_kind: abi::kTVMFFISEqHashKindTreeNode,
    };
    // SAFETY: the record is valid for the call; the runtime copies it.
    check(
        unsafe { abi::TVMFFITypeRegisterMetadata(type_index, &metadata) },
        "metadata",
    )
}

/// Registers a field `name` of type `F` at byte `offset` from the object header: read-only for
/// frontends, with a setter for deserialization and deep copy.
pub fn register_field<F: Clone + Into<Any> + TryFromAnyView + FieldDefault>(
    type_index: i32,
    name: &str,
    offset: usize,
) -> Result<()> {
    register_field_with::<F>(type_index, name, offset, FieldOptions::default())
}

/// Whether the type `type_index` has any field registered (by any library of the process).
pub fn has_fields(type_index: i32) -> bool {
    crate::types::type_info(type_index).is_some_and(|info| info.num_fields > 0)
}

/// The flags and doc of a field registered with [`register_field_with`].
#[derive(Clone, Copy, Default)]
pub struct FieldOptions<'a> {
    /// `kTVMFFIFieldFlagBitMask*` bits.
    pub flags: i64,
    /// The field's documentation.
    pub doc: &'a str,
}

/// Registers field `name` of type `F` at `offset` of a type's objects, with flags and a doc.
pub fn register_field_with<F: Clone + Into<Any> + TryFromAnyView + FieldDefault>(
    type_index: i32,
    name: &str,
    offset: usize,
    options: FieldOptions<'_>,
) -> Result<()> {
    // The field's type schema, as frontends read it from the metadata (`{"type":"int"}`, or
    // `Optional` around it).
    let schema = format!(r#"{{"type":"{}"}}"#, F::TYPE_NAME);
    let schema = if F::OPTIONAL {
        format!(r#"{{"type":"Optional","args":[{schema}]}}"#)
    } else {
        schema
    };
    let metadata = schema_metadata(&schema);
    let info = TVMFFIFieldInfo {
        name: TVMFFIByteArray::from_text(name),
        doc: TVMFFIByteArray::from_text(options.doc),
        metadata: TVMFFIByteArray::from_text(&metadata),
        flags: options.flags,
        size: size_of::<F>() as i64,
        alignment: align_of::<F>() as i64,
        offset: offset as i64,
        getter: Some(field_getter::<F>),
        setter: field_setter::<F> as *mut c_void,
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: F::STATIC_TYPE_INDEX,
    };
    // SAFETY: the record is valid for the call; the runtime copies it.
    check(
        unsafe { abi::TVMFFITypeRegisterField(type_index, &info) },
        name,
    )
}

/// Registers method `name` of a type; instance methods take the object as argument 0. Its
/// type schema is that of any function (`Callable[..., Any]`).
pub fn register_method(
    type_index: i32,
    name: &str,
    method: &Function,
    is_static: bool,
) -> Result<()> {
    register_method_with_schema(
        type_index,
        name,
        method,
        is_static,
        r#"{"type":"ffi.Function"}"#,
    )
}

/// Registers method `name` of a type made from a typed closure, with the closure's type
/// schema (its return and parameter types).
pub fn register_typed_method<F, Args>(
    type_index: i32,
    name: &str,
    method: F,
    is_static: bool,
) -> Result<Function>
where
    F: crate::function::TypedFunction<Args>,
{
    let schema = F::type_schema();
    let method = Function::from_typed(name, method);
    register_method_with_schema(type_index, name, &method, is_static, &schema)?;
    Ok(method)
}

fn register_method_with_schema(
    type_index: i32,
    name: &str,
    method: &Function,
    is_static: bool,
    schema: &str,
) -> Result<()> {
    let method = Any::from(method.clone());
    let metadata = schema_metadata(schema);
    let info = TVMFFIMethodInfo {
        name: TVMFFIByteArray::from_text(name),
        doc: TVMFFIByteArray::EMPTY,
        metadata: TVMFFIByteArray::from_text(&metadata),
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
        doc: TVMFFIByteArray::EMPTY,
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

/// Registers the type attribute `name` of a type (a column entry such as `__any_hash__`); the
/// runtime keeps its own copy of `value`.
pub fn register_type_attr(type_index: i32, name: &str, value: &Any) -> Result<()> {
    let key = TVMFFIByteArray::from_text(name);
    // SAFETY: the key and the value are valid for the call; the runtime copies both.
    check(
        unsafe { abi::TVMFFITypeRegisterAttr(type_index, &key, value.as_raw()) },
        name,
    )
}

/// The text of a byte array of the type table (names of fields and methods), which lives for
/// the process; `""` if it is not UTF-8.
fn table_text(array: &'static TVMFFIByteArray) -> &'static str {
    // SAFETY: the type table keeps its names for the whole process.
    unsafe { array.to_str() }.unwrap_or("")
}

/// The type-table entries of a type's ancestors, root first, then its own; nothing for an index
/// that is not registered.
fn lineage(type_index: i32) -> impl DoubleEndedIterator<Item = &'static TVMFFITypeInfo> {
    let info = types::type_info(type_index);
    let ancestors: &'static [*const TVMFFITypeInfo] = match info {
        Some(info) if info.type_depth > 0 && !info.type_ancestors.is_null() => {
            // SAFETY: `type_ancestors` holds `type_depth` entries that live for the process.
            unsafe { std::slice::from_raw_parts(info.type_ancestors, info.type_depth as usize) }
        }
        _ => &[],
    };
    ancestors
        .iter()
        // SAFETY: ancestor entries are registered types, never freed.
        .filter_map(|entry| unsafe { entry.as_ref() })
        .chain(info)
}

/// The type indices of a type's ancestors, root (`ffi.Object`) first, without the type itself;
/// nothing for an index that is not registered.
pub fn ancestors_of(type_index: i32) -> impl DoubleEndedIterator<Item = i32> {
    lineage(type_index)
        .map(|info| info.type_index)
        .filter(move |&index| index != type_index)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::TVMFFIFieldInfo {}
    impl Sealed for super::TVMFFIMethodInfo {}
}

/// The record of a member of a type in the type table: [`TVMFFIFieldInfo`] or
/// [`TVMFFIMethodInfo`] (sealed).
pub trait MemberRecord: sealed::Sealed + 'static {
    /// The member's name.
    fn name(&self) -> &TVMFFIByteArray;
    /// The member's documentation.
    fn doc(&self) -> &TVMFFIByteArray;
    /// The member's metadata (a JSON object, or empty).
    fn metadata(&self) -> &TVMFFIByteArray;
    /// The records of this kind of a type-table entry: their address and count.
    fn records_of(info: &TVMFFITypeInfo) -> (*const Self, i32);
}

impl MemberRecord for TVMFFIFieldInfo {
    fn name(&self) -> &TVMFFIByteArray {
        &self.name
    }
    fn doc(&self) -> &TVMFFIByteArray {
        &self.doc
    }
    fn metadata(&self) -> &TVMFFIByteArray {
        &self.metadata
    }
    fn records_of(info: &TVMFFITypeInfo) -> (*const Self, i32) {
        (info.fields, info.num_fields)
    }
}

impl MemberRecord for TVMFFIMethodInfo {
    fn name(&self) -> &TVMFFIByteArray {
        &self.name
    }
    fn doc(&self) -> &TVMFFIByteArray {
        &self.doc
    }
    fn metadata(&self) -> &TVMFFIByteArray {
        &self.metadata
    }
    fn records_of(info: &TVMFFITypeInfo) -> (*const Self, i32) {
        (info.methods, info.num_methods)
    }
}

/// A reflected member of a registered type (a field, [`FieldRef`], or a method, [`MethodRef`]),
/// as the type table describes it.
pub struct Member<R: MemberRecord> {
    owner: i32,
    pub(crate) info: &'static R,
}

impl<R: MemberRecord> Clone for Member<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R: MemberRecord> Copy for Member<R> {}

impl<R: MemberRecord> Member<R> {
    /// The member's name.
    pub fn name(&self) -> &'static str {
        table_text(self.info.name())
    }

    /// The member's documentation (empty if none).
    pub fn doc(&self) -> &'static str {
        table_text(self.info.doc())
    }

    /// The member's metadata, a JSON object such as `{"type_schema": ...}` (empty if none).
    pub fn metadata(&self) -> &'static str {
        table_text(self.info.metadata())
    }

    /// The index of the type that declares the member (the type itself or an ancestor).
    pub fn owner(&self) -> i32 {
        self.owner
    }
}

/// The members of one kind of a type and its ancestors, root first (each type's in
/// registration order).
fn members<R: MemberRecord>(type_index: i32) -> impl Iterator<Item = Member<R>> {
    lineage(type_index).flat_map(|info| {
        let (data, len) = R::records_of(info);
        let records: &'static [R] = if len > 0 && !data.is_null() {
            // SAFETY: the entry holds `len` records at `data`, which live for the process.
            unsafe { std::slice::from_raw_parts(data, len as usize) }
        } else {
            &[]
        };
        let owner = info.type_index;
        records.iter().map(move |info| Member { owner, info })
    })
}

/// A reflected field of a registered type.
pub type FieldRef = Member<TVMFFIFieldInfo>;

impl Member<TVMFFIFieldInfo> {
    /// The byte offset of the field from the object header.
    pub fn offset(&self) -> usize {
        usize::try_from(self.info.offset).unwrap_or(0)
    }

    /// The flag bits of the field (`kTVMFFIFieldFlagBitMask*`).
    pub fn flags(&self) -> i64 {
        self.info.flags
    }

    /// The declared static type index of the field (`-1` for `Any`; a hint only).
    pub fn static_type_index(&self) -> i32 {
        self.info.field_static_type_index
    }

    /// The default value (or default factory, with `DefaultFromFactory`), if the field has one.
    pub fn default_value(&self) -> Option<AnyView<'static>> {
        (self.info.flags & abi::kTVMFFIFieldFlagBitMaskHasDefault != 0)
            // SAFETY: the type table owns the default for the process.
            .then(|| unsafe { AnyView::from_raw(self.info.default_value_or_factory) })
    }

    /// Whether the field has a setter, so that [`Member::set`] can write it.
    pub fn is_settable(&self) -> bool {
        !self.info.setter.is_null()
    }

    /// Writes `value` into the field of `obj` through its setter. Meant for objects under
    /// construction (deserialization, deep copy) that nothing else reads yet: a `TypeError` if
    /// `obj` is not an object of the declaring type, an `AttributeError` without a setter, or
    /// the setter's error.
    pub fn set<'a>(&self, obj: impl Into<AnyView<'a>>, value: AnyView<'_>) -> Result<()> {
        let obj = obj.into();
        let ptr = obj
            .as_object_ptr()
            .filter(|_| types::is_instance_of(obj.type_index(), self.owner))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::TypeError,
                    format!(
                        "field `{}` of `{}` cannot be written on a value of type `{}`",
                        self.name(),
                        types::type_key_of(self.owner),
                        obj.type_key()
                    ),
                )
            })?;
        if self.info.setter.is_null() {
            return Err(Error::new(
                ErrorKind::AttributeError,
                format!("field `{}` has no setter", self.name()),
            ));
        }
        // SAFETY: the object is a live instance of the declaring type, so the offset is that of
        // this field within it.
        let field = unsafe { ptr.cast::<u8>().add(self.offset()) }.cast::<c_void>();
        if self.info.flags & abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj != 0 {
            // SAFETY: with this flag the setter is a Function handle the type table keeps alive.
            let setter = unsafe {
                AnyView::from_raw(TVMFFIAny {
                    type_index: abi::kTVMFFIFunction,
                    small_str_len: 0,
                    payload: abi::TVMFFIAnyPayload {
                        v_obj: self.info.setter.cast(),
                    },
                })
            };
            let setter: Function = setter.cast()?;
            setter.call_packed(&[Any::from(field).as_view(), value])?;
            return Ok(());
        }
        // SAFETY: without the flag the setter is a C function with this signature.
        let setter: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny) -> c_int =
            unsafe { std::mem::transmute(self.info.setter) };
        // SAFETY: `field` is the field's address; the value is valid for the call.
        if unsafe { setter(field, value.as_raw()) } != 0 {
            return Err(Error::take_raised_or(ErrorKind::RuntimeError, self.name()));
        }
        Ok(())
    }

    /// Whether the field has a getter, so that [`Member::get`] can read it.
    pub fn is_readable(&self) -> bool {
        self.info.getter.is_some()
    }

    /// Reads the field of the object in `value` through its getter: a `TypeError` if `value`
    /// is not an object of the declaring type (or a subtype), an `AttributeError` if the field
    /// has no getter, or the getter's error.
    pub fn get<'a>(&self, value: impl Into<AnyView<'a>>) -> Result<Any> {
        let value = value.into();
        let obj = value
            .as_object_ptr()
            .filter(|_| types::is_instance_of(value.type_index(), self.owner))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::TypeError,
                    format!(
                        "field `{}` of `{}` cannot be read from a value of type `{}`",
                        self.name(),
                        types::type_key_of(self.owner),
                        value.type_key()
                    ),
                )
            })?;
        let Some(getter) = self.info.getter else {
            return Err(Error::new(
                ErrorKind::AttributeError,
                format!("field `{}` has no getter", self.name()),
            ));
        };
        let mut out = TVMFFIAny::NONE;
        // SAFETY: the object is a live instance of the declaring type, so the offset is that of
        // this field within it; the getter writes an owning value into `out`.
        let rc = unsafe { getter(obj.cast::<u8>().add(self.offset()).cast(), &mut out) };
        if rc != 0 {
            return Err(Error::take_raised_or(ErrorKind::RuntimeError, self.name()));
        }
        // SAFETY: a successful getter writes an owning value.
        Ok(unsafe { Any::from_raw(out) })
    }
}

/// The reflected fields of a type and its ancestors, root first (each type's in registration
/// order); nothing for an index that is not registered.
pub fn fields_of(type_index: i32) -> impl Iterator<Item = FieldRef> {
    members(type_index)
}

/// A reflected method of a registered type.
pub type MethodRef = Member<TVMFFIMethodInfo>;

impl Member<TVMFFIMethodInfo> {
    /// Whether the method is static (instance methods take the object as argument 0).
    pub fn is_static(&self) -> bool {
        self.info.flags & abi::kTVMFFIFieldFlagBitMaskIsStaticMethod != 0
    }

    /// The function that implements the method.
    pub fn function(&self) -> Result<Function> {
        // SAFETY: the type table owns the method value for the process.
        unsafe { AnyView::from_raw(self.info.method) }.cast()
    }
}

/// The reflected methods of a type and its ancestors, root first (each type's in registration
/// order); nothing for an index that is not registered.
pub fn methods_of(type_index: i32) -> impl Iterator<Item = MethodRef> {
    members(type_index)
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
                    // Another copy of this crate in the process (the runtime library and a
                    // language binding each have one) may have registered the fields already.
                    if !$crate::reflection::has_fields(index) {
                        $(
                            $crate::reflection::register_field::<$fty>(
                                index,
                                stringify!($field),
                                ::std::mem::offset_of!($name, $field),
                            )
                            .unwrap_or_else(|e| {
                                panic!("cannot register field of `{}`: {e}", $key)
                            });
                        )*
                    }
                    // Metadata registers once per type; a repeat registration (another copy of
                    // this library) keeps the first.
                    let _ = $crate::reflection::register_metadata_with_creator::<$name>(index);
                    index
                })
            }
        }

        impl $crate::reflection::FieldDefault for $name {
            fn field_default() -> Self {
                $name {
                    base: <$parent as $crate::reflection::FieldDefault>::field_default(),
                    $( $field: <$fty as $crate::reflection::FieldDefault>::field_default(), )*
                }
            }
        }
    };
}
