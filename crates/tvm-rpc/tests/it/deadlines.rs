//! The client's handshake deadline (`-handshake_timeout=`, an option of the client only) and
//! how a server session ends on a malformed packet: real sockets on loopback.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tvm_rpc::endpoint::serve;
use tvm_rpc::handshake::{client_handshake, server_handshake};
use tvm_rpc::session::LocalSession;
use tvm_rpc::transport::Transport;

#[test]
fn a_silent_server_times_out_within_the_handshake_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut socket = TcpStream::connect(&address).unwrap();
    let start = Instant::now();
    let err = client_handshake(&mut socket, &address, " -handshake_timeout=0.3", None)
        .err()
        .expect("a silent server completed a handshake");
    let took = start.elapsed();
    assert_eq!(&*err.kind(), "TimeoutError", "{}", err.message());
    assert!(err.message().contains(&address), "{}", err.message());
    assert!(err.message().contains("0.3 s"), "{}", err.message());
    assert!(took >= Duration::from_millis(300), "gave up after {took:?}");
    assert!(took < Duration::from_secs(5), "waited {took:?}");
    drop(listener);
}

#[test]
fn the_handshake_timeout_is_not_sent_to_the_server() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (sent, got) = mpsc::channel();
    thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let hello = server_handshake(&mut socket, "gpu", None, Duration::from_secs(10))
            .unwrap()
            .expect("the client was refused");
        sent.send(hello.key).unwrap();
    });
    let mut socket = TcpStream::connect(&address).unwrap();
    client_handshake(
        &mut socket,
        &address,
        "gpu -handshake_timeout=5 -timeout=10",
        None,
    )
    .unwrap();
    let key = got.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(key.starts_with("client:gpu -timeout=10"), "{key}");
    assert!(!key.contains("handshake_timeout"), "{key}");
}

#[test]
fn a_bad_handshake_timeout_is_a_value_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    for bad in ["0", "-1", "soon", "nan", "inf"] {
        let mut socket = TcpStream::connect(&address).unwrap();
        let key = format!("gpu -handshake_timeout={bad}");
        let err = client_handshake(&mut socket, &address, &key, None)
            .err()
            .unwrap_or_else(|| panic!("{bad} was accepted"));
        assert_eq!(&*err.kind(), "ValueError", "{bad}: {}", err.message());
    }
}

/// Serves a local session on one end of a loopback connection; returns the other end and the
/// serving thread's outcome.
fn serving_pair() -> (TcpStream, mpsc::Receiver<tvm_ffi::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let (done, outcome) = mpsc::channel();
    thread::spawn(move || {
        let transport = Transport::from_socket(server).unwrap();
        let _ = done.send(serve(transport, Arc::new(LocalSession::new()), true));
    });
    (client, outcome)
}

#[test]
fn a_malformed_packet_ends_the_session_with_an_rpc_error() {
    let packets: [(&str, Vec<u8>); 3] = [
        ("no code", [2u64.to_le_bytes().as_slice(), b"ab"].concat()),
        (
            "unknown code",
            [
                8u64.to_le_bytes().as_slice(),
                &12345i32.to_le_bytes(),
                &[0; 4],
            ]
            .concat(),
        ),
        (
            "trailing bytes",
            [
                12u64.to_le_bytes().as_slice(),
                &1i32.to_le_bytes(),
                &[0xff; 8],
            ]
            .concat(),
        ),
    ];
    for (what, packet) in packets {
        let (mut client, outcome) = serving_pair();
        client.write_all(&packet).unwrap();
        let result = outcome.recv_timeout(Duration::from_secs(10)).unwrap();
        let err = result.err().unwrap_or_else(|| panic!("{what}: served"));
        assert_eq!(&*err.kind(), "RPCError", "{what}: {}", err.message());
        let message = err.message();
        assert!(
            message.contains("the session with the client ended")
                || message.contains("the client sent a malformed RPC packet"),
            "{what}: {message}"
        );
    }
}

#[test]
fn a_client_that_leaves_ends_the_session_cleanly() {
    let (client, outcome) = serving_pair();
    drop(client);
    let result = outcome.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        result.is_ok(),
        "{:?}",
        result.err().map(|e| e.message().into_owned())
    );
}
