//! The data-plane handshake that opens a connection, before any packet: magic, keys and, with
//! a shared secret, a mutual proof of the secret.
//!
//! # Wire format
//!
//! Client → server: `i32 RPC_MAGIC`, `i32 len`, `client:<key>[ <options>]`. Server → client:
//! `i32` code (`RPC_MAGIC` accepted, `+1` duplicate, `+2` key mismatch or refused, `+3` busy)
//! and, when accepted, `i32 len`, `server:<key>[ <options>]`. Options a peer does not know are
//! ignored, which is how this runtime announces its own protocol version (`-protocol=<v>`) to a
//! peer that may be Apache TVM's. Every integer is little-endian.
//!
//! # Mutual authentication (a shared secret `K` on either side)
//!
//! Both sides prove they hold `K` without sending it, each over a nonce the other chose, so
//! neither a fake server nor a fake client can replay an old proof:
//!
//! 1. The client sends a fresh 16-byte nonce `Nc` (hex) in its key: `-cnonce=<Nc>`.
//! 2. The server answers `RPC_MAGIC` and `server:<key> -protocol=<v> -nonce=<Ns>
//!    -proof=<Ps>`, where `Ns` is its own fresh nonce and
//!    `Ps = HMAC-SHA256(K, "tvm-rpc-server-proof" 0x00 Nc 0x00 Ns)` (hex).
//! 3. The client checks `Ps` (in constant time). A server that sends no proof, or a wrong one,
//!    is refused: a client holding a key never talks to a server that did not prove the same
//!    key, and Apache TVM's servers (which cannot) are refused.
//! 4. The client sends the 32 raw bytes `Pc = HMAC-SHA256(K, "tvm-rpc-client-proof" 0x00 Nc
//!    0x00 Ns)`; the server checks it and answers `RPC_MAGIC` (accepted), `RPC_CODE_BUSY` (at
//!    its limits) or `RPC_CODE_MISMATCH` (refused).
//!
//! The two proofs carry different labels, so one side's proof is never valid as the other's. A
//! server with a secret refuses a client that does not announce the own protocol (Apache TVM's)
//! or sends no `-cnonce` (it answers `server:<key> -protocol=<v> -auth=required`, so the client
//! can say why). Compatibility with Apache TVM's peers holds only where neither side has a key.
//!
//! The handshake authenticates the peers; it does not encrypt or sign the session that
//! follows: beyond a trusted network, carry the connection over TLS or SSH.
//!
//! # Deadlines
//!
//! Each side completes the whole handshake within one total deadline ([`HANDSHAKE_TIMEOUT`]
//! for servers, [`CLIENT_HANDSHAKE_TIMEOUT`] for clients), not a timeout per read: a peer that
//! sends one byte at a time cannot hold a connection past it. A server calls
//! [`server_verify`], which checks the client and leaves the final "accepted" reply to the
//! caller, so that the caller gives the connection a session (a process, a thread) only once
//! the client proved itself, and can still answer `RPC_CODE_BUSY` at its limits.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use tvm_ffi::{Error, ErrorKind, Result};

use crate::protocol::{
    OWN_PROTOCOL_VERSION, RPC_CODE_BUSY, RPC_CODE_DUPLICATE, RPC_CODE_MISMATCH, RPC_MAGIC,
};
use crate::transport::connection_error;

/// The longest key either side accepts.
pub const MAX_KEY_LEN: i32 = 4096;

/// The total time a server gives a client to complete its handshake, by default.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The total time a client waits for a server to complete the handshake (a server that
/// serves one client at a time, as Apache TVM's does, answers only when it is free).
pub const CLIENT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment variable that holds the shared secret when none is passed.
pub const AUTH_KEY_ENV: &str = "TVM_RPC_KEY";

const SERVER_PROOF_LABEL: &[u8] = b"tvm-rpc-server-proof";
const CLIENT_PROOF_LABEL: &[u8] = b"tvm-rpc-client-proof";
/// Hex digits of a nonce (16 random bytes).
const NONCE_HEX_LEN: usize = 32;

