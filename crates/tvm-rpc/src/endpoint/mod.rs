//! The endpoint: one side of a connection, speaking the protocol over a [`Transport`].
//!
//! Both sides are the same: an endpoint sends requests to its peer and answers the peer's
//! requests from its *serving* session. A server's serving session is the machine (or a further
//! hop); a client's serves only the callbacks it passed to the remote. While an endpoint waits
//! for a reply it answers requests that arrive first, so a remote function may call back into
//! the client, and the callback may call the remote again: exchanges nest on one thread, and
//! other threads wait for the outermost one to finish.
//!
//! Tensor bytes are streamed between the socket and the tensor's memory in both directions: no
//! request holds a whole tensor in a buffer.

mod errors;
mod packets;
mod serving;

use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, Weak};

use tvm_ffi::{Error, ReentrantLock, Result};

pub use errors::{exception_values, remote_error};
pub use serving::version_supported;

use crate::codec::{
    Message, TensorMeta, WireValue, decode_message, encode_copy_header, encode_message,
};
use crate::protocol::RpcCode;
use crate::session::{CopySink, CopySource, Peer, RpcSession};
use crate::transport::{Interrupt, Transport, connection_error};

/// How long closing a connection waits for the answers to posted system calls.
const POST_ANSWERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Bytes moved per step when a stream is forwarded.
const COPY_CHUNK: usize = 1 << 20;

/// One side of a connection.
pub struct Endpoint {
    name: String,
    /// Serializes exchanges between threads; the holding thread may nest (callbacks).
    exchange: ReentrantLock,
    /// Taken only for single reads and writes, never while a request runs.
    transport: Mutex<Option<Transport>>,
    /// Cuts the connection under a read or write of another thread ([`Endpoint::shutdown`]).
    interrupt: Option<Interrupt>,
    /// Whether the peer speaks the own protocol version (error kinds and callbacks travel).
    own_protocol: bool,
    /// Answers the peer's requests.
    serving: Arc<dyn RpcSession>,
    /// Releases not sent yet: packet bodies of system calls nobody waits for
    /// ([`Endpoint::post`]), posted while another exchange had the connection.
    unsent_posts: Mutex<Vec<Vec<u8>>>,
    /// Posted system calls whose answers have not arrived: the peer answers in order, so these
    /// many replies come before the reply of any request made after them, and are skipped.
    unanswered_posts: Mutex<u64>,
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn closed(name: &str) -> Error {
    Error::new(
        "RPCError",
        format!("the connection to {name} is closed; connect again"),
    )
}

/// How a wait for the peer ended.
enum Waited {
    /// The reply's values.
    Reply(Vec<WireValue>),
    /// The peer shut the connection down (or closed it between packets).
    Closed,
}

impl Endpoint {
    /// An endpoint named `name` (for messages) over `transport`, answering the peer's requests
    /// from `serving`, which learns the endpoint through [`RpcSession::bind_peer`].
    pub fn new(
        name: impl Into<String>,
        transport: Transport,
        own_protocol: bool,
        serving: Arc<dyn RpcSession>,
    ) -> Arc<Endpoint> {
        let endpoint = Arc::new(Endpoint {
            name: name.into(),
            exchange: ReentrantLock::new(),
            interrupt: transport.interrupt(),
            transport: Mutex::new(Some(transport)),
            own_protocol,
            serving,
            unsent_posts: Mutex::default(),
            unanswered_posts: Mutex::new(0),
        });
        let peer: Weak<dyn Peer> = Arc::downgrade(&endpoint) as Weak<dyn Peer>;
        endpoint.serving.bind_peer(peer);
        endpoint
    }

    /// The peer's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the peer speaks this runtime's own protocol version.
    pub fn own_protocol(&self) -> bool {
        self.own_protocol
    }

    /// The session that answers the peer's requests.
    pub fn serving(&self) -> &Arc<dyn RpcSession> {
        &self.serving
    }

    fn transport(&self) -> MutexGuard<'_, Option<Transport>> {
        self.transport
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one step on the transport; a broken stream closes the endpoint for good.
    fn io<T>(&self, step: impl FnOnce(&mut Transport) -> Result<T>) -> Result<T> {
        let mut guard = self.transport();
        let transport = guard.as_mut().ok_or_else(|| closed(&self.name))?;
        let result = step(transport);
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
        let _exchange = self.exchange.lock();
        self.send_posts();
        self.io(|t| {
            t.write_packet(body)?;
            t.flush()
        })?;
        self.await_reply()
    }

