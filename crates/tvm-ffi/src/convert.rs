//! `__ffi_convert__`: the type attribute through which a caller converts a value into one of
//! the core object types (a Python list into an `ffi.Shape`, an `ffi.List` into an `ffi.Array`,
//! a string into an `ffi.String`, ...). Each entry is a function `(value) -> T` that applies the
//! typed layer's conversion rules ([`TryFromAnyView`]) and fails with a `TypeError`
//! "Cannot cast from `<key of the value>` to `<T>`".

use crate::abi::{
    kTVMFFIArray, kTVMFFIBytes, kTVMFFIDict, kTVMFFIError, kTVMFFIFunction, kTVMFFIList,
    kTVMFFIMap, kTVMFFIObject, kTVMFFIShape, kTVMFFIStr, kTVMFFITensor,
};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::containers::array::{Array, List};
use crate::containers::map::{Dict, Map};
use crate::containers::shape::Shape;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{Object, ObjectRef};
use crate::string::{Bytes, String};
use crate::tensor::Tensor;

/// The name of the type attribute.
pub const CONVERT_ATTR: &str = "__ffi_convert__";

/// The conversion of one value into `T`, or the `TypeError` naming both types.
pub fn convert_to<T: TryFromAnyView>(value: &AnyView<'_>) -> Result<T> {
    T::try_from_view(value).ok_or_else(|| {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "Cannot cast from `{}` to `{}`",
                value.type_key(),
                T::TYPE_NAME
            ),
        )
    })
}

/// The `__ffi_convert__` function of `T`: one argument, converted, returned as an owned value.
pub fn converter<T>() -> Function
where
    T: TryFromAnyView + Into<Any> + 'static,
{
    Function::from_packed(|args| match args {
        [value] => convert_to::<T>(value).map(Into::into),
        _ => Err(Error::new(
            ErrorKind::TypeError,
            format!(
                "{CONVERT_ATTR} of `{}` takes 1 argument, got {}",
                T::TYPE_NAME,
                args.len()
            ),
        )),
    })
}

/// Registers `__ffi_convert__` for the core object types, as apache-tvm-ffi does at load:
/// `ffi.Object` (any object, or None), `ffi.String`, `ffi.Bytes`, `ffi.Error`, `ffi.Function`,
/// `ffi.Shape`, `ffi.Tensor`, `ffi.Array`, `ffi.Map`, `ffi.List` and `ffi.Dict`.
pub fn register_core_converters() -> Result<()> {
    let entries: [(i32, Function); 11] = [
        (kTVMFFIObject, converter::<Option<ObjectRef<Object>>>()),
        (kTVMFFIStr, converter::<String>()),
        (kTVMFFIBytes, converter::<Bytes>()),
        (kTVMFFIError, converter::<Error>()),
        (kTVMFFIFunction, converter::<Function>()),
        (kTVMFFIShape, converter::<Shape>()),
        (kTVMFFITensor, converter::<Tensor>()),
        (kTVMFFIArray, converter::<Array>()),
        (kTVMFFIMap, converter::<Map>()),
        (kTVMFFIList, converter::<List>()),
        (kTVMFFIDict, converter::<Dict>()),
    ];
    for (type_index, function) in entries {
        crate::reflection::register_type_attr(type_index, CONVERT_ATTR, &function.into())?;
    }
    Ok(())
}