/// Checks a shared secret named by `source` (for the message): an empty or whitespace-only
/// secret is a `ValueError`, never "authentication off".
pub fn check_auth_key(key: &str, source: &str) -> Result<Vec<u8>> {
    if key.trim().is_empty() {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "{source} {key:?} is empty or whitespace: an authentication key must not be \
             empty (leave it unset for no authentication)"
        );
    }
    Ok(key.as_bytes().to_vec())
}

/// The shared secret: `explicit` if given, else `TVM_RPC_KEY` if it is set, else none. A
/// given or set key that is empty or whitespace is a `ValueError` naming it.
pub fn auth_key(explicit: Option<&str>) -> Result<Option<Vec<u8>>> {
    if let Some(key) = explicit {
        return check_auth_key(key, "auth_key").map(Some);
    }
    match std::env::var_os(AUTH_KEY_ENV) {
        None => Ok(None),
        Some(value) => {
            let text = value.into_string().map_err(|v| {
                Error::new(
                    ErrorKind::ValueError,
                    format!("{AUTH_KEY_ENV} {v:?} is not valid UTF-8"),
                )
            })?;
            check_auth_key(&text, AUTH_KEY_ENV).map(Some)
        }
    }
}

/// `HMAC-SHA256(secret, label 0x00 client_nonce 0x00 server_nonce)`.
fn proof_mac(secret: &[u8], label: &[u8], client_nonce: &str, server_nonce: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any size");
    mac.update(label);
    mac.update(b"\0");
    mac.update(client_nonce.as_bytes());
    mac.update(b"\0");
    mac.update(server_nonce.as_bytes());
    mac
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

fn fresh_nonce() -> io::Result<String> {
    let mut bytes = [0u8; NONCE_HEX_LEN / 2];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(to_hex(&bytes))
}

/// The option that announces [`OWN_PROTOCOL_VERSION`].
fn own_protocol_option() -> String {
    format!("-protocol={OWN_PROTOCOL_VERSION}")
}

/// The options of a handshake key: the words after the first.
pub fn key_options(key: &str) -> impl Iterator<Item = &str> {
    key.split_whitespace().skip(1)
}

/// The value of option `-<name>=` of a key, if present.
fn option<'a>(key: &'a str, name: &str) -> Option<&'a str> {
    key_options(key).find_map(|o| o.strip_prefix('-')?.strip_prefix(name)?.strip_prefix('='))
}

/// Whether a key announces this runtime's own protocol.
pub fn announces_own_protocol(key: &str) -> bool {
    let option = own_protocol_option();
    key_options(key).any(|o| o == option)
}

/// The session timeout a client key asks for (`-timeout=<seconds>`), if any.
pub fn timeout_option(key: &str) -> Option<f64> {
    option(key, "timeout")
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| *t > 0.0 && t.is_finite())
}

/// One total deadline for every read and write of a handshake.
#[derive(Clone, Copy, Debug)]
struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    fn after(limit: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    fn expired(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the handshake did not complete within {:.1} s",
                self.limit.as_secs_f64()
            ),
        )
    }

    fn remaining(&self) -> io::Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(self.expired())
        } else {
            Ok(left)
        }
    }

    /// Reads exactly `buf.len()` bytes, each read bounded by the time left.
    fn read_exact(&self, socket: &mut TcpStream, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            socket.set_read_timeout(Some(self.remaining()?))?;
            match socket.read(buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the handshake",
                    ));
                }
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(self.expired());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes all of `bytes`, each write bounded by the time left.
    fn write_all(&self, socket: &mut TcpStream, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            socket.set_write_timeout(Some(self.remaining()?))?;
            match socket.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(self.expired());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_i32(&self, socket: &mut TcpStream) -> io::Result<i32> {
        let mut word = [0u8; 4];
        self.read_exact(socket, &mut word)?;
        Ok(i32::from_le_bytes(word))
    }

    /// A length-prefixed UTF-8 key; `None` if the length or the text is invalid.
    fn read_key(&self, socket: &mut TcpStream) -> io::Result<Option<String>> {
        let len = self.read_i32(socket)?;
        if !(0..=MAX_KEY_LEN).contains(&len) {
            return Ok(None);
        }
        let mut key = vec![0u8; len as usize];
        self.read_exact(socket, &mut key)?;
        Ok(String::from_utf8(key).ok())
    }
}

