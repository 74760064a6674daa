//! The data-plane handshake that opens a connection, before any packet: magic, then keys.
//!
//! Client → server: `i32 RPC_MAGIC`, `i32 len`, `client:<key>[ <options>]`. Server → client:
//! `i32` code (`RPC_MAGIC` accepted, `+1` duplicate, `+2` key mismatch) and, when accepted,
//! `i32 len`, `server:<key>[ <options>]`. The options a peer does not know are ignored, which is
//! how this runtime announces its own protocol version to a peer that may be Apache TVM's.
//!
//! A server with a shared secret adds `-nonce=<hex>` to its key; the client answers with the
//! 32-byte HMAC-SHA256 of the nonce under the secret, and the server replies `RPC_MAGIC` (accepted)
//! or `RPC_CODE_MISMATCH` (refused). Such a server refuses clients that cannot authenticate
//! (Apache TVM's, or ours without the secret) with `RPC_CODE_MISMATCH` at once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use tvm_ffi::{Error, Result};

use crate::protocol::{OWN_PROTOCOL_VERSION, RPC_CODE_DUPLICATE, RPC_CODE_MISMATCH, RPC_MAGIC};
use crate::transport::connection_error;

/// The longest key either side accepts.
pub const MAX_KEY_LEN: i32 = 4096;

/// How long a server waits for a client's handshake bytes.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client waits for a server to answer its handshake (a server that serves one
/// client at a time, as Apache TVM's does, answers only when it is free).
pub const CLIENT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment variable that holds the shared secret when none is passed.
pub const AUTH_KEY_ENV: &str = "TVM_RPC_KEY";

/// The shared secret: `explicit`, else `TVM_RPC_KEY` when set and not empty.
pub fn auth_key(explicit: Option<&str>) -> Option<Vec<u8>> {
    explicit
        .map(str::to_owned)
        .or_else(|| std::env::var(AUTH_KEY_ENV).ok())
        .filter(|k| !k.is_empty())
        .map(String::into_bytes)
}

/// The keyed hash of a challenge.
fn challenge_mac(secret: &[u8], nonce: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any size");
    mac.update(b"tvm-rpc-auth:");
    mac.update(nonce.as_bytes());
    mac
}

fn fresh_nonce() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The option that announces [`OWN_PROTOCOL_VERSION`].
fn own_protocol_option() -> String {
    format!("-protocol={OWN_PROTOCOL_VERSION}")
}

/// The options of a handshake key: the words after the first.
pub fn key_options(key: &str) -> impl Iterator<Item = &str> {
    key.split_whitespace().skip(1)
}

/// Whether a key announces this runtime's own protocol.
pub fn announces_own_protocol(key: &str) -> bool {
    let option = own_protocol_option();
    key_options(key).any(|o| o == option)
}

/// The session timeout a client key asks for (`-timeout=<seconds>`), if any.
pub fn timeout_option(key: &str) -> Option<f64> {
    key_options(key)
        .find_map(|o| o.strip_prefix("-timeout="))
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| *t > 0.0 && t.is_finite())
}

fn write_key(socket: &mut TcpStream, code: i32, key: &str) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(8 + key.len());
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(key.len() as i32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    socket.write_all(&out)
}

fn read_i32(socket: &mut TcpStream) -> std::io::Result<i32> {
    let mut word = [0u8; 4];
    socket.read_exact(&mut word)?;
    Ok(i32::from_le_bytes(word))
}

fn read_key(socket: &mut TcpStream) -> std::io::Result<Option<String>> {
    let len = read_i32(socket)?;
    if !(0..=MAX_KEY_LEN).contains(&len) {
        return Ok(None);
    }
    let mut key = vec![0u8; len as usize];
    socket.read_exact(&mut key)?;
    Ok(String::from_utf8(key).ok())
}

/// What the client learned from the handshake.
pub struct Accepted {
    /// The server's key (`server:<key>[ <options>]`).
    pub server_key: String,
    /// Whether both sides speak [`OWN_PROTOCOL_VERSION`].
    pub own_protocol: bool,
}

