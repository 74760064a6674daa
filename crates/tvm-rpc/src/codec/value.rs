//! One value of a packed sequence, and the tensor descriptor the protocol carries.

use tvm_ffi::abi::{
    DLDataType, DLDevice, kTVMFFIBool, kTVMFFIByteArrayPtr, kTVMFFIBytes, kTVMFFIDLTensorPtr,
    kTVMFFIDataType, kTVMFFIDevice, kTVMFFIFloat, kTVMFFIFunction, kTVMFFIInt, kTVMFFIModule,
    kTVMFFINone, kTVMFFIOpaquePtr, kTVMFFIRawStr, kTVMFFISmallBytes, kTVMFFISmallStr,
    kTVMFFIStaticObjectBegin, kTVMFFIStr, kTVMFFITensor,
};

use super::{DecodeError, Decoder, Encoder, MAX_NDIM};

/// The static type index of a reference to an object that lives on the remote side.
pub const RPC_OBJECT_REF_INDEX: i32 = 115;

/// The outer type index of a callback: a function that lives on the *sending* side, which the
/// receiver calls back over the same connection (own protocol version only).
pub const RPC_CALLBACK_INDEX: i32 = 116;

/// A tensor as the protocol describes it: no strides (always compact), and a data address that
/// is only meaningful on the side that owns the memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    /// The remote data address.
    pub data: u64,
    /// The remote device (never carrying the session mask).
    pub device: DLDevice,
    /// The element type.
    pub dtype: DLDataType,
    /// The dimensions.
    pub shape: Vec<i64>,
    /// Offset of the first element from `data`, in bytes.
    pub byte_offset: u64,
}

impl TensorMeta {
    /// Number of bytes of the compact tensor; `None` on a negative dimension or overflow.
    pub fn nbytes(&self) -> Option<u64> {
        let mut elements: u64 = 1;
        for &dim in &self.shape {
            elements = elements.checked_mul(u64::try_from(dim).ok()?)?;
        }
        let element_bits = u64::from(self.dtype.bits) * u64::from(self.dtype.lanes);
        elements.checked_mul(element_bits.div_ceil(8))
    }

    /// Bytes the descriptor takes on the wire.
    pub fn encoded_len(&self) -> usize {
        32 + 8 * self.shape.len()
    }

    pub(super) fn encode(&self, out: &mut Encoder) {
        out.u64(self.data);
        out.i32(self.device.device_type);
        out.i32(self.device.device_id);
        out.i32(self.shape.len() as i32);
        encode_dtype(self.dtype, out);
        for &dim in &self.shape {
            out.i64(dim);
        }
        out.u64(self.byte_offset);
    }

    pub(super) fn decode(input: &mut Decoder<'_>) -> Result<TensorMeta, DecodeError> {
        let data = input.u64("tensor data address")?;
        let device = decode_device(input)?;
        let ndim = input.i32("tensor ndim")?;
        if !(0..=MAX_NDIM).contains(&ndim) {
            return Err(input.error(format!("tensor ndim {ndim} is outside 0..={MAX_NDIM}")));
        }
        let dtype = decode_dtype(input)?;
        let mut shape = Vec::with_capacity(ndim as usize);
        for _ in 0..ndim {
            let dim = input.i64("tensor shape")?;
            if dim < 0 {
                return Err(input.error(format!("tensor dimension {dim} is negative")));
            }
            shape.push(dim);
        }
        let byte_offset = input.u64("tensor byte offset")?;
        Ok(TensorMeta {
            data,
            device,
            dtype,
            shape,
            byte_offset,
        })
    }
}

fn encode_dtype(dtype: DLDataType, out: &mut Encoder) {
    out.raw(&[dtype.code, dtype.bits]);
    out.raw(&dtype.lanes.to_le_bytes());
}

fn decode_dtype(input: &mut Decoder<'_>) -> Result<DLDataType, DecodeError> {
    let word = input.u32("dtype")?.to_le_bytes();
    Ok(DLDataType {
        code: word[0],
        bits: word[1],
        lanes: u16::from_le_bytes([word[2], word[3]]),
    })
}

