//! Object types laid out at run time from their field records, as apache-tvm-ffi's Python
//! binding defines classes (§10.6 of the ABI reference): field getters and setters by storage
//! kind, allocation (`__ffi_new__`), shallow copy (`__ffi_shallow_copy__`), the constructor
//! generated from the fields (`__ffi_init__`, positional and keyword arguments), and creation of
//! any reflected type from `(type, name, value, ...)` (`ffi.MakeObjectFromPackedArgs`).
//!
//! Objects of these types are one zeroed block: the header, then each field at its offset. A
//! zeroed field is a valid value of every storage kind (0, `None`, a NULL reference), so a new
//! object needs no per-field construction, and the deleter releases the `Any` and object fields
//! the type table lists.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use crate::abi::{self, DLDataType, DLDevice, TVMFFIAny, TVMFFIFieldInfo, TVMFFIObject};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::boundary::{ffi_boundary, ffi_status};
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{
    Object, ObjectRef, alloc_object_with_deleter, dec_ref, dec_ref_deferred, inc_ref,
};
use crate::reflection::{FieldRef, fields_of, register_type_attr};
use crate::type_attr::{TypeAttr, type_attr_value};
use crate::{DataType, Device, types};

/// How a field is stored in an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldStorage {
    /// `int64_t`.
    Int,
    /// `double`.
    Float,
    /// `bool` (one byte).
    Bool,
    /// `void*`, not owned.
    OpaquePtr,
    /// `DLDataType`.
    DataType,
    /// `DLDevice`.
    Device,
    /// An owned 16-byte value.
    Any,
    /// An owned 8-byte object reference; NULL is `None`.
    Object,
}

impl FieldStorage {
    /// The storage of a field declared with `static_type_index` (`-1` is any value, `0` None):
    /// a `ValueError` naming the index for the on-stack types that cannot be stored.
    pub fn of(static_type_index: i32) -> Result<FieldStorage> {
        Ok(match static_type_index {
            abi::kTVMFFIInt => FieldStorage::Int,
            abi::kTVMFFIFloat => FieldStorage::Float,
            abi::kTVMFFIBool => FieldStorage::Bool,
            abi::kTVMFFIOpaquePtr => FieldStorage::OpaquePtr,
            abi::kTVMFFIDataType => FieldStorage::DataType,
            abi::kTVMFFIDevice => FieldStorage::Device,
            abi::kTVMFFIAny | abi::kTVMFFINone => FieldStorage::Any,
            i if i >= abi::kTVMFFIStaticObjectBegin => FieldStorage::Object,
            other => {
                return Err(Error::new(
                    ErrorKind::ValueError,
                    format!("Unsupported field type index for a stored field: {other}"),
                ));
            }
        })
    }

    /// The storage of a registered field: as [`FieldStorage::of`], except that the record's
    /// size decides between the two owned forms (an "any" field of pointer size is a compact
    /// object reference of a parent defined in C++; an object-typed field of 16 bytes is a
    /// value that may be inline, as strings and bytes are), and an index that cannot be stored
    /// is plain bytes (`None`), which need no release.
    fn of_record(info: &TVMFFIFieldInfo) -> Option<FieldStorage> {
        const ANY_SIZE: i64 = size_of::<TVMFFIAny>() as i64;
        const POINTER_SIZE: i64 = size_of::<*mut TVMFFIObject>() as i64;
        match FieldStorage::of(info.field_static_type_index).ok()? {
            FieldStorage::Any if info.size == POINTER_SIZE => Some(FieldStorage::Object),
            FieldStorage::Object if info.size == ANY_SIZE => Some(FieldStorage::Any),
            storage => Some(storage),
        }
    }
}

/// Reads a plain field of type `T` at `field` into `result`.
///
/// # Safety
/// `field` is the address of a live `T`; `result` is writable and owns nothing.
unsafe fn get_plain<T: Copy, V: Into<Any>>(
    field: *mut c_void,
    result: *mut TVMFFIAny,
    wrap: fn(T) -> V,
) -> c_int {
    ffi_status("a field getter", || {
        // SAFETY: the caller passes the address of a live field of type `T` and a writable
        // result that owns nothing.
        unsafe { result.write(wrap(field.cast::<T>().read_unaligned()).into().into_raw()) };
        Ok(())
    })
}

