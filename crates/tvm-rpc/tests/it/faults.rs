//! Faults: a client that vanishes mid-session or mid-upload, bad packets, and what the server
//! releases when a session ends.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tvm_ffi::{Any, DataType, Device, Function};
use tvm_rpc::server::connect;
use tvm_runtime::device::{TensorDeviceExt, empty_on, test_device_stats};

use crate::sessions::start_server;

/// Objects the server handed out that are still alive.
static TRACKED_ALIVE: AtomicUsize = AtomicUsize::new(0);

struct Tracked;

impl Drop for Tracked {
    fn drop(&mut self) {
        TRACKED_ALIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn register_tracked_factory() {
    Function::from_packed(|_| {
        TRACKED_ALIVE.fetch_add(1, Ordering::SeqCst);
        let guard = Tracked;
        Ok(Any::from(Function::from_packed(move |_| {
            let _ = &guard;
            Ok(Any::from(7i64))
        })))
    })
    .register_global("rpc.test.tracked", true)
    .unwrap();
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_vanished_client_leaves_nothing_alive_on_the_server() {
    let port = start_server("");
    register_tracked_factory();
    let before_device = test_device_stats().map(|s| s.live_allocations).unwrap_or(0);
    let core = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
    let factory = core.get_function("rpc.test.tracked").unwrap().unwrap();
    let made: Vec<Function> = (0..5)
        .map(|_| factory.call(()).unwrap().cast().unwrap())
        .collect();
    assert_eq!(made[0].call(()).unwrap().cast::<i64>().unwrap(), 7);
    assert_eq!(TRACKED_ALIVE.load(Ordering::SeqCst), 5);
    let device = core
        .device(Device::new(tvm_ffi::abi::kDLExtDev, 0).0)
        .unwrap();
    let remote = empty_on(&[256], DataType::float(32), device).unwrap();
    remote.copy_from_slice(&[1.0f32; 256]).unwrap();
    // The connection drops without a single FreeHandle or free.
    core.session().shutdown();
    wait_until("the server released every handle", || {
        TRACKED_ALIVE.load(Ordering::SeqCst) == 0
    });
    wait_until("the server freed the device memory", || {
        test_device_stats().map(|s| s.live_allocations).unwrap_or(0) == before_device
    });
    drop((made, remote));
}

#[test]
fn the_server_keeps_serving_after_a_client_dies_mid_upload() {
    let port = start_server("");
    let core = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
    let remote = empty_on(
        &[1 << 20],
        DataType::uint(8),
        core.device(Device::cpu(0).0).unwrap(),
    )
    .unwrap();
    drop(remote);
    // A raw client: handshake, init, then a copy packet that promises 1 MiB and sends 10 bytes.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let key = b"client:";
    let mut hello = 0xFF271i32.to_le_bytes().to_vec();
    hello.extend_from_slice(&(key.len() as i32).to_le_bytes());
    hello.extend_from_slice(key);
    raw.write_all(&hello).unwrap();
    let mut init = 2i32.to_le_bytes().to_vec();
    init.extend_from_slice(&5u64.to_le_bytes());
    init.extend_from_slice(b"0.8.0");
    init.extend_from_slice(&0i32.to_le_bytes());
    raw.write_all(&(init.len() as u64).to_le_bytes()).unwrap();
    raw.write_all(&init).unwrap();
    let mut copy = 7i32.to_le_bytes().to_vec();
    copy.extend_from_slice(&0u64.to_le_bytes());
    copy.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 8, 1, 0]);
    copy.extend_from_slice(&(1i64 << 20).to_le_bytes());
    copy.extend_from_slice(&0u64.to_le_bytes());
    copy.extend_from_slice(&(1u64 << 20).to_le_bytes());
    raw.write_all(&((copy.len() as u64) + (1 << 20)).to_le_bytes())
        .unwrap();
    raw.write_all(&copy).unwrap();
    raw.write_all(&[0u8; 10]).unwrap();
    drop(raw);
    // Other clients are still served.
    let again = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
    let addone = again.get_function("rpc.test.addone").unwrap().unwrap();
    assert_eq!(addone.call((1i64,)).unwrap().cast::<i64>().unwrap(), 2);
}

#[test]
fn eight_concurrent_clients_are_served() {
    let port = start_server("");
    let threads: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                let core = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
                let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
                let device = core.device(Device::cpu(0).0).unwrap();
                for round in 0..20i64 {
                    let v = addone
                        .call((i * 1000 + round,))
                        .unwrap()
                        .cast::<i64>()
                        .unwrap();
                    assert_eq!(v, i * 1000 + round + 1);
                    let t = empty_on(&[64], DataType::int(64), device).unwrap();
                    let data: Vec<i64> = (0..64).map(|k| k * round).collect();
                    t.copy_from_slice(&data).unwrap();
                    assert_eq!(t.to_vec::<i64>().unwrap(), data);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
