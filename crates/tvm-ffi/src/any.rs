//! `Any` (an owning 16-byte tagged value) and `AnyView` (the same layout, borrowing), with the
//! conversions between them and Rust types.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use crate::abi::{self, TVMFFIAny, TVMFFIAnyPayload, TVMFFIObject, kTVMFFIStaticObjectBegin};
use crate::device::Device;
use crate::dtype::{DataType, parse_dtype};
use crate::error::{Error, ErrorKind};
use crate::object::{ObjectCore, ObjectRef, dec_ref, inc_ref};
use crate::string::{ByteKind, ByteSeq, Bytes, String, new_bytes_any};
use crate::types;

/// An owning value: holds one strong reference when it holds an object.
#[repr(transparent)]
pub struct Any {
    raw: TVMFFIAny,
}

// SAFETY: objects are reference counted atomically; raw pointers (opaque pointers, DLTensor*)
// are plain addresses whose thread rules belong to their owners, as in C.
unsafe impl Send for Any {}
// SAFETY: as above; `Any` offers no interior mutation.
unsafe impl Sync for Any {}

/// A borrowed value, valid for `'a`; arguments of packed calls are views.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct AnyView<'a> {
    raw: TVMFFIAny,
    _borrow: PhantomData<&'a ()>,
}

fn payload_i64(v: i64) -> TVMFFIAnyPayload {
    TVMFFIAnyPayload { v_int64: v }
}

impl Any {
    /// The None value.
    pub const fn none() -> Any {
        Any {
            raw: TVMFFIAny::NONE,
        }
    }

    /// Takes ownership of a raw value.
    ///
    /// # Safety
    /// `raw` is a canonical owning value: it holds one strong reference if it is an object, and
    /// is none of the view-only kinds (raw C string, byte-array pointer, rvalue reference).
    pub const unsafe fn from_raw(raw: TVMFFIAny) -> Any {
        Any { raw }
    }

    /// Gives up ownership of the raw value.
    #[inline]
    pub fn into_raw(self) -> TVMFFIAny {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw value, borrowed.
    #[inline]
    pub fn as_raw(&self) -> &TVMFFIAny {
        &self.raw
    }

    /// The type index of the value.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.raw.type_index
    }

    /// Whether the value is None.
    #[inline]
    pub fn is_none(&self) -> bool {
        self.raw.type_index == abi::kTVMFFINone
    }

    /// Whether the value holds an object.
    #[inline]
    pub fn is_object(&self) -> bool {
        self.raw.type_index >= kTVMFFIStaticObjectBegin
    }

    /// A view of this value.
    #[inline]
    pub fn as_view(&self) -> AnyView<'_> {
        AnyView {
            raw: self.raw,
            _borrow: PhantomData,
        }
    }

    /// The type key of the value's type (`"int"`, `"ffi.Array"`, ...).
    pub fn type_key(&self) -> std::string::String {
        types::type_key_of(self.raw.type_index)
    }

    /// Converts to `T` if the value has a compatible type.
    pub fn try_as<T: TryFromAnyView>(&self) -> Option<T> {
        T::try_from_view(&self.as_view())
    }

    /// Converts to `T`, or a `TypeError` naming both types.
    pub fn cast<T: TryFromAnyView>(&self) -> Result<T, Error> {
        self.as_view().cast()
    }

    /// Wraps an object reference.
    pub fn from_object<T: ObjectCore>(obj: ObjectRef<T>) -> Any {
        let type_index = obj.type_index();
        Any {
            raw: TVMFFIAny {
                type_index,
                small_str_len: 0,
                payload: TVMFFIAnyPayload {
                    v_obj: obj.into_raw(),
                },
            },
        }
    }

    /// The object pointer, if the value holds an object (borrowed).
    #[inline]
    pub fn as_object_ptr(&self) -> Option<*mut TVMFFIObject> {
        // SAFETY: every payload is 8 initialized bytes; object values keep `v_obj` there.
        self.is_object()
            .then_some(unsafe { self.raw.payload.v_obj })
    }

    /// The object held, viewed as a `T`, if the value holds an object of type `T` (or a
    /// subtype); borrowed, so no reference count changes.
    pub fn as_object<T: ObjectCore>(&self) -> Option<&T> {
        self.as_view().as_object()
    }
}

