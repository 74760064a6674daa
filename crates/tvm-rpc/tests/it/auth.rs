//! Authentication under attack, on loopback: total handshake deadlines, mutual proofs of the
//! shared secret, fake servers, connection limits. Each test also checks that a legitimate
//! client is still served.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use tvm_rpc::handshake::{auth_key, client_handshake_within};
use tvm_rpc::protocol::{RPC_CODE_BUSY, RPC_MAGIC};
use tvm_rpc::server::{ServeOptions, connect};

use crate::sessions::start_server_with;

const SECRET: &[u8] = b"s3cret";

/// `base`, stretched under valgrind (scripts/memcheck.sh sets `TVM_UNDER_VALGRIND`), where a
/// legitimate handshake alone can take longer than the short deadlines these tests give.
fn scaled(base: Duration) -> Duration {
    if std::env::var_os("TVM_UNDER_VALGRIND").is_some() {
        base * 8
    } else {
        base
    }
}

fn keyed_server(timeout: Duration) -> u16 {
    start_server_with(ServeOptions {
        auth_key: Some(SECRET.to_vec()),
        handshake_timeout: Some(timeout),
        ..ServeOptions::default()
    })
}

/// A legitimate client with the secret is served.
fn assert_served(port: u16, secret: Option<&[u8]>) {
    let core = connect("127.0.0.1", port, "", secret, Vec::new()).unwrap();
    let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
    assert_eq!(addone.call((41i64,)).unwrap().cast::<i64>().unwrap(), 42);
}

/// Seconds until the server closes `socket` (reads until EOF or reset), at most `limit`.
fn seconds_until_closed(socket: &mut TcpStream, limit: Duration) -> f64 {
    let start = Instant::now();
    socket.set_read_timeout(Some(limit)).unwrap();
    let mut sink = [0u8; 64];
    loop {
        match socket.read(&mut sink) {
            Ok(0) | Err(_) => return start.elapsed().as_secs_f64(),
            Ok(_) => {}
        }
    }
}

