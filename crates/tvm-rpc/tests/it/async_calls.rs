//! Rust futures served as RPC functions, and remote calls awaited.

use std::time::Duration;

use tvm_ffi::{Any, ErrorKind, Function};
use tvm_rpc::server::connect;
use tvm_runtime::async_functions::{block_on, call_async, register_async_function};

use crate::sessions::start_server;

/// A future that waits on another thread (a call on a thread of its own) before it completes.
async fn doubled_later(args: Vec<Any>) -> tvm_ffi::Result<Any> {
    let x: i64 = args
        .first()
        .ok_or_else(|| tvm_ffi::Error::new(ErrorKind::TypeError, "needs one argument"))?
        .cast()?;
    if x < 0 {
        tvm_ffi::bail!(ErrorKind::ValueError, "negative input {x}");
    }
    let one = Function::from_typed("one", || 1i64);
    let waited: i64 = call_async(one, Vec::new())?.await?.cast()?;
    Ok(Any::from(2 * x + waited - 1))
}

#[test]
fn a_served_future_completes_before_the_remote_call_returns() {
    let port = start_server("");
    register_async_function("rpc.test.async_double", doubled_later, true).unwrap();
    let session = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
    let remote = session
        .get_function("rpc.test.async_double")
        .unwrap()
        .unwrap();
    assert_eq!(remote.call((21i64,)).unwrap().cast::<i64>().unwrap(), 42);
    let err = remote.call((-1i64,)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("negative input -1"), "{err}");
    // The same call awaited by the client: the future is pending while the remote works.
    let future = call_async(remote.clone(), vec![Any::from(5i64)]).unwrap();
    assert_eq!(block_on(future).unwrap().cast::<i64>().unwrap(), 10);
    let failed = block_on(call_async(remote, vec![Any::from(-3i64)]).unwrap()).unwrap_err();
    assert_eq!(failed.kind(), "ValueError");
}

#[test]
fn block_on_waits_for_wakes_from_other_threads() {
    let (sender, receiver) = std::sync::mpsc::channel();
    let receiver = std::sync::Mutex::new(receiver);
    let slow = Function::from_packed(move |_| {
        let receiver = receiver.lock().unwrap();
        receiver.recv_timeout(Duration::from_secs(30)).unwrap();
        Ok(Any::from("done"))
    });
    let future = call_async(slow, Vec::new()).unwrap();
    sender.send(()).unwrap();
    assert_eq!(block_on(future).unwrap().cast::<String>().unwrap(), "done");
    register_async_function("rpc.test.async_once", doubled_later, false).unwrap();
    let taken = register_async_function("rpc.test.async_once", doubled_later, false);
    assert!(taken.is_err(), "an existing name is kept unless overridden");
    let doubled = Function::get_global("rpc.test.async_once").unwrap();
    assert_eq!(doubled.call((4i64,)).unwrap().cast::<i64>().unwrap(), 8);
}
