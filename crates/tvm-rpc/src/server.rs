//! Serving connections: the handshake, `kInitServer` with the session constructor, then
//! requests until the client leaves. Also the client side of opening a session.

use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread;
use std::time::Duration;

use tvm_ffi::{AnyView, Error, ErrorKind, Function, Result};

use crate::codec::{Message, WireValue, decode_message, encode_message};
use crate::endpoint::{send_reply, serve, version_supported};
use crate::handshake::{
    CLIENT_HANDSHAKE_TIMEOUT, ClientHello, HANDSHAKE_TIMEOUT, auth_key, client_handshake,
    local_options, refuse_busy, server_handshake, timeout_option,
};
use crate::protocol::{OWN_PROTOCOL_VERSION, PROTOCOL_VERSION, SESSION_TIMEOUT_PREFIX};
use crate::remote::{SessionCore, session_of_module};
use crate::session::plain::plain_from_wire;
use crate::session::{ClientSession, LocalSession, RpcSession};
use crate::transport::Transport;

/// Opens a session with the server at `host:port`. `key` may carry options
/// (`"gpu -timeout=10"`); `constructor` names the serving session (empty: the server's own
/// machine; `["rpc.Connect", host, port, key, false]`: a further hop). `secret` is the shared
/// secret of a server that requires one (see [`crate::handshake`]).
pub fn connect(
    host: &str,
    port: u16,
    key: &str,
    secret: Option<&[u8]>,
    constructor: Vec<WireValue>,
) -> Result<Arc<SessionCore>> {
    let address = format!("{host}:{port}");
    let addresses = (host, port).to_socket_addrs().map_err(|e| {
        Error::new(
            "RPCError",
            format!("cannot resolve RPC server address {address}: {e}"),
        )
    })?;
    // The handshake's time limit bounds the TCP connection too (an unroutable address would
    // otherwise wait for the kernel's own timeout, minutes).
    let (_, limit) = local_options(key)?;
    let limit = limit.unwrap_or(CLIENT_HANDSHAKE_TIMEOUT);
    let mut last = None;
    let mut socket = None;
    for candidate in addresses {
        match TcpStream::connect_timeout(&candidate, limit) {
            Ok(s) => {
                socket = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut socket = socket.ok_or_else(|| match last {
        Some(e) if e.kind() == std::io::ErrorKind::TimedOut => Error::new(
            "TimeoutError",
            format!(
                "cannot connect to RPC server at {address} within {:.1} s",
                limit.as_secs_f64()
            ),
        ),
        last => {
            let why = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
            Error::new(
                "RPCError",
                format!("cannot connect to RPC server at {address}: {why}"),
            )
        }
    })?;
    let accepted = client_handshake(&mut socket, &address, key, secret)?;
    let transport = Transport::from_socket(socket)?;
    let session = ClientSession::new(address, transport, accepted.own_protocol);
    let version = if accepted.own_protocol {
        OWN_PROTOCOL_VERSION
    } else {
        PROTOCOL_VERSION
    };
    session.endpoint().init_remote(version, constructor)?;
    SessionCore::register(Arc::new(session))
}

/// Builds the serving session a client's `kInitServer` asks for.
fn construct_session(args: Vec<WireValue>) -> Result<Arc<dyn RpcSession>> {
    let Some(first) = args.first() else {
        return Ok(Arc::new(LocalSession::new()));
    };
    let name = first
        .as_text()
        .map(String::from_utf8_lossy)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::TypeError,
                format!(
                    "the session constructor must be named by a string, got {}",
                    first.kind()
                ),
            )
        })?;
    match name.as_ref() {
        "rpc.LocalSession" => Ok(Arc::new(LocalSession::new())),
        "rpc.Connect" => {
            let text = |i: usize| {
                args.get(i)
                    .and_then(WireValue::as_text)
                    .map(|t| String::from_utf8_lossy(t).into_owned())
            };
            let host = text(1).ok_or_else(|| {
                Error::new(ErrorKind::TypeError, "rpc.Connect needs a host string")
            })?;
            let port = args
                .get(2)
                .and_then(WireValue::as_int)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| Error::new(ErrorKind::ValueError, "rpc.Connect needs a port"))?;
            let key = text(3).unwrap_or_default();
            let nested = args.into_iter().skip(5).collect();
            let core = connect(&host, port, &key, auth_key(None)?.as_deref(), nested)?;
            Ok(Arc::clone(core.session()))
        }
        other => {
            let constructor = Function::get_global(other).ok_or_else(|| {
                Error::new(
                    ErrorKind::AttributeError,
                    format!("Cannot find session constructor {other}"),
                )
            })?;
            let locals = args[1..]
                .iter()
                .map(|v| plain_from_wire(v, "a session constructor argument"))
                .collect::<Result<Vec<_>>>()?;
            let views: Vec<AnyView<'_>> = locals.iter().map(AnyView::from).collect();
            let module = constructor.call_packed(&views)?;
            session_of_module(&module).map_err(|_| {
                Error::new(
                    ErrorKind::TypeError,
                    format!("Constructor {other} need to return an RPCModule"),
                )
            })
        }
    }
}

