//! Packet bodies: the code, then what that code carries.

use super::value::{decode_seq, encode_seq};
use super::{DecodeError, Decoder, Encoder, TensorMeta, WireValue};
use crate::protocol::RpcCode;

/// One packet body, decoded. Tensor bytes are borrowed from the body.
#[derive(Clone, Debug, PartialEq)]
pub enum Message<'a> {
    /// Ends the session.
    Shutdown,
    /// The protocol version and the session constructor with its arguments.
    InitServer {
        /// The client's protocol version.
        version: Vec<u8>,
        /// Session constructor name and arguments (empty: the local session).
        args: Vec<WireValue>,
    },
    /// A call of a remote function.
    CallFunc {
        /// The function's handle on the serving side.
        handle: u64,
        /// The arguments.
        args: Vec<WireValue>,
    },
    /// The encoded return values of a request.
    Return(Vec<WireValue>),
    /// The values describing an error (the first is its message).
    Exception(Vec<WireValue>),
    /// A request for `nbytes` of a remote tensor.
    CopyFromRemote {
        /// The source tensor.
        tensor: TensorMeta,
        /// Number of bytes to read, from the tensor's byte offset.
        nbytes: u64,
    },
    /// Bytes to write into a remote tensor.
    CopyToRemote {
        /// The destination tensor.
        tensor: TensorMeta,
        /// The bytes, written at the tensor's byte offset.
        data: &'a [u8],
    },
    /// The bytes of a tensor read with [`Message::CopyFromRemote`].
    CopyAck(&'a [u8]),
    /// A system call with its arguments.
    Syscall {
        /// Which system call.
        code: RpcCode,
        /// Its arguments.
        args: Vec<WireValue>,
    },
}

/// Bytes of a copy request's header after the code: tensor descriptor and byte count.
pub fn tensor_header_len(ndim: usize) -> usize {
    32 + 8 * ndim + 8
}

/// Decodes the header of a copy request (tensor descriptor, then byte count) from `body`, which
/// holds exactly [`tensor_header_len`] bytes.
pub fn decode_copy_header(body: &[u8]) -> Result<(TensorMeta, u64), DecodeError> {
    let mut input = Decoder::new(body);
    let tensor = TensorMeta::decode(&mut input)?;
    let nbytes = input.u64("copy size")?;
    input.finish("copy header")?;
    Ok((tensor, nbytes))
}

/// Decodes a whole packet body (starting with its code).
pub fn decode_message(body: &[u8]) -> Result<Message<'_>, DecodeError> {
    let mut input = Decoder::new(body);
    let raw_code = input.i32("packet code")?;
    let code = RpcCode::from_i32(raw_code).ok_or_else(|| DecodeError {
        what: format!("unknown packet code {raw_code}"),
        offset: 0,
    })?;
    let message = match code {
        RpcCode::Shutdown => Message::Shutdown,
        RpcCode::InitServer => {
            let version = input.bytes("protocol version")?.to_vec();
            let args = decode_seq(&mut input)?;
            Message::InitServer { version, args }
        }
        RpcCode::CallFunc => {
            let handle = input.u64("function handle")?;
            let args = decode_seq(&mut input)?;
            Message::CallFunc { handle, args }
        }
        RpcCode::Return => Message::Return(decode_seq(&mut input)?),
        RpcCode::Exception => Message::Exception(decode_seq(&mut input)?),
        RpcCode::CopyFromRemote => {
            let tensor = TensorMeta::decode(&mut input)?;
            let nbytes = input.u64("copy size")?;
            Message::CopyFromRemote { tensor, nbytes }
        }
        RpcCode::CopyToRemote => {
            let tensor = TensorMeta::decode(&mut input)?;
            let nbytes = input.u64("copy size")?;
            if nbytes != input.remaining() as u64 {
                return Err(input.error(format!(
                    "copy claims {nbytes} bytes but the packet carries {}",
                    input.remaining()
                )));
            }
            let data = &body[input.offset()..];
            return Ok(Message::CopyToRemote { tensor, data });
        }
        RpcCode::CopyAck => return Ok(Message::CopyAck(&body[input.offset()..])),
        code => Message::Syscall {
            code,
            args: decode_seq(&mut input)?,
        },
    };
    input.finish("packet")?;
    Ok(message)
}

/// Encodes a packet body (code first), without the leading length.
pub fn encode_message(message: &Message<'_>) -> Vec<u8> {
    let mut out = Encoder::new();
    match message {
        Message::Shutdown => out.i32(RpcCode::Shutdown as i32),
        Message::InitServer { version, args } => {
            out.i32(RpcCode::InitServer as i32);
            out.bytes(version);
            encode_seq(args, &mut out);
        }
        Message::CallFunc { handle, args } => {
            out.i32(RpcCode::CallFunc as i32);
            out.u64(*handle);
            encode_seq(args, &mut out);
        }
        Message::Return(values) => {
            out.i32(RpcCode::Return as i32);
            encode_seq(values, &mut out);
        }
        Message::Exception(values) => {
            out.i32(RpcCode::Exception as i32);
            encode_seq(values, &mut out);
        }
        Message::CopyFromRemote { tensor, nbytes } => {
            out.i32(RpcCode::CopyFromRemote as i32);
            tensor.encode(&mut out);
            out.u64(*nbytes);
        }
        Message::CopyToRemote { tensor, data } => {
            out.i32(RpcCode::CopyToRemote as i32);
            tensor.encode(&mut out);
            out.u64(data.len() as u64);
            out.raw(data);
        }
        Message::CopyAck(data) => {
            out.i32(RpcCode::CopyAck as i32);
            out.raw(data);
        }
        Message::Syscall { code, args } => {
            out.i32(*code as i32);
            encode_seq(args, &mut out);
        }
    }
    out.into_bytes()
}

/// Encodes the header of a copy request: code, tensor descriptor and byte count (the bytes of
/// a [`RpcCode::CopyToRemote`] follow it on the wire, unbuffered).
pub fn encode_copy_header(code: RpcCode, tensor: &TensorMeta, nbytes: u64) -> Vec<u8> {
    let mut out = Encoder::new();
    out.i32(code as i32);
    tensor.encode(&mut out);
    out.u64(nbytes);
    out.into_bytes()
}
