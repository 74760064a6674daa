//! Plain values (None, bool, int, float, str, bytes) between local and wire form: session
//! constructor arguments, and the arguments and results of callbacks.

use tvm_ffi::abi::{
    kTVMFFIBool, kTVMFFIByteArrayPtr, kTVMFFIBytes, kTVMFFIFloat, kTVMFFIInt, kTVMFFINone,
    kTVMFFIRawStr, kTVMFFISmallBytes, kTVMFFISmallStr, kTVMFFIStr,
};
use tvm_ffi::{Any, AnyView, ErrorKind, Result};

use crate::codec::WireValue;

/// A plain local value as a wire value; `what` names the value in the error for anything else.
pub fn plain_to_wire(value: &AnyView<'_>, what: &str) -> Result<WireValue> {
    Ok(match value.type_index() {
        kTVMFFINone => WireValue::None,
        kTVMFFIBool => WireValue::Bool(value.cast()?),
        kTVMFFIInt => WireValue::Int(value.cast()?),
        kTVMFFIFloat => WireValue::Float(value.cast()?),
        kTVMFFIRawStr | kTVMFFISmallStr | kTVMFFIStr => {
            let text = tvm_ffi::String::try_from_view(value)
                .ok_or_else(|| tvm_ffi::Error::new(ErrorKind::TypeError, "unreadable string"))?;
            WireValue::RawStr(text.as_bytes().to_vec())
        }
        kTVMFFIByteArrayPtr | kTVMFFISmallBytes | kTVMFFIBytes => {
            let bytes = tvm_ffi::Bytes::try_from_view(value)
                .ok_or_else(|| tvm_ffi::Error::new(ErrorKind::TypeError, "unreadable bytes"))?;
            WireValue::Bytes(bytes.as_bytes().to_vec())
        }
        _ => tvm_ffi::bail!(
            ErrorKind::TypeError,
            "{what} must be a str, bytes, int, float, bool or None, got {}",
            value.type_key()
        ),
    })
}

/// A plain wire value as a local value; `what` names the value in the error for anything else.
pub fn plain_from_wire(value: &WireValue, what: &str) -> Result<Any> {
    Ok(match value {
        WireValue::None => Any::none(),
        WireValue::Int(v) => Any::from(*v),
        WireValue::Bool(v) => Any::from(*v),
        WireValue::Float(v) => Any::from(*v),
        WireValue::RawStr(s) | WireValue::Str(s) => tvm_ffi::String::from_bytes(s).into_any(),
        WireValue::ByteArray(s) | WireValue::Bytes(s) => tvm_ffi::Bytes::from_bytes(s).into_any(),
        other => tvm_ffi::bail!(
            ErrorKind::TypeError,
            "{what} must be a str, bytes, int, float, bool or None, got {}",
            other.kind()
        ),
    })
}

/// A returned value list (type index, value) of plain values as a local value.
pub fn plain_from_return(values: &[WireValue], what: &str) -> Result<Any> {
    match values {
        [WireValue::Int(_), value, ..] => plain_from_wire(value, what),
        [] => Ok(Any::none()),
        _ => tvm_ffi::bail!(ErrorKind::ValueError, "{what}: a malformed return list"),
    }
}