/// How a server treats its connections.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// The key clients must present (`client:<key>`).
    pub rpc_key: String,
    /// The shared secret clients must prove they hold, and that the server proves it holds
    /// (see [`crate::handshake`]); `None`: any client with the key is served.
    pub auth_key: Option<Vec<u8>>,
    /// Whether this process serves only this connection: when a session outlives its timeout
    /// inside a call that does not return, the process exits (the call cannot be interrupted).
    pub dedicated_process: bool,
    /// The total time a client has to complete its handshake (`None`: [`HANDSHAKE_TIMEOUT`]).
    pub handshake_timeout: Option<Duration>,
    /// The most connections [`Server::run`] serves at once, handshakes included (`None` or 0:
    /// no limit); a client beyond it gets `RPC_CODE_BUSY`.
    pub max_connections: Option<usize>,
}

/// Serves one accepted connection to the end: handshake, session construction, requests. A
/// peer that is not an RPC client (wrong magic, key or secret) is answered and dropped. A
/// client key with `-timeout=<seconds>` ends the session after that long with
/// `RPCSessionTimeoutError`.
pub fn serve_connection(mut socket: TcpStream, options: &ServeOptions) -> Result<()> {
    let Some(hello) = server_handshake(
        &mut socket,
        &options.rpc_key,
        options.auth_key.as_deref(),
        options.handshake_timeout.unwrap_or(HANDSHAKE_TIMEOUT),
    )?
    else {
        return Ok(());
    };
    serve_authenticated(socket, &hello, options.dedicated_process)
}

/// Serves a connection whose handshake is complete (here or in another process, see
/// [`crate::handshake::server_verify`]): session construction, then requests.
pub fn serve_authenticated(
    socket: TcpStream,
    hello: &ClientHello,
    dedicated_process: bool,
) -> Result<()> {
    let timer = timeout_option(&hello.key)
        .map(|seconds| SessionTimer::start(&socket, seconds, dedicated_process))
        .transpose()?;
    let mut transport = Transport::from_socket(socket)?;
    if let Some(timer) = &timer {
        transport.set_gate(Arc::clone(&timer.gate));
    }
    let result = serve_session(transport, hello.own_protocol);
    if let Some(timer) = timer {
        timer.finish();
    }
    result
}

/// Serves a session on a transport whose handshake is done: `kInitServer`, then requests.
/// `announced_own`: whether the client may speak the own protocol version.
pub(crate) fn serve_session(mut transport: Transport, announced_own: bool) -> Result<()> {
    let Some(len) = transport.read_packet_len()? else {
        return Ok(());
    };
    let body = transport.read_body(len)?;
    // A client that sends something else first ends its session (an RPCError, which the
    // serving process logs as a session that ended, not as a failure of its own).
    let Ok(Message::InitServer { version, args }) = decode_message(&body) else {
        tvm_ffi::bail!(
            "RPCError",
            "the session with the client ended: its first RPC packet was not kInitServer"
        );
    };
    if !version_supported(&version) {
        let error = Error::new(
            ErrorKind::RuntimeError,
            format!(
                "Client protocol version mismatch with the server: server protocol={PROTOCOL_VERSION} \
                 (and {OWN_PROTOCOL_VERSION}), client protocol={}",
                String::from_utf8_lossy(&version)
            ),
        );
        return send_reply(&mut transport, Err(error), announced_own);
    }
    let own_protocol = announced_own && version == OWN_PROTOCOL_VERSION.as_bytes();
    let session = match construct_session(args) {
        Ok(session) => session,
        Err(error) => return send_reply(&mut transport, Err(error), own_protocol),
    };
    send_reply(&mut transport, Ok(vec![WireValue::None]), own_protocol)?;
    serve(transport, session, own_protocol)
}

