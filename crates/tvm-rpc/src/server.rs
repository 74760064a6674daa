//! Serving connections: the handshake, `kInitServer` with the session constructor, then
//! requests until the client leaves. Also the client side of opening a session.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::thread;

use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, Result};

use crate::codec::{Message, WireValue, decode_message};
use crate::endpoint::{Endpoint, send_reply, serve, version_supported};
use crate::handshake::{client_handshake, server_handshake};
use crate::protocol::{OWN_PROTOCOL_VERSION, PROTOCOL_VERSION};
use crate::remote::{SessionCore, session_of_module};
use crate::session::{ClientSession, LocalSession, RpcSession};
use crate::transport::Transport;

/// Opens a session with the server at `host:port`. `key` may carry options
/// (`"gpu -timeout=10"`); `constructor` names the serving session (empty: the server's own
/// machine; `["rpc.Connect", host, port, key, false]`: a further hop).
pub fn connect(
    host: &str,
    port: u16,
    key: &str,
    constructor: Vec<WireValue>,
) -> Result<Arc<SessionCore>> {
    let address = format!("{host}:{port}");
    let addresses = (host, port).to_socket_addrs().map_err(|e| {
        Error::new(
            "RPCError",
            format!("cannot resolve RPC server address {address}: {e}"),
        )
    })?;
    let mut last = None;
    let mut socket = None;
    for candidate in addresses {
        match TcpStream::connect(candidate) {
            Ok(s) => {
                socket = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut socket = socket.ok_or_else(|| {
        let why = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
        Error::new(
            "RPCError",
            format!("cannot connect to RPC server at {address}: {why}"),
        )
    })?;
    let accepted = client_handshake(&mut socket, &address, key)?;
    let transport = Transport::from_socket(socket)?;
    let endpoint = Endpoint::new(address, transport, accepted.own_protocol);
    let version = if accepted.own_protocol {
        OWN_PROTOCOL_VERSION
    } else {
        PROTOCOL_VERSION
    };
    endpoint.init_remote(version, constructor)?;
    SessionCore::register(Arc::new(ClientSession::new(Arc::new(endpoint))))
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
            let core = connect(&host, port, &key, nested)?;
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
                .map(wire_to_plain_any)
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

/// A constructor argument as a local value (plain values only).
fn wire_to_plain_any(value: &WireValue) -> Result<Any> {
    Ok(match value {
        WireValue::None => Any::none(),
        WireValue::Int(v) => Any::from(*v),
        WireValue::Bool(v) => Any::from(*v),
        WireValue::Float(v) => Any::from(*v),
        WireValue::RawStr(s) | WireValue::Str(s) => tvm_ffi::String::from_bytes(s).into_any(),
        WireValue::ByteArray(s) | WireValue::Bytes(s) => tvm_ffi::Bytes::from_bytes(s).into_any(),
        other => tvm_ffi::bail!(
            ErrorKind::TypeError,
            "a session constructor argument cannot be a {}",
            other.kind()
        ),
    })
}

/// Serves one accepted connection to the end: handshake with `rpc_key`, session construction,
/// requests. A peer that is not an RPC client (wrong magic or key) is answered and dropped.
pub fn serve_connection(mut socket: TcpStream, rpc_key: &str) -> Result<()> {
    let Some(hello) = server_handshake(&mut socket, rpc_key)? else {
        return Ok(());
    };
    let mut transport = Transport::from_socket(socket)?;
    let Some(len) = transport.read_packet_len()? else {
        return Ok(());
    };
    let body = transport.read_body(len)?;
    let Message::InitServer { version, args } = decode_message(&body)? else {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "the first RPC packet must be kInitServer"
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
        return send_reply(&mut transport, Err(error), hello.own_protocol);
    }
    let own_protocol = hello.own_protocol && version == OWN_PROTOCOL_VERSION.as_bytes();
    let session = match construct_session(args) {
        Ok(session) => session,
        Err(error) => return send_reply(&mut transport, Err(error), own_protocol),
    };
    send_reply(&mut transport, Ok(vec![WireValue::None]), own_protocol)?;
    serve(&mut transport, session.as_ref(), own_protocol)
}

/// A server on a listening socket, serving each connection on a thread of its own.
pub struct Server {
    listener: TcpListener,
    key: String,
}

impl Server {
    /// Binds `address` (use `127.0.0.1:0` for any free loopback port).
    pub fn bind(address: &str, key: &str) -> Result<Server> {
        let listener = TcpListener::bind(address).map_err(|e| {
            Error::new(
                ErrorKind::RuntimeError,
                format!("cannot bind an RPC server to {address}: {e}"),
            )
        })?;
        Ok(Server {
            listener,
            key: key.to_string(),
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Accepts and serves connections until the listener fails.
    pub fn run(&self) -> Result<()> {
        for connection in self.listener.incoming() {
            let socket = connection.map_err(|e| {
                Error::new(
                    ErrorKind::RuntimeError,
                    format!("accepting a connection: {e}"),
                )
            })?;
            let key = self.key.clone();
            thread::spawn(move || {
                if let Err(error) = serve_connection(socket, &key) {
                    eprintln!(
                        "tvm.rpc: a session ended with an error: {}",
                        error.message()
                    );
                }
            });
        }
        Ok(())
    }
}