macro_rules! plain_getter {
    ($name:ident, $t:ty, $wrap:expr) => {
        unsafe extern "C" fn $name(field: *mut c_void, result: *mut TVMFFIAny) -> c_int {
            // SAFETY: forwarded under the getter contract.
            unsafe { get_plain::<$t, _>(field, result, $wrap) }
        }
    };
}

plain_getter!(get_int, i64, |v| v);
plain_getter!(get_float, f64, |v| v);
plain_getter!(get_bool, u8, |v| v != 0);
plain_getter!(get_ptr, *mut c_void, |v| v);
plain_getter!(get_dtype, DLDataType, DataType);
plain_getter!(get_device, DLDevice, Device);

/// Reads an `Any` field (a new reference for objects).
unsafe extern "C" fn get_any(field: *mut c_void, result: *mut TVMFFIAny) -> c_int {
    ffi_status("a field getter", || {
        // SAFETY: the field holds a valid owned value (zeroed is None); it is cloned.
        let value = unsafe { (*field.cast::<Any>()).clone() };
        // SAFETY: a writable result that owns nothing.
        unsafe { result.write(value.into_raw()) };
        Ok(())
    })
}

/// Reads an object-reference field (a new reference; NULL reads as None).
unsafe extern "C" fn get_object(field: *mut c_void, result: *mut TVMFFIAny) -> c_int {
    ffi_status("a field getter", || {
        // SAFETY: the field holds NULL or an owned object pointer.
        let obj = unsafe { field.cast::<*mut TVMFFIObject>().read() };
        let value = if obj.is_null() {
            Any::none()
        } else {
            // SAFETY: a live object, borrowed from the field and copied into a new reference.
            unsafe { AnyView::from_object_ptr(obj) }.to_owned()
        };
        // SAFETY: a writable result that owns nothing.
        unsafe { result.write(value.into_raw()) };
        Ok(())
    })
}

/// The C field getter (`TVMFFIFieldGetter`) of a storage kind.
pub fn field_getter(storage: FieldStorage) -> abi::TVMFFIFieldGetter {
    let getter: unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> c_int = match storage {
        FieldStorage::Int => get_int,
        FieldStorage::Float => get_float,
        FieldStorage::Bool => get_bool,
        FieldStorage::OpaquePtr => get_ptr,
        FieldStorage::DataType => get_dtype,
        FieldStorage::Device => get_device,
        FieldStorage::Any => get_any,
        FieldStorage::Object => get_object,
    };
    Some(getter)
}

fn cast_for_field<T: TryFromAnyView>(value: &Any, storage: FieldStorage) -> Result<T> {
    value.cast::<T>().map_err(|_| {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "a field stored as {storage:?} cannot hold a value of type `{}`",
                value.type_key()
            ),
        )
    })
}

/// Stores `value` into the field at `field`, releasing what it held: a `TypeError` when the
/// value does not convert to the storage kind.
///
/// # Safety
/// `field` is the address of a live field stored as `storage`.
pub unsafe fn write_field(field: *mut c_void, storage: FieldStorage, value: Any) -> Result<()> {
    // SAFETY: (every arm) the caller guarantees a live field of this storage kind; unaligned
    // writes keep plain fields correct whatever offset a layout chose.
    unsafe {
        match storage {
            FieldStorage::Int => field
                .cast::<i64>()
                .write_unaligned(cast_for_field(&value, storage)?),
            FieldStorage::Float => {
                field
                    .cast::<f64>()
                    .write_unaligned(cast_for_field(&value, storage)?);
            }
            FieldStorage::Bool => {
                let flag: bool = cast_for_field(&value, storage)?;
                field.cast::<u8>().write(u8::from(flag));
            }
            FieldStorage::OpaquePtr => {
                let ptr: *mut c_void = cast_for_field(&value, storage)?;
                field.cast::<*mut c_void>().write_unaligned(ptr);
            }
            FieldStorage::DataType => {
                let dtype: DataType = cast_for_field(&value, storage)?;
                field.cast::<DLDataType>().write_unaligned(dtype.0);
            }
            FieldStorage::Device => {
                let device: Device = cast_for_field(&value, storage)?;
                field.cast::<DLDevice>().write_unaligned(device.0);
            }
            FieldStorage::Any => drop(std::ptr::replace(field.cast::<Any>(), value)),
            FieldStorage::Object => {
                let new = if value.is_none() {
                    std::ptr::null_mut()
                } else if value.is_object() {
                    value.into_raw().payload.v_obj
                } else {
                    return Err(Error::new(
                        ErrorKind::TypeError,
                        format!(
                            "an object field cannot hold a value of type `{}`",
                            value.type_key()
                        ),
                    ));
                };
                let old = std::ptr::replace(field.cast::<*mut TVMFFIObject>(), new);
                if !old.is_null() {
                    dec_ref(old);
                }
            }
        }
    }
    Ok(())
}