fn hello(key: &str) -> Vec<u8> {
    let mut out = RPC_MAGIC.to_le_bytes().to_vec();
    out.extend_from_slice(&(key.len() as i32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out
}

#[test]
fn a_silent_connection_is_closed_at_the_total_deadline() {
    let deadline = scaled(Duration::from_millis(800));
    let port = keyed_server(deadline);
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let waited = seconds_until_closed(&mut silent, scaled(Duration::from_secs(10)));
    let expected = deadline.as_secs_f64() * 0.75..scaled(Duration::from_secs(5)).as_secs_f64();
    assert!(expected.contains(&waited), "closed after {waited} s");
    assert_served(port, Some(SECRET));
}

#[test]
fn a_byte_dribbling_connection_does_not_restart_the_deadline() {
    let port = keyed_server(scaled(Duration::from_millis(800)));
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let bytes = hello("client: -protocol=0.9.0-tvm-rs");
    let start = Instant::now();
    // One byte every 200 ms: a per-read timeout would never fire.
    let mut closed_at = None;
    for byte in &bytes {
        if slow.write_all(&[*byte]).is_err() {
            closed_at = Some(start.elapsed());
            break;
        }
        thread::sleep(scaled(Duration::from_millis(200)));
        let mut probe = [0u8; 4];
        slow.set_nonblocking(true).unwrap();
        let read = slow.read(&mut probe);
        slow.set_nonblocking(false).unwrap();
        if matches!(read, Ok(0))
            || matches!(&read, Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
        {
            closed_at = Some(start.elapsed());
            break;
        }
        if start.elapsed() > scaled(Duration::from_secs(6)) {
            break;
        }
    }
    let closed_at = closed_at.expect("the server kept a dribbling connection past its deadline");
    assert!(
        closed_at < scaled(Duration::from_secs(3)),
        "closed after {closed_at:?}"
    );
    assert_served(port, Some(SECRET));
}

#[test]
fn missing_and_wrong_keys_are_refused() {
    let port = keyed_server(Duration::from_secs(5));
    let missing = connect("127.0.0.1", port, "", None, Vec::new()).unwrap_err();
    assert!(
        missing.message().contains("requires an authentication key"),
        "{}",
        missing.message()
    );
    let wrong = connect("127.0.0.1", port, "", Some(b"guess"), Vec::new()).unwrap_err();
    assert!(
        wrong.message().contains("failed to prove"),
        "{}",
        wrong.message()
    );
    // An Apache-style client (no own protocol) cannot authenticate: refused at once.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(&hello("client:")).unwrap();
    let mut code = [0u8; 4];
    raw.read_exact(&mut code).unwrap();
    assert_eq!(i32::from_le_bytes(code), RPC_MAGIC + 2);
    assert_served(port, Some(SECRET));
}

/// A fake server: answers every hello with `reply` (after the magic), then reads whatever
/// the client sends. Returns its port and a receiver of the bytes it got after the hello.
fn fake_server(reply: String) -> (u16, std::sync::mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, got) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut head = [0u8; 8];
        socket.read_exact(&mut head).unwrap();
        let len = i32::from_le_bytes(head[4..].try_into().unwrap()) as usize;
        let mut key = vec![0u8; len];
        socket.read_exact(&mut key).unwrap();
        socket.write_all(&hello(&reply)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut rest = Vec::new();
        let _ = socket.read_to_end(&mut rest);
        let _ = sent.send(rest);
    });
    (port, got)
}

#[test]
fn a_keyed_client_refuses_a_server_that_sends_no_challenge() {
    for reply in [
        "server: -protocol=0.9.0-tvm-rs".to_string(),
        "server:".to_string(),
        format!(
            "server: -protocol=0.9.0-tvm-rs -nonce={} -proof={}",
            "ab".repeat(16),
            "cd".repeat(32)
        ),
    ] {
        let (port, got) = fake_server(reply.clone());
        let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let address = format!("127.0.0.1:{port}");
        let err = client_handshake_within(
            &mut socket,
            &address,
            "",
            Some(SECRET),
            Duration::from_secs(5),
        )
        .err()
        .unwrap_or_else(|| panic!("a keyed client accepted the fake server {reply:?}"));
        assert!(err.message().contains("prove"), "{}", err.message());
        drop(socket);
        // The client sent nothing after the hello: no proof for the fake server to relay.
        assert!(got.recv_timeout(Duration::from_secs(5)).unwrap().is_empty());
    }
    // Without a key, the same fake server is accepted (Apache TVM compatibility).
    let (port, _got) = fake_server("server:".into());
    let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client_handshake_within(&mut socket, "fake", "", None, Duration::from_secs(5)).unwrap();
}

#[test]
fn a_keyed_client_refuses_a_server_without_a_key() {
    let open = start_server_with(ServeOptions::default());
    let err = connect("127.0.0.1", open, "", Some(SECRET), Vec::new()).unwrap_err();
    assert!(err.message().contains("did not prove"), "{}", err.message());
    assert_served(open, None);
}

#[test]
fn a_client_beyond_the_connection_limit_is_told_the_server_is_busy() {
    let port = start_server_with(ServeOptions {
        max_connections: Some(2),
        handshake_timeout: Some(Duration::from_secs(3)),
        ..ServeOptions::default()
    });
    let held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Give the server time to count both.
    thread::sleep(Duration::from_millis(200));
    let err = connect("127.0.0.1", port, "", None, Vec::new()).unwrap_err();
    assert!(err.message().contains("limit"), "{}", err.message());
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(&hello("client:")).unwrap();
    let mut code = [0u8; 4];
    raw.read_exact(&mut code).unwrap();
    assert_eq!(i32::from_le_bytes(code), RPC_CODE_BUSY);
    drop(held);
    // The held connections end at their deadline; then clients are served again.
    let start = Instant::now();
    loop {
        match connect("127.0.0.1", port, "", None, Vec::new()) {
            Ok(_) => break,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                assert!(e.message().contains("limit"), "{}", e.message());
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("never served again: {}", e.message()),
        }
    }
    assert_served(port, None);
}

#[test]
fn an_empty_or_whitespace_key_is_an_error_naming_it() {
    for bad in ["", "  "] {
        let err = auth_key(Some(bad)).unwrap_err();
        assert_eq!(err.kind(), "ValueError");
        assert!(
            err.message().contains(&format!("{bad:?}")),
            "{}",
            err.message()
        );
    }
}

#[test]
fn key_options_are_found_by_exact_name() {
    use tvm_rpc::handshake::timeout_option;
    assert_eq!(
        timeout_option("client:gpu -cnonce=ab -timeout=2.5"),
        Some(2.5)
    );
    assert_eq!(timeout_option("client:gpu -xtimeout=2.5"), None);
    assert_eq!(timeout_option("client:gpu -timeout=nan"), None);
}
