//! The embedding example (`examples/serve.rs`) started as a user would, and used as a server.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use tvm_rpc::server::connect;

#[test]
fn the_serve_example_serves_its_functions_and_devices() {
    // Cargo builds the examples next to the test binaries: target/<profile>/examples.
    let test_binary = std::env::current_exe().unwrap();
    let example = test_binary
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/serve");
    assert!(
        example.exists(),
        "cargo builds the example with the tests: {}",
        example.display()
    );
    let mut child = Command::new(&example)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let core = connect("127.0.0.1", port, "", None, Vec::new()).unwrap();
    let scale = core.get_function("example.scale").unwrap().unwrap();
    assert_eq!(
        scale.call((1.5f64, 4.0f64)).unwrap().cast::<f64>().unwrap(),
        6.0
    );
    let device = core.device(tvm_ffi::Device::cpu(0).0).unwrap();
    assert!(tvm_runtime::device::device_exists(device));
    child.kill().unwrap();
    child.wait().unwrap();
}