/// Runs the client side on a connected socket. `key` is the user's key with its options
/// (`"gpu -timeout=10"`).
pub fn client_handshake(
    socket: &mut TcpStream,
    address: &str,
    key: &str,
    secret: Option<&[u8]>,
) -> Result<Accepted> {
    let full_key = format!("client:{key} {}", own_protocol_option());
    let io = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            return Error::new(
                "RPCError",
                format!(
                    "{address} did not answer the handshake within {} s (a server that serves \
                     one client at a time may be busy)",
                    CLIENT_HANDSHAKE_TIMEOUT.as_secs()
                ),
            );
        }
        connection_error(e, &format!("opening a session with {address}"))
    };
    socket
        .set_read_timeout(Some(CLIENT_HANDSHAKE_TIMEOUT))
        .map_err(io)?;
    write_key(socket, RPC_MAGIC, full_key.trim()).map_err(io)?;
    let code = read_i32(socket).map_err(io)?;
    let user_key = key.split_whitespace().next().unwrap_or("");
    match code {
        RPC_MAGIC => {}
        RPC_CODE_MISMATCH => {
            return Err(Error::new(
                "RPCError",
                format!("{address} has no server that matches key={user_key:?} (or refused it)"),
            ));
        }
        RPC_CODE_DUPLICATE => {
            return Err(Error::new(
                "RPCError",
                format!("{address} already has a server with key={user_key:?}"),
            ));
        }
        other => {
            return Err(Error::new(
                "RPCError",
                format!("{address} is not a TVM RPC server (it answered {other:#x})"),
            ));
        }
    }
    let server_key = read_key(socket)
        .map_err(io)?
        .ok_or_else(|| Error::new("RPCError", format!("{address} sent a malformed server key")))?;
    let own_protocol = announces_own_protocol(&server_key);
    if let Some(nonce) = key_options(&server_key).find_map(|o| o.strip_prefix("-nonce=")) {
        let Some(secret) = secret else {
            return Err(Error::new(
                "RPCError",
                format!(
                    "{address} requires an authentication key: pass auth_key or set {AUTH_KEY_ENV}"
                ),
            ));
        };
        let response: [u8; 32] = challenge_mac(secret, nonce).finalize().into_bytes().into();
        socket.write_all(&response).map_err(io)?;
        if read_i32(socket).map_err(io)? != RPC_MAGIC {
            return Err(Error::new(
                "RPCError",
                format!("{address} refused the authentication key"),
            ));
        }
    }
    socket.set_read_timeout(None).map_err(io)?;
    Ok(Accepted {
        server_key,
        own_protocol,
    })
}

/// What the server learned from a client's handshake.
pub struct ClientHello {
    /// The client's whole key (`client:<key>[ <options>]`).
    pub key: String,
    /// Whether both sides speak [`OWN_PROTOCOL_VERSION`].
    pub own_protocol: bool,
}

/// Runs the server side on an accepted socket: `Ok(None)` when the peer is not an RPC client
/// (wrong magic, a key that does not match: it was answered and should be closed).
pub fn server_handshake(
    socket: &mut TcpStream,
    rpc_key: &str,
    secret: Option<&[u8]>,
) -> Result<Option<ClientHello>> {
    let io = |e| connection_error(e, "reading a client's handshake");
    socket
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(io)?;
    if read_i32(socket).map_err(io)? != RPC_MAGIC {
        return Ok(None);
    }
    let Some(key) = read_key(socket).map_err(io)? else {
        return Ok(None);
    };
    let expected = format!("client:{rpc_key}");
    if key.split_whitespace().next() != Some(expected.as_str()) {
        let _ = socket.write_all(&RPC_CODE_MISMATCH.to_le_bytes());
        return Ok(None);
    }
    let own_protocol = announces_own_protocol(&key);
    if secret.is_some() && !own_protocol {
        // A peer that cannot authenticate is refused before it sees anything else.
        let _ = socket.write_all(&RPC_CODE_MISMATCH.to_le_bytes());
        return Ok(None);
    }
    let mut reply = format!("server:{rpc_key}");
    if own_protocol {
        reply = format!("{reply} {}", own_protocol_option());
    }
    let nonce = match secret {
        Some(_) => Some(fresh_nonce().map_err(io)?),
        None => None,
    };
    if let Some(nonce) = &nonce {
        reply = format!("{reply} -nonce={nonce}");
    }
    write_key(socket, RPC_MAGIC, &reply).map_err(io)?;
    if let (Some(secret), Some(nonce)) = (secret, nonce) {
        let mut response = [0u8; 32];
        socket.read_exact(&mut response).map_err(io)?;
        // A constant-time comparison.
        if challenge_mac(secret, &nonce)
            .verify_slice(&response)
            .is_err()
        {
            let _ = socket.write_all(&RPC_CODE_MISMATCH.to_le_bytes());
            return Ok(None);
        }
        socket.write_all(&RPC_MAGIC.to_le_bytes()).map_err(io)?;
    }
    socket.set_read_timeout(None).map_err(io)?;
    Ok(Some(ClientHello { key, own_protocol }))
}