impl Default for Any {
    fn default() -> Any {
        Any::none()
    }
}

impl Clone for Any {
    fn clone(&self) -> Any {
        if let Some(obj) = self.as_object_ptr() {
            // SAFETY: `self` holds a strong reference.
            unsafe { inc_ref(obj) };
        }
        Any { raw: self.raw }
    }
}

impl Drop for Any {
    #[inline]
    fn drop(&mut self) {
        if let Some(obj) = self.as_object_ptr() {
            // SAFETY: `self` owns one strong reference.
            unsafe { dec_ref(obj) };
        }
    }
}

impl<'a> AnyView<'a> {
    /// The None value.
    pub const fn none() -> AnyView<'static> {
        AnyView {
            raw: TVMFFIAny::NONE,
            _borrow: PhantomData,
        }
    }

    /// Views a raw value.
    ///
    /// # Safety
    /// Objects and pointers in `raw` stay valid for `'a`.
    pub const unsafe fn from_raw(raw: TVMFFIAny) -> AnyView<'a> {
        AnyView {
            raw,
            _borrow: PhantomData,
        }
    }

    /// Views the object at `obj`, with the type index its header holds.
    ///
    /// # Safety
    /// `obj` points at a live object that stays alive for `'a`.
    pub(crate) unsafe fn from_object_ptr(obj: *mut TVMFFIObject) -> AnyView<'a> {
        AnyView {
            raw: TVMFFIAny {
                // SAFETY: the caller guarantees a live object header.
                type_index: unsafe { (*obj).type_index },
                small_str_len: 0,
                payload: TVMFFIAnyPayload { v_obj: obj },
            },
            _borrow: PhantomData,
        }
    }

    /// The raw value.
    #[inline]
    pub fn as_raw(&self) -> &TVMFFIAny {
        &self.raw
    }

    /// The type index of the value.
    #[inline]
    pub fn type_index(&self) -> i32 {
        self.raw.type_index
    }

    /// The type key of the value's type.
    pub fn type_key(&self) -> std::string::String {
        types::type_key_of(self.raw.type_index)
    }

    /// The type name for messages: inline and borrowed forms are named after the type they
    /// stand for (`ffi.String` for small and raw C strings, `ffi.Bytes` for small bytes and
    /// byte-array pointers); every other value by its type key.
    pub fn type_name(&self) -> std::string::String {
        match self.raw.type_index {
            abi::kTVMFFISmallStr | abi::kTVMFFIRawStr => "ffi.String".to_owned(),
            abi::kTVMFFISmallBytes | abi::kTVMFFIByteArrayPtr => "ffi.Bytes".to_owned(),
            _ => self.type_key(),
        }
    }

    /// Whether the value is None.
    #[inline]
    pub fn is_none(&self) -> bool {
        self.raw.type_index == abi::kTVMFFINone
    }

    /// An owning copy: objects gain a reference, raw C strings and byte arrays are copied into
    /// `String`/`Bytes`, an rvalue reference gives up its object; other values are copied bit for
    /// bit. An rvalue reference that was already moved from (or a NULL string pointer) gives None;
    /// [`AnyView::try_to_owned`] reports those as errors.
    pub fn to_owned(&self) -> Any {
        self.try_to_owned().unwrap_or_default()
    }

    /// As [`AnyView::to_owned`], reporting a moved-from rvalue reference as an error.
    #[inline]
    pub fn try_to_owned(&self) -> Result<Any, Error> {
        let raw = self.raw;
        if raw.type_index >= kTVMFFIStaticObjectBegin {
            // SAFETY: the view borrows a live object.
            unsafe { inc_ref(raw.payload.v_obj) };
            return Ok(Any { raw });
        }
        if raw.type_index < abi::kTVMFFIRawStr {
            // None, ints, floats, pointers, dtypes, devices: plain values, copied as they are.
            return Ok(Any { raw });
        }
        self.try_to_owned_special()
    }

    /// [`AnyView::try_to_owned`] of the values that need more than a copy: raw strings and
    /// byte arrays become owned, rvalue references give up their object.
    #[inline(never)]
    fn try_to_owned_special(&self) -> Result<Any, Error> {
        let raw = self.raw;
        match raw.type_index {
            abi::kTVMFFIRawStr | abi::kTVMFFIByteArrayPtr => {
                let bytes = crate::string::bytes_of_view(self).ok_or_else(|| {
                    Error::new(ErrorKind::ValueError, "NULL string pointer in a value")
                })?;
                if raw.type_index == abi::kTVMFFIRawStr {
                    new_bytes_any(bytes, abi::kTVMFFISmallStr, abi::kTVMFFIStr)
                } else {
                    new_bytes_any(bytes, abi::kTVMFFISmallBytes, abi::kTVMFFIBytes)
                }
            }
            abi::kTVMFFIObjectRValueRef => {
                // SAFETY: an rvalue reference points at a slot holding an owned object pointer.
                let slot = unsafe { raw.payload.v_ptr.cast::<*mut TVMFFIObject>() };
                // SAFETY: the slot is valid for the view's lifetime; we take what it holds.
                let obj = unsafe { std::mem::replace(&mut *slot, std::ptr::null_mut()) };
                if obj.is_null() {
                    return Err(Error::new(
                        ErrorKind::InternalError,
                        "RValueRef already moved",
                    ));
                }
                // SAFETY: we now own the reference that was in the slot.
                Ok(Any::from_object(unsafe {
                    ObjectRef::<crate::object::Object>::from_raw(obj)
                }))
            }
            _ => Ok(Any { raw }),
        }
    }

    /// Converts to `T`, or a `TypeError` naming both types.
    pub fn cast<T: TryFromAnyView>(&self) -> Result<T, Error> {
        T::try_from_view(self).ok_or_else(|| self.cast_error(T::TYPE_NAME))
    }

    /// The error of a failed cast of this value to `target`.
    #[cold]
    fn cast_error(&self, target: &str) -> Error {
        if let Some(error) = self.text_error(target, "Cannot convert") {
            return error;
        }
        Error::new(
            ErrorKind::TypeError,
            format!(
                "Cannot convert from type `{}` to `{target}`",
                self.type_name()
            ),
        )
    }

    /// The `ValueError` of a string that `target`, text, cannot take because it is not valid
    /// UTF-8 (`None` for any other value or target): "`{context}`: an `ffi.String` that is
    /// not valid UTF-8: b"..." (byte 0xff at offset 3)", naming the bytes.
    #[cold]
    pub(crate) fn text_error(&self, target: &str, context: &str) -> Option<Error> {
        if target != String::TYPE_NAME
            || !matches!(
                self.raw.type_index,
                abi::kTVMFFIStr | abi::kTVMFFISmallStr | abi::kTVMFFIRawStr
            )
        {
            return None;
        }
        let bytes = crate::string::bytes_of_view(self)?;
        let bad = std::str::from_utf8(bytes).err()?.valid_up_to();
        Some(Error::new(
            ErrorKind::ValueError,
            format!(
                "{context}: expected `{target}` as valid UTF-8, but got the string {} \
                 (byte 0x{:02x} at offset {bad} is not valid UTF-8)",
                crate::string::bytes_literal(bytes, 200),
                bytes[bad]
            ),
        ))
    }

    /// The object pointer, if the value holds an object (borrowed).
    #[inline]
    pub fn as_object_ptr(&self) -> Option<*mut TVMFFIObject> {
        // SAFETY: every payload is 8 initialized bytes; object values keep `v_obj` there.
        (self.raw.type_index >= kTVMFFIStaticObjectBegin)
            .then_some(unsafe { self.raw.payload.v_obj })
    }

    /// The object viewed, as a `T`, if the value holds an object of type `T` (or a subtype);
    /// borrowed for as long as the view is valid, so no reference count changes.
    pub fn as_object<T: ObjectCore>(&self) -> Option<&'a T> {
        let obj = self.as_object_ptr()?;
        // SAFETY: the view keeps the object alive for `'a`; its runtime type was checked, and
        // `ObjectCore` types are laid out from the header.
        T::is_instance(self.raw.type_index).then(|| unsafe { &*obj.cast::<T>() })
    }

    /// [`AnyView::as_object`], or the `TypeError` of [`AnyView::cast`] when the value is not a
    /// `T`: a borrowed cast, with no reference count round trip (such as a function argument
    /// that is only called).
    pub fn cast_object<T: ObjectCore>(&self) -> Result<&'a T, Error> {
        self.as_object::<T>()
            .ok_or_else(|| self.cast_error(T::TYPE_KEY))
    }
}

