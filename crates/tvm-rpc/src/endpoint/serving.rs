//! Answering the peer's requests from the serving session: calls, system calls, and the
//! streamed copies to and from this side.

use std::io::{self, Read, Write};

use tvm_ffi::{Error, ErrorKind, Result};

use super::{Endpoint, Waited, send_reply, unexpected};
use crate::codec::{
    MAX_NDIM, Message, TensorMeta, WireValue, decode_copy_header, tensor_header_len,
};
use crate::protocol::{OWN_PROTOCOL_VERSION, PROTOCOL_VERSION, RpcCode};
use crate::session::{CopySink, CopySource, RpcSession};
use crate::transport::Transport;

/// Whether `version` is one this runtime serves.
pub fn version_supported(version: &[u8]) -> bool {
    version == PROTOCOL_VERSION.as_bytes() || version == OWN_PROTOCOL_VERSION.as_bytes()
}

impl Endpoint {
    /// Answers one request from the peer; `Some` when the connection ended.
    pub(super) fn answer(&self, message: Message<'_>) -> Result<Option<Waited>> {
        let own = self.own_protocol;
        let reply = match message {
            Message::Shutdown => {
                *self.transport() = None;
                return Ok(Some(Waited::Closed));
            }
            Message::CopyFromRemote { tensor, nbytes } => {
                let serving = &*self.serving;
                self.io(|t| serve_copy_from(t, serving, &tensor, nbytes, own))?;
                return Ok(None);
            }
            Message::InitServer { .. } => Err(Error::new(
                ErrorKind::RuntimeError,
                "Server has already been initialized",
            )),
            // The request runs with no transport lock held: it may call back through this
            // endpoint.
            Message::CallFunc { handle, args } => self.serving.call_function(handle, args),
            Message::Syscall { code, args } => syscall(&*self.serving, code, args).map(|v| vec![v]),
            other => return Err(unexpected(&self.name, &other)),
        };
        self.io(|t| send_reply(t, reply, own))?;
        Ok(None)
    }
}

fn syscall(session: &dyn RpcSession, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
    match code {
        RpcCode::GetGlobalFunc => {
            let name = args
                .first()
                .and_then(WireValue::as_text)
                .ok_or_else(|| Error::new(ErrorKind::TypeError, "GetGlobalFunc needs a name"))?;
            let name = String::from_utf8_lossy(name);
            session.get_function(&name).map(WireValue::Handle)
        }
        RpcCode::FreeHandle => {
            let handle = args
                .first()
                .and_then(WireValue::as_handle)
                .ok_or_else(|| Error::new(ErrorKind::TypeError, "FreeHandle needs a handle"))?;
            session.free_handle(handle).map(|()| WireValue::None)
        }
        code => session.device_call(code, args),
    }
}

pub(super) fn serve_copy_to(
    transport: &mut Transport,
    session: &dyn RpcSession,
    len: u64,
    own_protocol: bool,
) -> Result<()> {
    // The fixed part of the descriptor (data, device, ndim) tells the size of the rest.
    let mut fixed = [0u8; 20];
    transport.read_exact(&mut fixed, "reading a copy request")?;
    let ndim = i32::from_le_bytes(fixed[16..20].try_into().expect("4 bytes"));
    if !(0..=MAX_NDIM).contains(&ndim) {
        transport.mark_broken();
        tvm_ffi::bail!(ErrorKind::ValueError, "copy request with ndim {ndim}");
    }
    let mut header = fixed.to_vec();
    header.resize(tensor_header_len(ndim as usize), 0);
    transport.read_exact(&mut header[20..], "reading a copy request")?;
    let decoded = decode_copy_header(&header);
    let (tensor, nbytes) = match decoded {
        Ok(decoded) if len == header.len() as u64 + decoded.1 => decoded,
        _ => {
            transport.mark_broken();
            let (_, nbytes) = decoded?;
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "copy request of {nbytes} bytes in a packet of {len} bytes"
            );
        }
    };
    let mut data = transport.reader().take(nbytes);
    let result = session.copy_to_remote(&tensor, nbytes, CopySource::Stream(&mut data));
    let unread = data.limit();
    if unread > 0 {
        // A refused copy still consumes its bytes, so the next packet starts where it should.
        transport.skip(unread)?;
    }
    send_reply(transport, result.map(|()| Vec::new()), own_protocol)
}

fn serve_copy_from(
    transport: &mut Transport,
    session: &dyn RpcSession,
    tensor: &TensorMeta,
    nbytes: u64,
    own_protocol: bool,
) -> Result<()> {
    if let Err(error) = session.check_copy_from_remote(tensor, nbytes) {
        return send_reply(transport, Err(error), own_protocol);
    }
    transport.write_all(&(4 + nbytes).to_le_bytes())?;
    transport.write_all(&(RpcCode::CopyAck as i32).to_le_bytes())?;
    let mut sink = TransportWriter(transport);
    // After the header has gone out, a failure can only end the connection: the peer expects
    // exactly `nbytes` more bytes.
    if let Err(error) = session.copy_from_remote(tensor, nbytes, CopySink::Stream(&mut sink)) {
        transport.mark_broken();
        return Err(error);
    }
    transport.flush()
}

struct TransportWriter<'a>(&'a mut Transport);

impl Write for TransportWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .write_all(buf)
            .map(|()| buf.len())
            .map_err(|e| io::Error::other(e.message().into_owned()))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