fn decode_device(input: &mut Decoder<'_>) -> Result<DLDevice, DecodeError> {
    Ok(DLDevice {
        device_type: input.i32("device type")?,
        device_id: input.i32("device id")?,
    })
}

/// One value of a packed sequence, as it travels.
#[derive(Clone, Debug, PartialEq)]
pub enum WireValue {
    /// No value.
    None,
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A double.
    Float(f64),
    /// An address or handle that is only meaningful on the side that made it.
    Handle(u64),
    /// An element type.
    DataType(DLDataType),
    /// A device.
    Device(DLDevice),
    /// A tensor descriptor.
    Tensor(TensorMeta),
    /// A C string (the sender has no string object).
    RawStr(Vec<u8>),
    /// A byte array (the sender has no bytes object).
    ByteArray(Vec<u8>),
    /// A string object.
    Str(Vec<u8>),
    /// A bytes object.
    Bytes(Vec<u8>),
    /// A remote function, by handle.
    Function(u64),
    /// A remote module, by handle.
    Module(u64),
    /// Another remote object, by handle; `type_index` is the sender's outer index.
    Object {
        /// The outer type index written by the sender.
        type_index: i32,
        /// The remote handle.
        handle: u64,
    },
}

impl WireValue {
    /// The text of a string value in any of its three forms.
    pub fn as_text(&self) -> Option<&[u8]> {
        match self {
            WireValue::RawStr(s) | WireValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of a string or bytes value in any form.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            WireValue::RawStr(s)
            | WireValue::Str(s)
            | WireValue::ByteArray(s)
            | WireValue::Bytes(s) => Some(s),
            _ => None,
        }
    }