/// The converter a setter made by [`field_setter`] runs on each value before storing it:
/// `convert(converter, value, out)` returns 0 with an owned value in `out`, or -1 with the
/// error raised.
pub type FieldConverter =
    unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *mut TVMFFIAny) -> c_int;

/// A setter function `(field address, value) -> None` for a field stored as `storage`: the
/// value goes through `convert` (given `converter`), then into the field.
///
/// # Safety
/// `convert` accepts `converter` for as long as the function lives, and callers pass the address
/// of a live field stored as `storage`.
pub unsafe fn field_setter(
    storage: FieldStorage,
    converter: *mut c_void,
    convert: FieldConverter,
) -> Function {
    let converter = converter as usize;
    setter_function("a field setter".into(), move |field, value| {
        let mut converted = TVMFFIAny::NONE;
        // SAFETY: per this function's contract; `value` is valid for the call and `converted`
        // receives an owned value.
        let rc = unsafe { convert(converter as *mut c_void, value.as_raw(), &mut converted) };
        if rc != 0 {
            return Err(Error::take_raised_or(
                ErrorKind::TypeError,
                "a field converter failed",
            ));
        }
        // SAFETY: a successful converter writes an owned value.
        let converted = unsafe { Any::from_raw(converted) };
        // SAFETY: per this function's contract.
        unsafe { write_field(field, storage, converted) }
    })
}

/// A setter function `(field address, value) -> None` that checks its arguments, then runs
/// `store` with the (non-NULL) field address and the value; `what` names the field in errors.
pub(crate) fn setter_function(
    what: String,
    store: impl Fn(*mut c_void, AnyView<'_>) -> Result<()> + Send + Sync + 'static,
) -> Function {
    Function::from_packed(move |args: &[AnyView<'_>]| {
        let [address, value] = args else {
            crate::bail!(
                ErrorKind::TypeError,
                "{what} takes (field address, value), got {} argument(s)",
                args.len()
            );
        };
        let field: *mut c_void = address.cast()?;
        if field.is_null() {
            crate::bail!(ErrorKind::ValueError, "{what}: NULL field address");
        }
        store(field, *value)?;
        Ok(Any::none())
    })
}

/// Runs the setter a field record names on `value` (the record's C setter, or its setter
/// function).
///
/// # Safety
/// `field` is the address of the field `info` describes, in a live object.
unsafe fn call_setter(info: &TVMFFIFieldInfo, field: *mut c_void, value: &TVMFFIAny) -> Result<()> {
    if info.setter.is_null() {
        crate::bail!(ErrorKind::AttributeError, "the field has no setter");
    }
    if info.flags & abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj != 0 {
        // SAFETY: the flag says `setter` is a function object the type table keeps alive.
        let setter: Function = unsafe { AnyView::from_object_ptr(info.setter.cast()) }.cast()?;
        // SAFETY: `value` is valid for the call.
        let value = unsafe { AnyView::from_raw(*value) };
        let address = Any::from(field);
        setter.call_packed(&[address.as_view(), value])?;
        return Ok(());
    }
    type CSetter = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny) -> c_int;
    // SAFETY: without the flag, `setter` is a C setter of this signature.
    let setter: CSetter = unsafe { std::mem::transmute::<*mut c_void, CSetter>(info.setter) };
    // SAFETY: per this function's contract.
    if unsafe { setter(field, value) } != 0 {
        return Err(Error::take_raised_or(
            ErrorKind::RuntimeError,
            "a field setter failed",
        ));
    }
    Ok(())
}

