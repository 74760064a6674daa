//! Reading packets and answering the peer's requests from the serving session.

use std::io::{self, Read, Write};

use tvm_ffi::{Error, ErrorKind, Result};

use super::{Endpoint, Waited, decode_reply, forward, send_reply, unexpected};
use crate::codec::{
    MAX_NDIM, Message, TensorMeta, WireValue, decode_copy_header, decode_message, tensor_header_len,
};
use crate::protocol::{OWN_PROTOCOL_VERSION, PROTOCOL_VERSION, RpcCode};
use crate::session::{CopySink, CopySource, RpcSession};
use crate::transport::{Transport, connection_error};

/// Whether `version` is one this runtime serves.
pub fn version_supported(version: &[u8]) -> bool {
    version == PROTOCOL_VERSION.as_bytes() || version == OWN_PROTOCOL_VERSION.as_bytes()
}

/// The start of a packet: its length and code; `None` when the peer closed between packets.
fn read_header(t: &mut Transport) -> Result<Option<(u64, i32)>> {
    loop {
        let Some(len) = t.read_packet_len()? else {
            return Ok(None);
        };
        if len == 0 {
            continue;
        }
        if len < 4 {
            t.skip(len)?;
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "an RPC packet of {len} bytes has no code"
            );
        }
        return Ok(Some((len, t.read_i32("reading a packet")?)));
    }
}

/// The rest of a packet whose header was read, decoded with its code.
fn read_message_body(t: &mut Transport, len: u64, code: i32) -> Result<Vec<u8>> {
    let mut body = code.to_le_bytes().to_vec();
    body.extend_from_slice(&t.read_body(len - 4)?);
    Ok(body)
}

impl Endpoint {
    /// Reads packets, answering requests, until a reply (when `expect_reply`) or the end of the
    /// connection.
    pub(super) fn run(&self, expect_reply: bool) -> Result<Waited> {
        loop {
            let Some((len, code)) = self.io(read_header)? else {
                // The peer is gone: later requests fail at once with a clear error.
                *self.transport() = None;
                return Ok(Waited::Closed);
            };
            if code == RpcCode::CopyToRemote as i32 {
                let own = self.own_protocol;
                let serving = &*self.serving;
                self.io(|t| serve_copy_to(t, serving, len - 4, own))?;
                continue;
            }
            let body = self.io(|t| read_message_body(t, len, code))?;
            let message = decode_message(&body)?;
            match message {
                Message::Return(values) if expect_reply => return Ok(Waited::Reply(values)),
                Message::Exception(values) if expect_reply => {
                    return Err(super::remote_error(&values));
                }
                message => {
                    if let Some(end) = self.answer(message)? {
                        return Ok(end);
                    }
                }
            }
        }
    }

    /// Reads the reply to a copy from the remote, streaming its bytes into `out`; the values of
    /// an exception instead, if the peer refused.
    pub(super) fn run_copy_from(
        &self,
        nbytes: u64,
        mut out: CopySink<'_>,
    ) -> Result<Option<Vec<WireValue>>> {
        loop {
            let Some((len, code)) = self.io(read_header)? else {
                return Err(Error::new(
                    "RPCError",
                    format!("{} closed the connection during a copy", self.name),
                ));
            };
            if code == RpcCode::CopyAck as i32 {
                return self
                    .io(|t| receive_copy_ack(t, &self.name, len, nbytes, &mut out))
                    .map(|()| None);
            }
            let body = self.io(|t| read_message_body(t, len, code))?;
            if code == RpcCode::Exception as i32 || code == RpcCode::Return as i32 {
                return match decode_reply(&self.name, &body)? {
                    Err(values) => Ok(Some(values)),
                    Ok(_) => Err(unexpected(&self.name, &Message::Return(Vec::new()))),
                };
            }
            if let Some(Waited::Closed) = self.answer(decode_message(&body)?)? {
                return Err(Error::new(
                    "RPCError",
                    format!("{} closed the connection during a copy", self.name),
                ));
            }
        }
    }

    /// Answers one request from the peer; `Some` when the connection ended.
    fn answer(&self, message: Message<'_>) -> Result<Option<Waited>> {
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

fn receive_copy_ack(
    t: &mut Transport,
    name: &str,
    len: u64,
    nbytes: u64,
    out: &mut CopySink<'_>,
) -> Result<()> {
    if len != 4 + nbytes || matches!(out, CopySink::Bytes(b) if b.len() as u64 != nbytes) {
        t.mark_broken();
        return Err(Error::new(
            "RPCError",
            format!("{name} answered a copy of {nbytes} bytes with {len}"),
        ));
    }
    let out = match out {
        CopySink::Bytes(bytes) => return t.read_exact(bytes, "receiving tensor bytes"),
        CopySink::Stream(out) => out,
    };
    let mut failure = None;
    let streamed = forward(t.reader(), nbytes, |chunk| {
        if failure.is_none()
            && let Err(e) = out.write_all(chunk)
        {
            failure = Some(e);
        }
        Ok(())
    });
    if let Err(e) = streamed {
        // Part of the reply is unread: the stream cannot continue.
        t.mark_broken();
        return Err(e.unwrap_or_else(|io| connection_error(io, "receiving tensor bytes")));
    }
    match failure {
        Some(e) => Err(Error::new(
            ErrorKind::RuntimeError,
            format!("writing downloaded tensor bytes failed: {e}"),
        )),
        None => Ok(()),
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

fn serve_copy_to(
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