    /// Reads until the reply, answering the peer's requests that come first.
    fn await_reply(&self) -> Result<Vec<WireValue>> {
        match self.run(true)? {
            Waited::Reply(values) => Ok(values),
            Waited::Closed => Err(Error::new(
                "RPCError",
                format!("{} closed the connection before replying", self.name),
            )),
        }
    }

    /// Answers the peer's requests until it shuts the connection down (the server side). A
    /// session that ends otherwise (a broken connection, a malformed packet) ends with an
    /// `RPCError` (or `RPCSessionTimeoutError`) that names the peer: the server logs one line
    /// for it, never a traceback of its own.
    pub fn serve_forever(&self) -> Result<()> {
        let _exchange = self.exchange.lock();
        match self.run(false) {
            Ok(Waited::Closed) => Ok(()),
            Ok(Waited::Reply(_)) => Err(Error::new(
                "RPCError",
                format!("{} sent a reply to a request never made", self.name),
            )),
            Err(error) if is_session_error(&error) => Err(error),
            Err(error) => Err(Error::new(
                "RPCError",
                format!(
                    "the session with {} ended: {}: {}",
                    self.name,
                    error.kind(),
                    error.message()
                ),
            )),
        }
    }

    /// Streams `nbytes` from `data` into remote `tensor` (bytes in memory go out as they are).
    pub fn copy_to_remote(
        &self,
        tensor: &TensorMeta,
        nbytes: u64,
        data: CopySource<'_>,
    ) -> Result<()> {
        let header = encode_copy_header(RpcCode::CopyToRemote, tensor, nbytes);
        let _exchange = self.exchange.lock();
        self.io(|t| {
            t.write_all(&(header.len() as u64 + nbytes).to_le_bytes())?;
            t.write_all(&header)?;
            let sent = match data {
                CopySource::Bytes(bytes) if bytes.len() as u64 == nbytes => {
                    t.write_all(bytes).map_err(Ok)
                }
                CopySource::Bytes(bytes) => Err(Ok(Error::new(
                    tvm_ffi::ErrorKind::ValueError,
                    format!("a copy of {nbytes} bytes was given {} bytes", bytes.len()),
                ))),
                CopySource::Stream(reader) => forward(reader, nbytes, |chunk| t.write_all(chunk)),
            };
            if let Err(e) = sent {
                // Part of the packet is out: the stream cannot continue.
                t.mark_broken();
                return Err(e.unwrap_or_else(|io| connection_error(io, "reading tensor bytes")));
            }
            t.flush()
        })?;
        self.await_reply().map(drop)
    }

    /// Streams `nbytes` of remote `tensor` into `out` (memory is read into directly).
    pub fn copy_from_remote(
        &self,
        tensor: &TensorMeta,
        nbytes: u64,
        out: CopySink<'_>,
    ) -> Result<()> {
        let header = encode_copy_header(RpcCode::CopyFromRemote, tensor, nbytes);
        let _exchange = self.exchange.lock();
        self.io(|t| {
            t.write_packet(&header)?;
            t.flush()
        })?;
        match self.run_copy_from(nbytes, out)? {
            Some(values) => Err(remote_error(&values)),
            None => Ok(()),
        }
    }

    /// Frees a remote handle without waiting (see [`Endpoint::post`]).
    pub fn free_handle(&self, handle: u64) {
        self.post(RpcCode::FreeHandle, vec![WireValue::Handle(handle)]);
    }

    /// Sends system call `code` without waiting for its answer, which is skipped when it
    /// arrives; a failure is dropped (a closed connection: the remote released everything of the
    /// session itself). Releases run from destructors, on any thread and with any lock held
    /// (Python's interpreter lock, say), so they never wait on the network: the packet goes out
    /// now when the connection is free, otherwise before the next request.
    pub fn post(&self, code: RpcCode, args: Vec<WireValue>) {
        let body = encode_message(&Message::Syscall { code, args });
        lock_ignoring_poison(&self.unsent_posts).push(body);
        if let Some(_exchange) = self.exchange.try_lock() {
            self.send_posts();
        }
    }