/// Sets a field with a default (`HasDefault`) to it, calling the factory when the default is
/// one (`DefaultFromFactory`).
///
/// # Safety
/// As for [`call_setter`].
unsafe fn set_default(info: &TVMFFIFieldInfo, field: *mut c_void) -> Result<()> {
    if info.flags & abi::kTVMFFIFieldFlagBitMaskDefaultFromFactory != 0 {
        // SAFETY: the type table owns the default for the process.
        let factory: Function =
            unsafe { AnyView::from_raw(info.default_value_or_factory) }.cast()?;
        let value = factory.call_packed(&[])?;
        // SAFETY: forwarded.
        return unsafe { call_setter(info, field, value.as_raw()) };
    }
    // SAFETY: forwarded; the default lives in the type table.
    unsafe { call_setter(info, field, &info.default_value_or_factory) }
}

/// The address of `field` in the object at `obj`.
fn field_address(obj: *mut TVMFFIObject, field: &FieldRef) -> *mut c_void {
    obj.cast::<u8>().wrapping_add(field.offset()).cast()
}

/// The deleter of objects laid out at run time: releases the `Any` and object fields the type
/// table lists (strong phase), then frees the block (weak phase).
unsafe extern "C" fn layout_deleter(obj: *mut c_void, flags: c_int) {
    ffi_boundary("the deleter of a run-time laid-out object", || {
        let header = obj.cast::<TVMFFIObject>();
        if flags & abi::kTVMFFIObjectDeleterFlagBitMaskStrong != 0 {
            // SAFETY: the runtime calls the deleter with the object's header.
            let type_index = unsafe { (*header).type_index };
            for field in fields_of(type_index) {
                let address = field_address(header, &field);
                // SAFETY: each listed field lies in this object, stored as its record says; it
                // is released once, here.
                unsafe {
                    match FieldStorage::of_record(field.info) {
                        Some(FieldStorage::Any) => {
                            let value = address.cast::<Any>().read();
                            if value.is_object() {
                                dec_ref_deferred(value.into_raw().payload.v_obj);
                            }
                        }
                        Some(FieldStorage::Object) => {
                            let obj = address.cast::<*mut TVMFFIObject>().read();
                            if !obj.is_null() {
                                dec_ref_deferred(obj);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if flags & abi::kTVMFFIObjectDeleterFlagBitMaskWeak != 0 {
            // SAFETY: the block came from libc::malloc in `alloc_object_with_deleter`.
            unsafe { libc::free(obj) };
        }
    });
}

/// A zeroed object of `type_index` of `total_size` bytes (header included) whose deleter
/// releases its fields: a `ValueError` for a size below the header's.
pub fn new_object(type_index: i32, total_size: usize) -> Result<ObjectRef<Object>> {
    let header = size_of::<TVMFFIObject>();
    if total_size < header {
        crate::bail!(
            ErrorKind::ValueError,
            "object size {total_size} of type `{}` is smaller than the {header}-byte header",
            types::type_key_of(type_index)
        );
    }
    // SAFETY: the block holds a header and zeroed fields; the deleter releases the fields the
    // type lists and frees the block with libc::free.
    let ptr = unsafe {
        alloc_object_with_deleter(
            Object::header(),
            total_size - header,
            type_index,
            layout_deleter,
        )
    };
    // SAFETY: a new object with one strong reference, moved into the ObjectRef.
    Ok(unsafe { ObjectRef::from_raw(ptr.as_ptr().cast()) })
}

/// A copy of `src` (an object laid out at run time) sharing its field values: plain fields are
/// copied, references gain a reference.
fn shallow_copy(
    src: &ObjectRef<Object>,
    type_index: i32,
    total_size: usize,
) -> Result<ObjectRef<Object>> {
    let copy = new_object(type_index, total_size)?;
    for field in fields_of(type_index) {
        let from = field_address(src.as_raw(), &field);
        let to = field_address(copy.as_raw(), &field);
        // SAFETY: both objects have this type's layout; the new object's fields are zeroed and
        // receive their own references.
        unsafe {
            match FieldStorage::of_record(field.info) {
                Some(FieldStorage::Any) => to.cast::<Any>().write((*from.cast::<Any>()).clone()),
                Some(FieldStorage::Object) => {
                    let obj = from.cast::<*mut TVMFFIObject>().read();
                    if !obj.is_null() {
                        inc_ref(obj);
                    }
                    to.cast::<*mut TVMFFIObject>().write(obj);
                }
                _ => {
                    let size = usize::try_from(field.info.size).unwrap_or(0);
                    std::ptr::copy_nonoverlapping(from.cast::<u8>(), to.cast::<u8>(), size);
                }
            }
        }
    }
    Ok(copy)
}

/// The value of type attribute `name` for `type_index`, if the column exists and has one.
pub fn type_attr(type_index: i32, name: &str) -> Option<Any> {
    type_attr_value(type_index, name)
}

/// The function in column `__ffi_new__` for `type_index`, if any.
fn new_attr(type_index: i32) -> Option<Function> {
    static NEW: TypeAttr = TypeAttr::new("__ffi_new__");
    NEW.get(type_index)?.cast().ok()
}

/// A new, empty object of a registered type, through the type's creator (its metadata) or its
/// `__ffi_new__` function: a `RuntimeError` naming the type if it has neither.
pub fn create_empty(type_index: i32) -> Result<ObjectRef<Object>> {
    let info = types::type_info(type_index).ok_or_else(|| {
        Error::new(
            ErrorKind::KeyError,
            format!("unknown type index {type_index}"),
        )
    })?;
    // SAFETY: metadata, when present, lives in the type table for the process.
    if let Some(creator) = unsafe { info.metadata.as_ref() }.and_then(|m| m.creator) {
        let mut handle = std::ptr::null_mut();
        // SAFETY: a creator writes a new owned object or raises.
        if unsafe { creator(&mut handle) } != 0 || handle.is_null() {
            return Err(Error::take_raised_or(
                ErrorKind::RuntimeError,
                "a type creator failed",
            ));
        }
        // SAFETY: a new reference, moved in.
        return Ok(unsafe { ObjectRef::from_raw(handle.cast()) });
    }
    if let Some(new) = new_attr(type_index) {
        return new.call_packed(&[])?.cast();
    }
    Err(Error::new(
        ErrorKind::RuntimeError,
        format!(
            "Type `{}` does not support reflection creation (no native creator or __ffi_new__ \
             type attr)",
            types::type_key_of(type_index)
        ),
    ))
}

/// A field of a generated constructor. The field records themselves are looked up on each call:
/// the type table may move them when more are registered.
struct InitField {
    name: String,
    init: bool,
    kw_only: bool,
    has_default: bool,
}

/// What a generated `__ffi_init__` binds: the fields, the positional ones (required first), the
/// type key for messages.
struct InitPlan {
    type_index: i32,
    type_key: String,
    fields: Vec<InitField>,
    positional: Vec<usize>,
}

impl InitPlan {
    fn new(type_index: i32) -> InitPlan {
        let fields: Vec<InitField> = fields_of(type_index)
            .map(|field| {
                let flags = field.flags();
                InitField {
                    name: field.name().to_owned(),
                    init: flags & abi::kTVMFFIFieldFlagBitMaskInitOff == 0,
                    kw_only: flags & abi::kTVMFFIFieldFlagBitMaskKwOnly != 0,
                    has_default: flags & abi::kTVMFFIFieldFlagBitMaskHasDefault != 0,
                }
            })
            .collect();
        let mut positional: Vec<usize> = (0..fields.len())
            .filter(|&i| fields[i].init && !fields[i].kw_only)
            .collect();
        positional.sort_by_key(|&i| fields[i].has_default);
        InitPlan {
            type_index,
            type_key: types::type_key_of(type_index),
            fields,
            positional,
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::new(
            ErrorKind::TypeError,
            format!("{}.__ffi_init__() {message}", self.type_key),
        )
    }

    /// Wraps a setter's error with the field and where its value came from.
    fn setter_error(&self, field: &FieldRef, what: &str, err: Error) -> Error {
        let nested = err.message().replace('\n', "\n  ");
        Error::new(
            err.kind(),
            format!(
                "{}.__ffi_init__() {what} '{}':\n  {nested}",
                self.type_key,
                field.name()
            ),
        )
        .with_cause(err)
    }

    fn set(&self, obj: &ObjectRef<Object>, field: &FieldRef, value: &AnyView<'_>) -> Result<()> {
        // SAFETY: the object is a new instance of this type, which has the field.
        unsafe {
            call_setter(
                field.info,
                field_address(obj.as_raw(), field),
                value.as_raw(),
            )
        }
        .map_err(|e| self.setter_error(field, "field", e))
    }

    /// Builds an object from `args`: positional values, then optionally the KWARGS sentinel
    /// followed by name/value pairs.
    fn call(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let records: Vec<FieldRef> = fields_of(self.type_index).collect();
        if records.len() != self.fields.len() {
            return Err(Error::new(
                ErrorKind::RuntimeError,
                format!(
                    "{}.__ffi_init__() was generated for {} field(s), the type now has {}",
                    self.type_key,
                    self.fields.len(),
                    records.len()
                ),
            ));
        }
        let obj = create_empty(self.type_index)?;
        let mut set = vec![false; self.fields.len()];
        let kwargs = kwargs_sentinel()?;
        let split = args
            .iter()
            .position(|a| a.as_object_ptr() == Some(kwargs.as_raw()));
        let (positional, pairs) = match split {
            Some(at) => (&args[..at], &args[at + 1..]),
            None => (args, &[][..]),
        };
        if positional.len() > self.positional.len() {
            return Err(self.error(format!(
                "takes at most {} positional argument(s), but {} were given",
                self.positional.len(),
                positional.len()
            )));
        }
        for (value, &index) in positional.iter().zip(&self.positional) {
            self.set(&obj, &records[index], value)?;
            set[index] = true;
        }
        if pairs.len() % 2 != 0 {
            return Err(self.error("KWARGS requires an even number of key-value arguments"));
        }
        for pair in pairs.chunks_exact(2) {
            let name: String = pair[0].cast()?;
            let index = self
                .fields
                .iter()
                .position(|f| f.init && f.name == name)
                .ok_or_else(|| {
                    self.error(format!("got an unexpected keyword argument '{name}'"))
                })?;
            if set[index] {
                return Err(self.error(format!("got multiple values for argument '{name}'")));
            }
            self.set(&obj, &records[index], &pair[1])?;
            set[index] = true;
        }
        for (index, entry) in self.fields.iter().enumerate() {
            if set[index] {
                continue;
            }
            let field = &records[index];
            if entry.has_default {
                // SAFETY: as in `set`.
                unsafe { set_default(field.info, field_address(obj.as_raw(), field)) }
                    .map_err(|e| self.setter_error(field, "default for field", e))?;
            } else if entry.init {
                let which = if entry.kw_only {
                    "keyword-only argument"
                } else {
                    "argument"
                };
                return Err(self.error(format!("missing required {which}: '{}'", field.name())));
            }
        }
        Ok(obj.into())
    }
}

/// The process-wide KWARGS sentinel (`ffi.GetKwargsObject`).
fn kwargs_sentinel() -> Result<ObjectRef<Object>> {
    static SENTINEL: OnceLock<ObjectRef<Object>> = OnceLock::new();
    if let Some(sentinel) = SENTINEL.get() {
        return Ok(sentinel.clone());
    }
    let sentinel: ObjectRef<Object> = Function::get_global_required("ffi.GetKwargsObject")?
        .call_packed(&[])?
        .cast()?;
    Ok(SENTINEL.get_or_init(|| sentinel).clone())
}

fn check_type(type_index: i32) -> Result<()> {
    if type_index < abi::kTVMFFIStaticObjectBegin || types::type_info(type_index).is_none() {
        crate::bail!(
            ErrorKind::ValueError,
            "type index {type_index} is not a registered object type"
        );
    }
    Ok(())
}

/// Registers the generated constructor of a type as its `__ffi_init__`, from the fields it has
/// now (a `RuntimeError` if it already has one).
pub fn register_generated_init(type_index: i32) -> Result<()> {
    check_type(type_index)?;
    let plan = InitPlan::new(type_index);
    let init = Function::from_packed(move |args: &[AnyView<'_>]| plan.call(args));
    register_type_attr(type_index, "__ffi_init__", &init.into())
}

/// Registers what a type laid out at run time needs: `__ffi_init__` (generated),
/// `__ffi_new__` (a zeroed object of `total_size` bytes) and `__ffi_shallow_copy__`.
pub fn register_layout_type(type_index: i32, total_size: i64) -> Result<()> {
    check_type(type_index)?;
    let size = usize::try_from(total_size)
        .ok()
        .filter(|&s| s >= size_of::<TVMFFIObject>() && s <= i32::MAX as usize)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!(
                    "object size {total_size} of type `{}` is outside {}..={}",
                    types::type_key_of(type_index),
                    size_of::<TVMFFIObject>(),
                    i32::MAX
                ),
            )
        })?;
    register_generated_init(type_index)?;
    let new = Function::from_typed("__ffi_new__", move || new_object(type_index, size));
    register_type_attr(type_index, "__ffi_new__", &new.into())?;
    let copy = Function::from_typed("__ffi_shallow_copy__", move |src: ObjectRef<Object>| {
        if src.type_index() != type_index {
            crate::bail!(
                ErrorKind::TypeError,
                "__ffi_shallow_copy__ of `{}` got an object of type `{}`",
                types::type_key_of(type_index),
                src.header().type_key()
            );
        }
        shallow_copy(&src, type_index, size)
    });
    register_type_attr(type_index, "__ffi_shallow_copy__", &copy.into())
}

/// Creates an object of a reflected type from `(type index or key, name, value, ...)`: each
/// named field is set through its setter, the others get their defaults; a `TypeError` for a
/// required field without a value or a name that is not a field.
pub fn make_object_from_packed_args(args: &[AnyView<'_>]) -> Result<Any> {
    let Some((first, pairs)) = args.split_first() else {
        crate::bail!(
            ErrorKind::TypeError,
            "ffi.MakeObjectFromPackedArgs takes (type, name, value, ...), got no arguments"
        );
    };
    let type_index = match first.cast::<i64>().ok() {
        Some(index) => i32::try_from(index).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("type index {index} is out of range"),
            )
        })?,
        None => types::type_key_to_index(&first.cast::<String>()?)?,
    };
    if pairs.len() % 2 != 0 {
        crate::bail!(
            ErrorKind::TypeError,
            "ffi.MakeObjectFromPackedArgs takes name/value pairs after the type, got an odd \
             count {}",
            pairs.len()
        );
    }
    let key = types::type_key_of(type_index);
    let names = pairs
        .chunks_exact(2)
        .map(|pair| pair[0].cast::<String>())
        .collect::<Result<Vec<_>>>()?;
    let mut used = vec![false; names.len()];
    let obj = create_empty(type_index)?;
    for field in fields_of(type_index) {
        let address = field_address(obj.as_raw(), &field);
        let found = (0..names.len()).find(|&i| !used[i] && names[i] == field.name());
        match found {
            Some(i) => {
                used[i] = true;
                // SAFETY: the object is a new instance of the type, which has the field.
                unsafe { call_setter(field.info, address, pairs[2 * i + 1].as_raw())? };
            }
            None if field.flags() & abi::kTVMFFIFieldFlagBitMaskHasDefault != 0 => {
                // SAFETY: as above.
                unsafe { set_default(field.info, address)? };
            }
            None => crate::bail!(
                ErrorKind::TypeError,
                "Required field `{}` not set in type `{key}`",
                field.name()
            ),
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        crate::bail!(
            ErrorKind::TypeError,
            "Type `{key}` does not have field `{}`",
            names[i]
        );
    }
    Ok(obj.into())
}

/// The `ffi.*` globals of this module, for the runtime's registry.
pub fn functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.MakeFieldGetter",
            Function::from_typed("ffi.MakeFieldGetter", |index: i32| {
                let getter = field_getter(FieldStorage::of(index)?).expect("a getter");
                Ok::<i64, Error>(getter as usize as i64)
            }),
        ),
        (
            "ffi.MakeFieldSetter",
            Function::from_typed(
                "ffi.MakeFieldSetter",
                |index: i32, converter: i64, convert: i64| {
                    let storage = FieldStorage::of(index)?;
                    if convert == 0 {
                        crate::bail!(
                            ErrorKind::ValueError,
                            "ffi.MakeFieldSetter: the converter function is NULL"
                        );
                    }
                    // SAFETY: the caller passes a converter function with this signature and
                    // a converter object it keeps alive with the type (apache-tvm-ffi's
                    // contract for this global).
                    let convert =
                        unsafe { std::mem::transmute::<usize, FieldConverter>(convert as usize) };
                    // SAFETY: as above.
                    Ok(
                        unsafe {
                            field_setter(storage, converter as usize as *mut c_void, convert)
                        },
                    )
                },
            ),
        ),
        (
            "ffi._PyClassRegisterTypeAttrColumns",
            Function::from_typed(
                "ffi._PyClassRegisterTypeAttrColumns",
                |index: i32, total_size: i64| register_layout_type(index, total_size),
            ),
        ),
        (
            "ffi._RegisterFFIInit",
            Function::from_typed("ffi._RegisterFFIInit", register_generated_init),
        ),
        (
            "ffi.MakeObjectFromPackedArgs",
            Function::from_packed(make_object_from_packed_args),
        ),
    ]
}