/// Ends a session that outlives its time limit: sends the client `RPCSessionTimeoutError` and
/// closes the connection.
struct SessionTimer {
    gate: Arc<Mutex<bool>>,
    done: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl SessionTimer {
    fn start(socket: &TcpStream, seconds: f64, dedicated_process: bool) -> Result<SessionTimer> {
        let mut socket = socket.try_clone().map_err(|e| {
            Error::new(
                ErrorKind::RuntimeError,
                format!("cannot watch the session: {e}"),
            )
        })?;
        let gate = Arc::new(Mutex::new(false));
        let (done, finished) = mpsc::channel::<()>();
        let thread_gate = Arc::clone(&gate);
        let limit = Duration::from_secs_f64(seconds);
        let thread = thread::spawn(move || {
            if finished.recv_timeout(limit) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            {
                let mut expired = thread_gate.lock().unwrap_or_else(PoisonError::into_inner);
                *expired = true;
                let message = format!(
                    "{SESSION_TIMEOUT_PREFIX}Your {seconds}s session has expired, try to increase \
                     the \"session_timeout\" value."
                );
                let body = encode_message(&Message::Exception(vec![WireValue::RawStr(
                    message.into_bytes(),
                )]));
                let mut packet = (body.len() as u64).to_le_bytes().to_vec();
                packet.extend_from_slice(&body);
                let _ = socket.write_all(&packet);
                let _ = socket.shutdown(Shutdown::Both);
            }
            // A call that never returns keeps the session alive; a process that serves only
            // this session ends instead.
            if dedicated_process && finished.recv_timeout(Duration::from_secs(2)).is_err() {
                std::process::exit(0);
            }
        });
        Ok(SessionTimer { gate, done, thread })
    }

    fn finish(self) {
        let _ = self.done.send(());
        let _ = self.thread.join();
    }
}

/// A server on a listening socket, serving each connection on a thread of its own.
pub struct Server {
    listener: TcpListener,
    options: ServeOptions,
}

impl Server {
    /// Binds `address` (use `127.0.0.1:0` for any free loopback port).
    pub fn bind(address: &str, options: ServeOptions) -> Result<Server> {
        let listener = TcpListener::bind(address).map_err(|e| {
            Error::new(
                ErrorKind::RuntimeError,
                format!("cannot bind an RPC server to {address}: {e}"),
            )
        })?;
        Ok(Server { listener, options })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Accepts and serves connections until the listener fails. Beyond
    /// [`ServeOptions::max_connections`], a client is answered `RPC_CODE_BUSY` and closed.
    pub fn run(&self) -> Result<()> {
        let live = Arc::new(AtomicUsize::new(0));
        let limit = self.options.max_connections.filter(|n| *n > 0);
        for connection in self.listener.incoming() {
            let mut socket = match connection {
                Ok(socket) => socket,
                // Out of descriptors or memory: wait for connections to end, keep serving.
                Err(e) if is_resource_exhaustion(&e) => {
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(e) => {
                    return Err(Error::new(
                        ErrorKind::RuntimeError,
                        format!("accepting a connection: {e}"),
                    ));
                }
            };
            if limit.is_some_and(|limit| live.load(Ordering::SeqCst) >= limit) {
                refuse_busy(&mut socket);
                continue;
            }
            live.fetch_add(1, Ordering::SeqCst);
            let options = self.options.clone();
            let live = Arc::clone(&live);
            thread::spawn(move || {
                if let Err(error) = serve_connection(socket, &options) {
                    eprintln!(
                        "tvm.rpc: a session ended with an error: {}",
                        error.message()
                    );
                }
                live.fetch_sub(1, Ordering::SeqCst);
            });
        }
        Ok(())
    }
}

/// Whether an `accept` failed for lack of descriptors or memory (worth retrying later).
fn is_resource_exhaustion(err: &std::io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
