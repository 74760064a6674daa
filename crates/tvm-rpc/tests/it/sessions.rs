//! Sessions end to end: a server thread on loopback, a client session, functions, tensors,
//! errors, chains.

use std::sync::{Arc, Once};
use std::thread;

use tvm_ffi::{Any, DataType, Device, Function, Tensor};
use tvm_rpc::codec::WireValue;
use tvm_rpc::remote::SessionCore;
use tvm_rpc::server::{ServeOptions, Server, connect};
use tvm_runtime::device::{TensorDeviceExt, empty_on};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tvm_rpc::globals::init();
        // The strict simulated device, for allocations the tests can count.
        tvm_runtime::device::register_test_device(Default::default()).unwrap();
        Function::from_typed("rpc.test.addone", |x: i64| x + 1)
            .register_global("rpc.test.addone", true)
            .unwrap();
        Function::from_typed("rpc.test.fail", |what: String| -> tvm_ffi::Result<i64> {
            Err(tvm_ffi::Error::new("ValueError", format!("refused {what}")))
        })
        .register_global("rpc.test.fail", true)
        .unwrap();
        Function::from_typed("rpc.test.sum", |t: Tensor| -> tvm_ffi::Result<f64> {
            Ok(t.as_slice::<f32>()?.iter().map(|v| f64::from(*v)).sum())
        })
        .register_global("rpc.test.sum", true)
        .unwrap();
        Function::from_typed(
            "rpc.test.apply",
            |f: Function, x: i64| -> tvm_ffi::Result<i64> { Ok(f.call((x,))?.cast::<i64>()? + 1) },
        )
        .register_global("rpc.test.apply", true)
        .unwrap();
        Function::from_typed("rpc.test.make_array", |n: i64| {
            (0..n).map(Any::from).collect::<tvm_ffi::Array>()
        })
        .register_global("rpc.test.make_array", true)
        .unwrap();
        Function::from_typed("rpc.test.array_len", |a: tvm_ffi::Array| a.len() as i64)
            .register_global("rpc.test.array_len", true)
            .unwrap();
        Function::from_typed("rpc.test.sleep", |ms: i64| {
            thread::sleep(std::time::Duration::from_millis(ms as u64));
            ms
        })
        .register_global("rpc.test.sleep", true)
        .unwrap();
        Function::from_typed("rpc.test.iota", |n: i64| -> tvm_ffi::Result<Tensor> {
            let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
            Tensor::from_slice(&values, &[n])
        })
        .register_global("rpc.test.iota", true)
        .unwrap();
    });
}

/// A server on a free loopback port, serving on a background thread.
pub fn start_server(key: &str) -> u16 {
    start_server_with(ServeOptions {
        rpc_key: key.into(),
        ..ServeOptions::default()
    })
}

pub fn start_server_with(options: ServeOptions) -> u16 {
    setup();
    let server = Server::bind("127.0.0.1:0", options).unwrap();
    let port = server.port();
    thread::spawn(move || server.run());
    port
}

fn local_session(port: u16) -> Arc<SessionCore> {
    connect("127.0.0.1", port, "", None, Vec::new()).unwrap()
}

#[test]
fn remote_functions_are_functions() {
    let core = local_session(start_server(""));
    let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
    assert_eq!(addone.call((41i64,)).unwrap().cast::<i64>().unwrap(), 42);
    assert!(core.get_function("rpc.test.missing").unwrap().is_none());
}

#[test]
fn remote_errors_keep_their_kind_between_peers_of_this_runtime() {
    let core = local_session(start_server(""));
    let fail = core.get_function("rpc.test.fail").unwrap().unwrap();
    let err = fail.call(("x",)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert_eq!(err.message(), "refused x");
}

#[test]
fn tensors_round_trip_through_a_remote_device() {
    let core = local_session(start_server(""));
    let device = core.device(Device::cpu(0).0).unwrap();
    assert!(device.device_type() >= 128);
    let remote = empty_on(&[3, 4], DataType::float(32), device).unwrap();
    let values: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
    remote.copy_from_slice(&values).unwrap();
    assert_eq!(remote.to_vec::<f32>().unwrap(), values);
    let sum = core.get_function("rpc.test.sum").unwrap().unwrap();
    let total: f64 = sum.call((remote.clone(),)).unwrap().cast().unwrap();
    assert_eq!(total, values.iter().map(|v| f64::from(*v)).sum::<f64>());
}

#[test]
fn returned_tensors_live_on_the_remote_until_dropped() {
    let core = local_session(start_server(""));
    let iota = core.get_function("rpc.test.iota").unwrap().unwrap();
    let tensor: Tensor = iota.call((5i64,)).unwrap().cast().unwrap();
    assert!(tensor.device().device_type() >= 128);
    assert_eq!(
        tensor.to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 2.0, 3.0, 4.0]
    );
}

#[test]
fn a_wrong_key_is_refused_at_connect() {
    let port = start_server("secret");
    let err = connect("127.0.0.1", port, "other", None, Vec::new()).unwrap_err();
    assert_eq!(err.kind(), "RPCError");
    assert!(err.message().contains("key=\"other\""), "{}", err.message());
    assert!(connect("127.0.0.1", port, "secret", None, Vec::new()).is_ok());
}

