//! The endpoint: one side of a connection, speaking the protocol over a [`Transport`].
//!
//! A client endpoint sends one request at a time (callers are serialized by a lock) and reads
//! until its reply. A serving endpoint reads requests and answers them from its session until
//! the peer shuts the connection down. Tensor bytes are streamed between the socket and the
//! tensor's memory in both directions: no request holds a whole tensor in a buffer.

use std::io::{self, Read, Write};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tvm_ffi::{Error, ErrorKind, Result};

use crate::codec::{
    Message, TensorMeta, WireValue, decode_copy_header, decode_message, encode_copy_header,
    encode_message, tensor_header_len,
};
use crate::protocol::{OWN_PROTOCOL_VERSION, RpcCode, SESSION_TIMEOUT_PREFIX};
use crate::session::{RemoteError, RpcSession};
use crate::transport::{Transport, connection_error};

/// Bytes moved per step when a stream is forwarded.
const COPY_CHUNK: usize = 1 << 20;

/// The client side of a connection.
pub struct Endpoint {
    name: String,
    transport: Mutex<Option<Transport>>,
    /// Whether the peer speaks [`OWN_PROTOCOL_VERSION`] (error kinds travel).
    own_protocol: bool,
}

fn closed(name: &str) -> Error {
    Error::new(
        "RPCError",
        format!("the connection to {name} is closed; connect again"),
    )
}