    /// The integer of an int or bool value.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            WireValue::Int(v) => Some(*v),
            WireValue::Bool(v) => Some(i64::from(*v)),
            _ => None,
        }
    }

    /// The address of a handle value (None counts as the null handle).
    pub fn as_handle(&self) -> Option<u64> {
        match self {
            WireValue::Handle(v) => Some(*v),
            WireValue::None => Some(0),
            _ => None,
        }
    }

    /// A short description for messages: the kind of value, without its content.
    pub fn kind(&self) -> &'static str {
        match self {
            WireValue::None => "None",
            WireValue::Int(_) => "int",
            WireValue::Bool(_) => "bool",
            WireValue::Float(_) => "float",
            WireValue::Handle(_) => "handle",
            WireValue::DataType(_) => "dtype",
            WireValue::Device(_) => "device",
            WireValue::Tensor(_) => "tensor",
            WireValue::RawStr(_) | WireValue::Str(_) => "str",
            WireValue::ByteArray(_) | WireValue::Bytes(_) => "bytes",
            WireValue::Function(_) => "function",
            WireValue::Module(_) => "module",
            WireValue::Object { .. } => "object",
        }
    }

    pub(super) fn encode(&self, out: &mut Encoder) {
        match self {
            WireValue::None => out.i32(kTVMFFINone),
            WireValue::Int(v) => {
                out.i32(kTVMFFIInt);
                out.i64(*v);
            }
            WireValue::Bool(v) => {
                out.i32(kTVMFFIBool);
                out.i64(i64::from(*v));
            }
            WireValue::Float(v) => {
                out.i32(kTVMFFIFloat);
                out.u64(v.to_bits());
            }
            WireValue::Handle(v) => {
                out.i32(kTVMFFIOpaquePtr);
                out.u64(*v);
            }
            WireValue::DataType(dtype) => {
                out.i32(kTVMFFIDataType);
                encode_dtype(*dtype, out);
                out.i32(0);
            }
            WireValue::Device(device) => {
                out.i32(kTVMFFIDevice);
                out.i32(device.device_type);
                out.i32(device.device_id);
            }
            WireValue::Tensor(meta) => {
                out.i32(kTVMFFIDLTensorPtr);
                meta.encode(out);
            }
            WireValue::RawStr(s) => {
                out.i32(kTVMFFIRawStr);
                out.bytes(s);
            }
            WireValue::ByteArray(s) => {
                out.i32(kTVMFFIByteArrayPtr);
                out.bytes(s);
            }
            WireValue::Str(s) => {
                out.i32(kTVMFFIStr);
                out.u32(kTVMFFIStr as u32);
                out.bytes(s);
            }
            WireValue::Bytes(s) => {
                out.i32(kTVMFFIBytes);
                out.u32(kTVMFFIBytes as u32);
                out.bytes(s);
            }
            WireValue::Function(handle) => {
                out.i32(kTVMFFIFunction);
                out.u64(*handle);
            }
            WireValue::Module(handle) => {
                out.i32(kTVMFFIModule);
                out.u64(*handle);
            }
            WireValue::Object { type_index, handle } => {
                out.i32(*type_index);
                out.u32(RPC_OBJECT_REF_INDEX as u32);
                out.u64(*handle);
            }
        }
    }

    pub(super) fn decode(input: &mut Decoder<'_>) -> Result<WireValue, DecodeError> {
        let start = input.offset();
        let type_index = input.i32("value type index")?;
        let value = match type_index {
            kTVMFFINone => WireValue::None,
            kTVMFFIInt => WireValue::Int(input.i64("int")?),
            kTVMFFIBool => WireValue::Bool(input.i64("bool")? != 0),
            kTVMFFIFloat => WireValue::Float(f64::from_bits(input.u64("float")?)),
            kTVMFFIOpaquePtr => WireValue::Handle(input.u64("handle")?),
            kTVMFFIDataType => {
                let dtype = decode_dtype(input)?;
                input.i32("dtype padding")?;
                WireValue::DataType(dtype)
            }
            kTVMFFIDevice => WireValue::Device(decode_device(input)?),
            kTVMFFIDLTensorPtr => WireValue::Tensor(TensorMeta::decode(input)?),
            kTVMFFIRawStr => WireValue::RawStr(input.bytes("string")?.to_vec()),
            kTVMFFIByteArrayPtr => WireValue::ByteArray(input.bytes("byte array")?.to_vec()),
            kTVMFFIFunction => WireValue::Function(input.u64("function handle")?),
            kTVMFFIModule => WireValue::Module(input.u64("module handle")?),
            kTVMFFISmallStr | kTVMFFISmallBytes => decode_object(input, type_index)?,
            kTVMFFITensor => {
                return Err(DecodeError {
                    what: "type index 70 cannot travel in an RPC packet (tensors travel as \
                           descriptors, type index 7)"
                        .into(),
                    offset: start,
                });
            }
            index if index >= kTVMFFIStaticObjectBegin => decode_object(input, type_index)?,
            index => {
                return Err(DecodeError {
                    what: format!("type index {index} cannot travel in an RPC packet"),
                    offset: start,
                });
            }
        };
        Ok(value)
    }
}

fn decode_object(input: &mut Decoder<'_>, outer: i32) -> Result<WireValue, DecodeError> {
    let start = input.offset();
    let inner = input.u32("object type index")?;
    match i32::try_from(inner) {
        Ok(kTVMFFIStr) => Ok(WireValue::Str(input.bytes("string")?.to_vec())),
        Ok(kTVMFFIBytes) => Ok(WireValue::Bytes(input.bytes("bytes")?.to_vec())),
        Ok(RPC_OBJECT_REF_INDEX) => Ok(WireValue::Object {
            type_index: outer,
            handle: input.u64("object handle")?,
        }),
        _ => Err(DecodeError {
            what: format!("object type index {inner} is not supported in RPC calls"),
            offset: start,
        }),
    }
}

/// Writes a packed sequence: the count, then each value.
pub(super) fn encode_seq(values: &[WireValue], out: &mut Encoder) {
    out.i32(values.len() as i32);
    for value in values {
        value.encode(out);
    }
}

/// Reads a packed sequence; the count is checked against the bytes present before allocating.
pub(super) fn decode_seq(input: &mut Decoder<'_>) -> Result<Vec<WireValue>, DecodeError> {
    let count = input.i32("argument count")?;
    // Every value takes at least its four-byte type index.
    if count < 0 || count as usize > input.remaining() / 4 {
        return Err(input.error(format!(
            "argument count {count} does not fit in the {} bytes that remain",
            input.remaining()
        )));
    }
    (0..count).map(|_| WireValue::decode(input)).collect()
}