/// `code`, then the length-prefixed `key`.
fn key_message(code: i32, key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.len());
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(key.len() as i32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out
}

/// Clears the timeouts the handshake set, for the session that follows.
fn clear_timeouts(socket: &TcpStream) -> io::Result<()> {
    socket.set_read_timeout(None)?;
    socket.set_write_timeout(None)
}

/// What the client learned from the handshake.
pub struct Accepted {
    /// The server's key (`server:<key>[ <options>]`).
    pub server_key: String,
    /// Whether both sides speak [`OWN_PROTOCOL_VERSION`].
    pub own_protocol: bool,
}

fn refused_code(address: &str, user_key: &str, code: i32) -> Error {
    let message = match code {
        RPC_CODE_MISMATCH => {
            format!("{address} has no server that matches key={user_key:?} (or refused it)")
        }
        RPC_CODE_DUPLICATE => format!(
            "{address} already has another client waiting for key={user_key:?} (a proxy pairs \
             one waiting client per key: try again once it is served)"
        ),
        RPC_CODE_BUSY => format!(
            "{address} refused the connection: it is at its limit of concurrent sessions or \
             pending handshakes (try again later)"
        ),
        other => format!("{address} is not a TVM RPC server (it answered {other:#x})"),
    };
    Error::new("RPCError", message)
}

/// The client-side option that bounds the handshake (`-handshake_timeout=<seconds>`): read by
/// [`client_handshake`] and never sent to the server.
pub const HANDSHAKE_TIMEOUT_OPTION: &str = "handshake_timeout";

/// Splits a client key into the key to send and the handshake deadline its
/// [`HANDSHAKE_TIMEOUT_OPTION`] asks for (a value that is not a positive number of seconds is
/// a `ValueError`).
pub(crate) fn local_options(key: &str) -> Result<(String, Option<Duration>)> {
    // The user's key is the first word (possibly empty); options follow.
    let (user, options) = key.split_at(key.find(char::is_whitespace).unwrap_or(key.len()));
    let prefix = format!("-{HANDSHAKE_TIMEOUT_OPTION}=");
    let mut limit = None;
    let mut sent = user.to_string();
    for word in options.split_whitespace() {
        let Some(value) = word.strip_prefix(prefix.as_str()) else {
            sent.push(' ');
            sent.push_str(word);
            continue;
        };
        let seconds = value
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && *s < 1e9)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::ValueError,
                    format!(
                        "{HANDSHAKE_TIMEOUT_OPTION} must be a positive number of seconds, got \
                         {value:?}"
                    ),
                )
            })?;
        limit = Some(Duration::from_secs_f64(seconds));
    }
    Ok((sent, limit))
}

/// Runs the client side on a connected socket. `key` is the user's key with its options
/// (`"gpu -timeout=10"`); `secret` is the shared secret: with one, the server must prove it
/// holds the same (see the module documentation). The handshake completes within
/// [`CLIENT_HANDSHAKE_TIMEOUT`], or the time the key's `-handshake_timeout=<seconds>` option
/// gives (an option of this side only, not sent); past it, a `TimeoutError` naming `address`.
pub fn client_handshake(
    socket: &mut TcpStream,
    address: &str,
    key: &str,
    secret: Option<&[u8]>,
) -> Result<Accepted> {
    let (key, limit) = local_options(key)?;
    client_handshake_within(
        socket,
        address,
        &key,
        secret,
        limit.unwrap_or(CLIENT_HANDSHAKE_TIMEOUT),
    )
}