    /// Writes the posted system calls not sent yet, if the transport is free (it is not when
    /// this thread drops a value in the middle of a write). The caller holds the exchange.
    fn send_posts(&self) {
        let mut guard = match self.transport.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let unsent = std::mem::take(&mut *lock_ignoring_poison(&self.unsent_posts));
        let Some(transport) = guard.as_mut() else {
            return;
        };
        for body in unsent {
            if transport
                .write_packet(&body)
                .and_then(|()| transport.flush())
                .is_err()
            {
                break;
            }
            *lock_ignoring_poison(&self.unanswered_posts) += 1;
        }
        if transport.is_broken() {
            *guard = None;
        }
    }

    /// Whether a reply that arrived answers a posted system call (and is skipped).
    fn answers_post(&self) -> bool {
        let mut unanswered = lock_ignoring_poison(&self.unanswered_posts);
        if *unanswered == 0 {
            return false;
        }
        *unanswered -= 1;
        true
    }

    /// Tells the peer the session is over and closes the connection (idempotent). While a call
    /// of another thread is using the connection, the connection is cut under it instead: that
    /// call fails with an `RPCError` rather than holding this one up until its reply.
    pub fn shutdown(&self) {
        let mut guard = match self.transport.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if let Some(interrupt) = &self.interrupt {
                    interrupt();
                }
                self.transport()
            }
        };
        if let Some(mut transport) = guard.take() {
            let body = encode_message(&Message::Shutdown);
            let sent = transport
                .write_packet(&body)
                .and_then(|()| transport.flush());
            if sent.is_ok() {
                self.read_post_answers(&mut transport);
            }
        }
    }

    /// Reads the answers to posted system calls still on their way, for a while at most, so
    /// that the connection closes with nothing unread: a socket closed with unread bytes is
    /// reset, and the peer may lose the shutdown.
    fn read_post_answers(&self, transport: &mut Transport) {
        let mut unanswered = lock_ignoring_poison(&self.unanswered_posts);
        if *unanswered == 0 || !transport.set_read_timeout(POST_ANSWERS_TIMEOUT) {
            return;
        }
        while *unanswered > 0 {
            match transport.read_packet_len() {
                Ok(Some(len)) if transport.skip(len).is_ok() => *unanswered -= 1,
                _ => return,
            }
        }
    }

    /// A weak reference for values that call back through this endpoint.
    pub fn downgrade(self: &Arc<Self>) -> Weak<Endpoint> {
        Arc::downgrade(self)
    }
}

/// The serving session calls the peer's functions (callbacks) back over this endpoint.
impl Peer for Endpoint {
    fn call(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        Endpoint::call(self, handle, args)
    }

    fn free_handle(&self, handle: u64) {
        Endpoint::free_handle(self, handle);
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Whether `error` is already of a kind that ends a session (the connection's own errors).
fn is_session_error(error: &Error) -> bool {
    matches!(&*error.kind(), "RPCError" | "RPCSessionTimeoutError")
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
        format!("{name} sent {what} where it was not expected"),
    )
}

/// Moves `nbytes` from `source` to `sink` in bounded chunks. The error is the sink's, or the
/// source's I/O error.
fn forward(
    source: &mut dyn Read,
    nbytes: u64,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> std::result::Result<(), std::result::Result<Error, std::io::Error>> {
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

/// Serves `session` to the peer on `transport` until it shuts down or disconnects (a server
/// with no callbacks to make). A clean end is `Ok`.
pub fn serve(transport: Transport, session: Arc<dyn RpcSession>, own_protocol: bool) -> Result<()> {
    Endpoint::new("the client", transport, own_protocol, session).serve_forever()
}

/// A reply packet read as a whole body: `Ok` values of a return, `Err` values of an exception.
fn decode_reply(
    name: &str,
    body: &[u8],
) -> Result<std::result::Result<Vec<WireValue>, Vec<WireValue>>> {
    match decode_message(body)? {
        Message::Return(values) => Ok(Ok(values)),
        Message::Exception(values) => Ok(Err(values)),
        other => Err(unexpected(name, &other)),
    }
}