#[test]
fn chains_forward_through_a_middle_server() {
    let far = start_server("far");
    let near = start_server("");
    let constructor = vec![
        WireValue::RawStr(b"rpc.Connect".to_vec()),
        WireValue::RawStr(b"127.0.0.1".to_vec()),
        WireValue::Int(i64::from(far)),
        WireValue::RawStr(b"far".to_vec()),
        WireValue::Bool(false),
    ];
    let core = connect("127.0.0.1", near, "", None, constructor).unwrap();
    let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
    assert_eq!(addone.call((1i64,)).unwrap().cast::<i64>().unwrap(), 2);
    let device = core.device(Device::cpu(0).0).unwrap();
    let remote = empty_on(&[1000], DataType::float(32), device).unwrap();
    let values: Vec<f32> = (0..1000).map(|v| v as f32).collect();
    remote.copy_from_slice(&values).unwrap();
    assert_eq!(remote.to_vec::<f32>().unwrap(), values);
    // A local function passed through the middle server is called back from the far one.
    let apply = core.get_function("rpc.test.apply").unwrap().unwrap();
    let triple = Function::from_typed("triple", |x: i64| 3 * x);
    assert_eq!(
        apply.call((triple, 5i64)).unwrap().cast::<i64>().unwrap(),
        16
    );
}

#[test]
fn a_closed_session_fails_clearly() {
    let core = local_session(start_server(""));
    let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
    core.session().shutdown();
    let err = addone.call((1i64,)).unwrap_err();
    assert_eq!(err.kind(), "RPCError");
    assert!(err.message().contains("closed"), "{}", err.message());
    drop(Any::from(addone));
}

#[test]
fn a_shared_secret_is_proven_without_being_sent() {
    let port = start_server_with(ServeOptions {
        auth_key: Some(b"s3cret".to_vec()),
        ..ServeOptions::default()
    });
    let ok = connect("127.0.0.1", port, "", Some(b"s3cret"), Vec::new()).unwrap();
    let addone = ok.get_function("rpc.test.addone").unwrap().unwrap();
    assert_eq!(addone.call((1i64,)).unwrap().cast::<i64>().unwrap(), 2);
    let wrong = connect("127.0.0.1", port, "", Some(b"guess"), Vec::new()).unwrap_err();
    assert!(
        wrong
            .message()
            .contains("failed to prove that it holds the authentication key"),
        "{}",
        wrong.message()
    );
    let missing = connect("127.0.0.1", port, "", None, Vec::new()).unwrap_err();
    assert!(
        missing.message().contains("requires an authentication key"),
        "{}",
        missing.message()
    );
}

#[test]
fn a_session_past_its_timeout_ends_with_a_timeout_error() {
    let port = start_server("");
    let core = connect("127.0.0.1", port, " -timeout=0.3", None, Vec::new()).unwrap();
    let sleep = core.get_function("rpc.test.sleep").unwrap().unwrap();
    assert_eq!(sleep.call((10i64,)).unwrap().cast::<i64>().unwrap(), 10);
    let err = sleep.call((2000i64,)).unwrap_err();
    assert_eq!(err.kind(), "RPCSessionTimeoutError");
    assert!(
        err.message().contains("session has expired"),
        "{}",
        err.message()
    );
}

#[test]
fn local_functions_passed_to_the_remote_are_called_back() {
    let core = local_session(start_server(""));
    let apply = core.get_function("rpc.test.apply").unwrap().unwrap();
    let double = Function::from_typed("double", |x: i64| x * 2);
    assert_eq!(
        apply.call((double, 20i64)).unwrap().cast::<i64>().unwrap(),
        41
    );
    // A callback that calls the remote again, on the same connection, while it is inside a call.
    let addone = core.get_function("rpc.test.addone").unwrap().unwrap();
    let nested = Function::from_packed(move |args| addone.call_packed(args));
    assert_eq!(
        apply.call((nested, 1i64)).unwrap().cast::<i64>().unwrap(),
        3
    );
    // An error in the callback comes back with its kind.
    let failing = Function::from_typed("failing", |_: i64| -> tvm_ffi::Result<i64> {
        Err(tvm_ffi::Error::new("KeyError", "no such thing"))
    });
    let err = apply.call((failing, 1i64)).unwrap_err();
    assert_eq!(
        (err.kind().as_ref(), err.message().as_ref()),
        ("KeyError", "no such thing")
    );
}

#[test]
fn other_remote_objects_come_back_as_references_usable_by_the_remote() {
    let core = local_session(start_server(""));
    let make = core.get_function("rpc.test.make_array").unwrap().unwrap();
    let len = core.get_function("rpc.test.array_len").unwrap().unwrap();
    let reference = make.call((4i64,)).unwrap();
    assert_eq!(reference.type_key(), "runtime.RPCObjectRef");
    assert_eq!(
        len.call((reference.clone(),))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        4
    );
    // A reference of one session is refused by another.
    let other = local_session(start_server(""));
    let other_len = other.get_function("rpc.test.array_len").unwrap().unwrap();
    let err = other_len.call((reference,)).unwrap_err();
    assert!(err.message().contains("another RPC session"), "{err}");
}