/// [`client_handshake`] with a total deadline of `limit`.
pub fn client_handshake_within(
    socket: &mut TcpStream,
    address: &str,
    key: &str,
    secret: Option<&[u8]>,
    limit: Duration,
) -> Result<Accepted> {
    let deadline = Deadline::after(limit);
    let io = |e: io::Error| {
        if e.kind() == io::ErrorKind::TimedOut {
            return Error::new(
                "TimeoutError",
                format!(
                    "{address} did not complete the handshake within {:.1} s (a server that \
                     serves one client at a time may be busy)",
                    limit.as_secs_f64()
                ),
            );
        }
        connection_error(e, &format!("opening a session with {address}"))
    };
    let client_nonce = match secret {
        Some(_) => Some(fresh_nonce().map_err(io)?),
        None => None,
    };
    let mut full_key = format!("client:{key} {}", own_protocol_option());
    if let Some(nonce) = &client_nonce {
        full_key = format!("{full_key} -cnonce={nonce}");
    }
    deadline
        .write_all(socket, &key_message(RPC_MAGIC, full_key.trim()))
        .map_err(io)?;
    let user_key = key.split_whitespace().next().unwrap_or("");
    let code = deadline.read_i32(socket).map_err(io)?;
    if code != RPC_MAGIC {
        return Err(refused_code(address, user_key, code));
    }
    let server_key = deadline
        .read_key(socket)
        .map_err(io)?
        .ok_or_else(|| Error::new("RPCError", format!("{address} sent a malformed server key")))?;
    let own_protocol = announces_own_protocol(&server_key);
    let server_nonce = option(&server_key, "nonce");
    match (secret, client_nonce) {
        (Some(secret), Some(client_nonce)) => {
            let (Some(server_nonce), Some(proof)) = (server_nonce, option(&server_key, "proof"))
            else {
                return Err(Error::new(
                    "RPCError",
                    format!(
                        "{address} did not prove that it holds the authentication key (it sent \
                         no proof): refusing it, since this client has a key"
                    ),
                ));
            };
            let proven = from_hex(proof).is_some_and(|proof| {
                proof_mac(secret, SERVER_PROOF_LABEL, &client_nonce, server_nonce)
                    .verify_slice(&proof)
                    .is_ok()
            });
            if !proven {
                return Err(Error::new(
                    "RPCError",
                    format!(
                        "{address} failed to prove that it holds the authentication key: it \
                         holds a different key, or it is not the server it claims to be"
                    ),
                ));
            }
            let answer: [u8; 32] =
                proof_mac(secret, CLIENT_PROOF_LABEL, &client_nonce, server_nonce)
                    .finalize()
                    .into_bytes()
                    .into();
            deadline.write_all(socket, &answer).map_err(io)?;
            match deadline.read_i32(socket).map_err(io)? {
                RPC_MAGIC => {}
                RPC_CODE_BUSY => return Err(refused_code(address, user_key, RPC_CODE_BUSY)),
                _ => {
                    return Err(Error::new(
                        "RPCError",
                        format!(
                            "{address} refused the authentication key (or, a proxy, found no \
                             server for key={user_key:?})"
                        ),
                    ));
                }
            }
        }
        _ => {
            if server_nonce.is_some() || option(&server_key, "auth").is_some() {
                return Err(Error::new(
                    "RPCError",
                    format!(
                        "{address} requires an authentication key: pass auth_key or set \
                         {AUTH_KEY_ENV}"
                    ),
                ));
            }
        }
    }
    clear_timeouts(socket).map_err(io)?;
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

impl ClientHello {
    /// The hello of a client whose handshake another process completed (see
    /// [`server_verify`]).
    pub fn from_key(key: String) -> ClientHello {
        let own_protocol = announces_own_protocol(&key);
        ClientHello { key, own_protocol }
    }
}

/// A client that proved itself, waiting for the server's last reply.
pub struct Verified {
    /// What the client said.
    pub hello: ClientHello,
    /// The bytes that accept the client ([`Verified::admit`] sends them).
    pub accept_reply: Vec<u8>,
}

impl Verified {
    /// Accepts the client: sends the last reply and clears the handshake's timeouts.
    pub fn admit(self, socket: &mut TcpStream) -> Result<ClientHello> {
        let io = |e| connection_error(e, "accepting a client");
        Deadline::after(HANDSHAKE_TIMEOUT)
            .write_all(socket, &self.accept_reply)
            .map_err(io)?;
        clear_timeouts(socket).map_err(io)?;
        Ok(self.hello)
    }
}

/// Answers `code` to a refused peer (errors ignored: the connection is dropped anyway).
fn refuse(socket: &mut TcpStream, deadline: &Deadline, code: i32) {
    let _ = deadline.write_all(socket, &code.to_le_bytes());
}

/// Answers [`RPC_CODE_BUSY`] to a client the server cannot take now.
pub fn refuse_busy(socket: &mut TcpStream) {
    refuse(
        socket,
        &Deadline::after(Duration::from_secs(1)),
        RPC_CODE_BUSY,
    );
}

/// Runs the server side up to, not including, the last reply: reads the client's key and,
/// with a `secret`, runs the mutual proof, all within `limit` in total. `Ok(None)` when the
/// peer is not an RPC client or was refused (wrong magic, key or proof: it was answered and
/// should be closed); an error when the connection failed or the deadline passed.
pub fn server_verify(
    socket: &mut TcpStream,
    rpc_key: &str,
    secret: Option<&[u8]>,
    limit: Duration,
) -> Result<Option<Verified>> {
    let deadline = Deadline::after(limit);
    let io = |e| connection_error(e, "reading a client's handshake");
    if deadline.read_i32(socket).map_err(io)? != RPC_MAGIC {
        return Ok(None);
    }
    let Some(key) = deadline.read_key(socket).map_err(io)? else {
        return Ok(None);
    };
    let expected = format!("client:{rpc_key}");
    if key.split_whitespace().next() != Some(expected.as_str()) {
        refuse(socket, &deadline, RPC_CODE_MISMATCH);
        return Ok(None);
    }
    let own_protocol = announces_own_protocol(&key);
    let mut reply = format!("server:{rpc_key}");
    if own_protocol {
        reply = format!("{reply} {}", own_protocol_option());
    }
    let Some(secret) = secret else {
        return Ok(Some(Verified {
            accept_reply: key_message(RPC_MAGIC, &reply),
            hello: ClientHello { key, own_protocol },
        }));
    };
    if !own_protocol {
        // A peer that cannot authenticate (Apache TVM's) is refused before it sees anything.
        refuse(socket, &deadline, RPC_CODE_MISMATCH);
        return Ok(None);
    }
    let client_nonce = option(&key, "cnonce")
        .filter(|n| n.len() == NONCE_HEX_LEN && from_hex(n).is_some())
        .map(str::to_owned);
    let Some(client_nonce) = client_nonce else {
        // Ours, without the key: tell it why before closing.
        let _ = deadline.write_all(
            socket,
            &key_message(RPC_MAGIC, &format!("{reply} -auth=required")),
        );
        return Ok(None);
    };
    let server_nonce = fresh_nonce().map_err(io)?;
    let proof = proof_mac(secret, SERVER_PROOF_LABEL, &client_nonce, &server_nonce)
        .finalize()
        .into_bytes();
    let challenge = format!(
        "{reply} -nonce={server_nonce} -proof={}",
        to_hex(proof.as_slice())
    );
    deadline
        .write_all(socket, &key_message(RPC_MAGIC, &challenge))
        .map_err(io)?;
    let mut answer = [0u8; 32];
    deadline.read_exact(socket, &mut answer).map_err(io)?;
    // verify_slice compares in constant time.
    if proof_mac(secret, CLIENT_PROOF_LABEL, &client_nonce, &server_nonce)
        .verify_slice(&answer)
        .is_err()
    {
        refuse(socket, &deadline, RPC_CODE_MISMATCH);
        return Ok(None);
    }
    Ok(Some(Verified {
        accept_reply: RPC_MAGIC.to_le_bytes().to_vec(),
        hello: ClientHello { key, own_protocol },
    }))
}

/// Runs the whole server side on an accepted socket within `limit`: [`server_verify`], then
/// [`Verified::admit`]. `Ok(None)` when the peer was refused (answered; close it).
pub fn server_handshake(
    socket: &mut TcpStream,
    rpc_key: &str,
    secret: Option<&[u8]>,
    limit: Duration,
) -> Result<Option<ClientHello>> {
    match server_verify(socket, rpc_key, secret, limit)? {
        Some(verified) => verified.admit(socket).map(Some),
        None => Ok(None),
    }
}