impl<'a> From<&'a Any> for AnyView<'a> {
    fn from(value: &'a Any) -> AnyView<'a> {
        value.as_view()
    }
}

impl<'a, T: ObjectCore> From<&'a ObjectRef<T>> for AnyView<'a> {
    fn from(obj: &'a ObjectRef<T>) -> AnyView<'a> {
        AnyView {
            raw: TVMFFIAny {
                type_index: obj.type_index(),
                small_str_len: 0,
                payload: TVMFFIAnyPayload {
                    v_obj: obj.as_raw(),
                },
            },
            _borrow: PhantomData,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rust values into Any
// ---------------------------------------------------------------------------------------------

fn pod(type_index: i32, payload: TVMFFIAnyPayload) -> Any {
    Any {
        raw: TVMFFIAny {
            type_index,
            small_str_len: 0,
            payload,
        },
    }
}

impl From<()> for Any {
    fn from(_: ()) -> Any {
        Any::none()
    }
}

impl From<bool> for Any {
    fn from(v: bool) -> Any {
        pod(abi::kTVMFFIBool, payload_i64(i64::from(v)))
    }
}

macro_rules! int_into_any {
    ($($t:ty),*) => {$(
        impl From<$t> for Any {
            fn from(v: $t) -> Any {
                pod(abi::kTVMFFIInt, payload_i64(i64::from(v)))
            }
        }
    )*};
}
int_into_any!(i8, i16, i32, i64, u8, u16, u32);

impl From<f64> for Any {
    fn from(v: f64) -> Any {
        pod(abi::kTVMFFIFloat, TVMFFIAnyPayload { v_float64: v })
    }
}

impl From<f32> for Any {
    fn from(v: f32) -> Any {
        Any::from(f64::from(v))
    }
}

impl From<&str> for Any {
    fn from(v: &str) -> Any {
        String::new(v).into()
    }
}

impl From<std::string::String> for Any {
    fn from(v: std::string::String) -> Any {
        String::new(&v).into()
    }
}

impl From<DataType> for Any {
    fn from(v: DataType) -> Any {
        let mut payload = TVMFFIAnyPayload { v_uint64: 0 };
        payload.v_dtype = v.0;
        pod(abi::kTVMFFIDataType, payload)
    }
}

impl From<Device> for Any {
    fn from(v: Device) -> Any {
        pod(abi::kTVMFFIDevice, TVMFFIAnyPayload { v_device: v.0 })
    }
}

impl From<*mut c_void> for Any {
    fn from(v: *mut c_void) -> Any {
        if v.is_null() {
            return Any::none();
        }
        let mut payload = TVMFFIAnyPayload { v_uint64: 0 };
        payload.v_ptr = v;
        pod(abi::kTVMFFIOpaquePtr, payload)
    }
}

impl<T: ObjectCore> From<ObjectRef<T>> for Any {
    fn from(obj: ObjectRef<T>) -> Any {
        Any::from_object(obj)
    }
}

impl From<Error> for Any {
    fn from(err: Error) -> Any {
        Any::from_object(err.as_object().clone())
    }
}

impl<T: Into<Any>> From<Option<T>> for Any {
    fn from(v: Option<T>) -> Any {
        v.map_or_else(Any::none, Into::into)
    }
}

// ---------------------------------------------------------------------------------------------
// Any into Rust values
// ---------------------------------------------------------------------------------------------

/// Conversion from a borrowed value into an owned Rust value, following the conversion rules of
/// the typed layer (an int is accepted where a float is expected, a string where a dtype is, ...).
pub trait TryFromAnyView: Sized {
    /// The schema name used in type errors (`"int"`, `"ffi.String"`, ...).
    const TYPE_NAME: &'static str;

    /// The converted value, or `None` if the value's type is not accepted.
    fn try_from_view(view: &AnyView<'_>) -> Option<Self>;

    /// The type schema JSON of the type (`{"type":"int"}`; an `Option` or a typed container
    /// puts its element types in `args`), which typed functions record for stubs.
    fn type_schema() -> std::string::String {
        format!(r#"{{"type":"{}"}}"#, Self::TYPE_NAME)
    }

    /// Why `view` does not convert, beyond its type (a typed container names the element that
    /// is not of its element type); `None` when the type says it all.
    fn mismatch(_view: &AnyView<'_>) -> Option<std::string::String> {
        None
    }
}

impl TryFromAnyView for Any {
    const TYPE_NAME: &'static str = "Any";
    fn try_from_view(view: &AnyView<'_>) -> Option<Any> {
        Some(view.to_owned())
    }
}

impl TryFromAnyView for () {
    const TYPE_NAME: &'static str = "None";
    fn try_from_view(view: &AnyView<'_>) -> Option<()> {
        view.is_none().then_some(())
    }
}

impl TryFromAnyView for bool {
    const TYPE_NAME: &'static str = "bool";
    fn try_from_view(view: &AnyView<'_>) -> Option<bool> {
        match view.raw.type_index {
            // SAFETY: ints and bools store `v_int64`.
            abi::kTVMFFIBool | abi::kTVMFFIInt => Some(unsafe { view.raw.payload.v_int64 } != 0),
            _ => None,
        }
    }
}

macro_rules! int_from_view {
    ($($t:ty),*) => {$(
        impl TryFromAnyView for $t {
            const TYPE_NAME: &'static str = "int";
            fn try_from_view(view: &AnyView<'_>) -> Option<$t> {
                match view.raw.type_index {
                    abi::kTVMFFIInt | abi::kTVMFFIBool => {
                        // SAFETY: ints and bools store `v_int64`.
                        <$t>::try_from(unsafe { view.raw.payload.v_int64 }).ok()
                    }
                    _ => None,
                }
            }
        }
    )*};
}
int_from_view!(i8, i16, i32, i64, u8, u16, u32, u64, isize, usize);

impl TryFromAnyView for f64 {
    const TYPE_NAME: &'static str = "float";
    fn try_from_view(view: &AnyView<'_>) -> Option<f64> {
        match view.raw.type_index {
            // SAFETY: floats store `v_float64`.
            abi::kTVMFFIFloat => Some(unsafe { view.raw.payload.v_float64 }),
            // SAFETY: ints and bools store `v_int64`.
            abi::kTVMFFIInt | abi::kTVMFFIBool => Some(unsafe { view.raw.payload.v_int64 } as f64),
            _ => None,
        }
    }
}

impl TryFromAnyView for f32 {
    const TYPE_NAME: &'static str = "float";
    fn try_from_view(view: &AnyView<'_>) -> Option<f32> {
        f64::try_from_view(view).map(|v| v as f32)
    }
}

impl<K: ByteKind> TryFromAnyView for ByteSeq<K> {
    const TYPE_NAME: &'static str = K::TYPE_NAME;
    fn try_from_view(view: &AnyView<'_>) -> Option<ByteSeq<K>> {
        ByteSeq::try_from_view(view)
    }
}

impl TryFromAnyView for std::string::String {
    const TYPE_NAME: &'static str = String::TYPE_NAME;
    fn try_from_view(view: &AnyView<'_>) -> Option<std::string::String> {
        let s = String::try_from_view(view)?;
        s.to_str().ok().map(str::to_owned)
    }
}

impl TryFromAnyView for DataType {
    const TYPE_NAME: &'static str = "DataType";
    fn try_from_view(view: &AnyView<'_>) -> Option<DataType> {
        match view.raw.type_index {
            // SAFETY: data types store `v_dtype`.
            abi::kTVMFFIDataType => Some(DataType(unsafe { view.raw.payload.v_dtype })),
            _ => {
                let text = std::string::String::try_from_view(view)?;
                parse_dtype(&text).ok().map(DataType)
            }
        }
    }
}

impl TryFromAnyView for Device {
    const TYPE_NAME: &'static str = "Device";
    fn try_from_view(view: &AnyView<'_>) -> Option<Device> {
        match view.raw.type_index {
            // SAFETY: devices store `v_device`.
            abi::kTVMFFIDevice => Some(Device(unsafe { view.raw.payload.v_device })),
            _ => None,
        }
    }
}

impl TryFromAnyView for *mut c_void {
    const TYPE_NAME: &'static str = "void*";
    fn try_from_view(view: &AnyView<'_>) -> Option<*mut c_void> {
        match view.raw.type_index {
            // SAFETY: opaque pointers store `v_ptr`.
            abi::kTVMFFIOpaquePtr => Some(unsafe { view.raw.payload.v_ptr }),
            abi::kTVMFFINone => Some(std::ptr::null_mut()),
            _ => None,
        }
    }
}

impl<T: ObjectCore> TryFromAnyView for ObjectRef<T> {
    const TYPE_NAME: &'static str = T::TYPE_KEY;
    fn try_from_view(view: &AnyView<'_>) -> Option<ObjectRef<T>> {
        let obj = view.as_object_ptr()?;
        // SAFETY: the view borrows a live object; its runtime type is checked first.
        T::is_instance(view.raw.type_index).then(|| unsafe { ObjectRef::from_borrowed(obj) })
    }
}

impl TryFromAnyView for Error {
    const TYPE_NAME: &'static str = "ffi.Error";
    fn try_from_view(view: &AnyView<'_>) -> Option<Error> {
        ObjectRef::<crate::error::ErrorObj>::try_from_view(view).map(Error::from_object)
    }
}

impl<T: TryFromAnyView> TryFromAnyView for Option<T> {
    const TYPE_NAME: &'static str = T::TYPE_NAME;
    fn try_from_view(view: &AnyView<'_>) -> Option<Option<T>> {
        if view.is_none() {
            Some(None)
        } else {
            T::try_from_view(view).map(Some)
        }
    }

    fn type_schema() -> std::string::String {
        format!(r#"{{"type":"Optional","args":[{}]}}"#, T::type_schema())
    }
}

impl fmt::Debug for AnyView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = &self.raw;
        // SAFETY: each arm reads the payload member its type index selects.
        unsafe {
            match raw.type_index {
                abi::kTVMFFINone => f.write_str("None"),
                abi::kTVMFFIInt => write!(f, "{}", raw.payload.v_int64),
                abi::kTVMFFIBool => write!(f, "{}", raw.payload.v_int64 != 0),
                abi::kTVMFFIFloat => write!(f, "{:?}", raw.payload.v_float64),
                abi::kTVMFFIDataType => write!(f, "{}", DataType(raw.payload.v_dtype)),
                abi::kTVMFFIDevice => write!(f, "{}", Device(raw.payload.v_device)),
                abi::kTVMFFIOpaquePtr => write!(f, "void*({:p})", raw.payload.v_ptr),
                abi::kTVMFFISmallStr | abi::kTVMFFIStr | abi::kTVMFFIRawStr => {
                    write!(f, "{:?}", String::try_from_view(self).unwrap_or_default())
                }
                abi::kTVMFFISmallBytes | abi::kTVMFFIBytes | abi::kTVMFFIByteArrayPtr => {
                    write!(f, "{:?}", Bytes::try_from_view(self).unwrap_or_default())
                }
                index if index >= kTVMFFIStaticObjectBegin => {
                    write!(f, "{}({:p})", self.type_key(), raw.payload.v_obj)
                }
                _ => write!(f, "{}({:#x})", self.type_key(), raw.payload.v_uint64),
            }
        }
    }
}

impl fmt::Debug for Any {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_view().fmt(f)
    }
}