/// Turns an error the peer sent into the error this side raises.
pub fn remote_error(values: &[WireValue]) -> Error {
    let text = |i: usize| {
        values
            .get(i)
            .and_then(WireValue::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let message = text(0).unwrap_or_else(|| "the remote raised an error with no message".into());
    let remote = RemoteError {
        kind: text(1),
        message,
        backtrace: text(2),
    };
    match remote.kind {
        Some(kind) => {
            let error = Error::new(kind, remote.message);
            match remote.backtrace {
                Some(trace) if !trace.is_empty() => {
                    error.update_backtrace(&trace, true);
                    error
                }
                _ => error,
            }
        }
        None if remote.message.starts_with(SESSION_TIMEOUT_PREFIX) => {
            Error::new("RPCSessionTimeoutError", remote.message)
        }
        None => Error::new(
            "RPCError",
            format!("Error caught from RPC call:\n{}", remote.message),
        ),
    }
}

/// The values of an exception packet for `error`: the message alone for a 0.8.0 peer, plus
/// kind and backtrace for a peer that speaks [`OWN_PROTOCOL_VERSION`].
pub fn exception_values(error: &Error, own_protocol: bool) -> Vec<WireValue> {
    let text = format!("{}: {}", error.kind(), error.message());
    if own_protocol {
        vec![
            WireValue::RawStr(error.message().as_bytes().to_vec()),
            WireValue::RawStr(error.kind().as_bytes().to_vec()),
            WireValue::RawStr(error.backtrace().as_bytes().to_vec()),
        ]
    } else {
        vec![WireValue::RawStr(text.into_bytes())]
    }
}

impl Endpoint {
    /// A client endpoint named `name` (for messages) over `transport`.
    pub fn new(name: impl Into<String>, transport: Transport, own_protocol: bool) -> Endpoint {
        Endpoint {
            name: name.into(),
            transport: Mutex::new(Some(transport)),
            own_protocol,
        }
    }

    /// The peer's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the peer speaks this runtime's own protocol version.
    pub fn own_protocol(&self) -> bool {
        self.own_protocol
    }

    fn lock(&self) -> MutexGuard<'_, Option<Transport>> {
        self.transport
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one exchange; a broken connection closes the endpoint for good.
    fn exchange<T>(&self, run: impl FnOnce(&mut Transport) -> Result<T>) -> Result<T> {
        let mut guard = self.lock();
        let transport = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        let result = run(transport);
        if transport.is_broken() {
            *guard = None;
        }
        result
    }

    /// Sends `kInitServer` with `version` and the session constructor arguments.
    pub fn init_remote(&self, version: &str, args: Vec<WireValue>) -> Result<()> {
        let body = encode_message(&Message::InitServer {
            version: version.as_bytes().to_vec(),
            args,
        });
        self.request(&body).map(drop)
    }

    /// Calls remote function `handle`; returns the encoded return list.
    pub fn call(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        self.request(&encode_message(&Message::CallFunc { handle, args }))
    }

    /// Runs a system call; returns its one value.
    pub fn syscall(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        let values = self.request(&encode_message(&Message::Syscall { code, args }))?;
        Ok(values.into_iter().next().unwrap_or(WireValue::None))
    }

    fn request(&self, body: &[u8]) -> Result<Vec<WireValue>> {
        self.exchange(|transport| {
            transport.write_packet(body)?;
            transport.flush()?;
            read_reply(transport, &self.name)
        })
    }

    /// Streams `nbytes` from `data` into remote `tensor`.
    pub fn copy_to_remote(
        &self,
        tensor: &TensorMeta,
        nbytes: u64,
        data: &mut dyn Read,
    ) -> Result<()> {
        let header = encode_copy_header(RpcCode::CopyToRemote, tensor, nbytes);
        self.exchange(|transport| {
            transport.write_all(&(header.len() as u64 + nbytes).to_le_bytes())?;
            transport.write_all(&header)?;
            if let Err(e) = forward(data, nbytes, |chunk| transport.write_all(chunk)) {
                // Part of the packet is out: the stream cannot continue.
                transport.mark_broken();
                return Err(e.unwrap_or_else(|io| connection_error(io, "reading tensor bytes")));
            }
            transport.flush()?;
            read_reply(transport, &self.name).map(drop)
        })
    }

    /// Streams `nbytes` of remote `tensor` into `out`.
    pub fn copy_from_remote(
        &self,
        tensor: &TensorMeta,
        nbytes: u64,
        out: &mut dyn Write,
    ) -> Result<()> {
        let header = encode_copy_header(RpcCode::CopyFromRemote, tensor, nbytes);
        self.exchange(|transport| {
            transport.write_packet(&header)?;
            transport.flush()?;
            let len = transport
                .read_packet_len()?
                .ok_or_else(|| closed(&self.name))?;
            let code = transport.read_i32("reading a reply")?;
            if code == RpcCode::CopyAck as i32 {
                if len != 4 + nbytes {
                    return Err(Error::new(
                        "RPCError",
                        format!("{} answered a copy of {nbytes} bytes with {len}", self.name),
                    ));
                }
                let reader = transport.reader();
                let mut failure = None;
                let streamed = forward(reader, nbytes, |chunk| {
                    if failure.is_none()
                        && let Err(e) = out.write_all(chunk)
                    {
                        failure = Some(e);
                    }
                    Ok(())
                })
                .map_err(|e| e.unwrap_or_else(|io| connection_error(io, "receiving tensor bytes")));
                if let Err(e) = streamed {
                    // Part of the reply is unread: the stream cannot continue.
                    transport.mark_broken();
                    return Err(e);
                }
                return match failure {
                    Some(e) => Err(Error::new(
                        ErrorKind::RuntimeError,
                        format!("writing downloaded tensor bytes failed: {e}"),
                    )),
                    None => Ok(()),
                };
            }
            let body = transport.read_body(len.saturating_sub(4))?;
            let mut full = code.to_le_bytes().to_vec();
            full.extend_from_slice(&body);
            match decode_message(&full)? {
                Message::Exception(values) => Err(remote_error(&values)),
                other => Err(unexpected(&self.name, &other)),
            }
        })
    }

    /// Frees a remote handle; errors (a closed connection) are dropped, since the remote
    /// releases everything of a closed session itself.
    pub fn free_handle(&self, handle: u64) {
        let _ = self.syscall(RpcCode::FreeHandle, vec![WireValue::Handle(handle)]);
    }

    /// Tells the peer the session is over and closes the connection (idempotent).
    pub fn shutdown(&self) {
        let mut guard = self.lock();
        if let Some(mut transport) = guard.take() {
            let body = encode_message(&Message::Shutdown);
            let _ = transport
                .write_packet(&body)
                .and_then(|()| transport.flush());
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn unexpected(name: &str, message: &Message<'_>) -> Error {
    let what = match message {
        Message::Return(_) => "a return",
        Message::Exception(_) => "an exception",
        Message::CopyAck(_) => "copy data",
        Message::Shutdown => "a shutdown",
        _ => "a request",
    };
    Error::new(
        "RPCError",
        format!("{name} sent {what} where a reply was expected"),
    )
}

fn read_reply(transport: &mut Transport, name: &str) -> Result<Vec<WireValue>> {
    loop {
        let len = transport.read_packet_len()?.ok_or_else(|| {
            Error::new(
                "RPCError",
                format!("{name} closed the connection before replying"),
            )
        })?;
        if len == 0 {
            continue;
        }
        let body = transport.read_body(len)?;
        return match decode_message(&body)? {
            Message::Return(values) => Ok(values),
            Message::Exception(values) => Err(remote_error(&values)),
            other => Err(unexpected(name, &other)),
        };
    }
}

/// Moves `nbytes` from `source` to `sink` in bounded chunks. The error is the sink's, or the
/// source's I/O error.
fn forward(
    source: &mut dyn Read,
    nbytes: u64,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> std::result::Result<(), std::result::Result<Error, io::Error>> {
    let mut buffer = vec![0u8; (nbytes as usize).min(COPY_CHUNK)];
    let mut left = nbytes;
    while left > 0 {
        let step = (left as usize).min(buffer.len());
        source.read_exact(&mut buffer[..step]).map_err(Err)?;
        sink(&buffer[..step]).map_err(Ok)?;
        left -= step as u64;
    }
    Ok(())
}

/// Serves `session` to the peer on `transport` until it shuts down or disconnects. A clean
/// end (shutdown or a close between packets) is `Ok`.
pub fn serve(
    transport: &mut Transport,
    session: &dyn RpcSession,
    own_protocol: bool,
) -> Result<()> {
    loop {
        let Some(len) = transport.read_packet_len()? else {
            return Ok(());
        };
        if len == 0 {
            continue;
        }
        if len < 4 {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "an RPC packet of {len} bytes has no code"
            );
        }
        let code = transport.read_i32("reading a request")?;
        if code == RpcCode::CopyToRemote as i32 {
            serve_copy_to(transport, session, len - 4, own_protocol)?;
            continue;
        }
        let mut body = code.to_le_bytes().to_vec();
        body.extend_from_slice(&transport.read_body(len - 4)?);
        let message = decode_message(&body)?;
        let reply = match message {
            Message::Shutdown => return Ok(()),
            Message::CopyFromRemote { tensor, nbytes } => {
                serve_copy_from(transport, session, &tensor, nbytes, own_protocol)?;
                continue;
            }
            Message::InitServer { .. } => Err(Error::new(
                ErrorKind::RuntimeError,
                "Server has already been initialized",
            )),
            Message::CallFunc { handle, args } => session.call_function(handle, args),
            Message::Syscall { code, args } => syscall(session, code, args).map(|v| vec![v]),
            other => Err(unexpected("the client", &other)),
        };
        send_reply(transport, reply, own_protocol)?;
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

/// Sends a reply: the values, or the error.
pub fn send_reply(
    transport: &mut Transport,
    reply: Result<Vec<WireValue>>,
    own_protocol: bool,
) -> Result<()> {
    let body = match reply {
        Ok(values) => encode_message(&Message::Return(values)),
        Err(error) => encode_message(&Message::Exception(exception_values(&error, own_protocol))),
    };
    transport.write_packet(&body)?;
    transport.flush()
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
    if !(0..=crate::codec::MAX_NDIM).contains(&ndim) {
        tvm_ffi::bail!(ErrorKind::ValueError, "copy request with ndim {ndim}");
    }
    let mut header = fixed.to_vec();
    header.resize(tensor_header_len(ndim as usize), 0);
    transport.read_exact(&mut header[20..], "reading a copy request")?;
    let (tensor, nbytes) = decode_copy_header(&header)?;
    if len != header.len() as u64 + nbytes {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "copy request of {nbytes} bytes in a packet of {len} bytes"
        );
    }
    let mut data = transport.reader().take(nbytes);
    let result = session.copy_to_remote(&tensor, nbytes, &mut data);
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
    session.copy_from_remote(tensor, nbytes, &mut sink)?;
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

/// Whether `version` is one this runtime serves.
pub fn version_supported(version: &[u8]) -> bool {
    version == crate::protocol::PROTOCOL_VERSION.as_bytes()
        || version == OWN_PROTOCOL_VERSION.as_bytes()
}
