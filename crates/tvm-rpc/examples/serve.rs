//! An embedding program that serves its functions and devices over RPC, without Python:
//! `cargo run -p tvm-rpc --example serve -- [ADDRESS] [KEY]` (default `127.0.0.1:9090`).
//! The shared secret, if any, comes from `TVM_RPC_KEY`. Prints the bound address, then serves
//! every client on a thread of its own until killed.

use std::io::Write;
use std::process::ExitCode;

// This program is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use tvm_ffi::Function;
use tvm_rpc::handshake::auth_key;
use tvm_rpc::server::{ServeOptions, Server};

fn main() -> ExitCode {
    tvm_rpc::globals::init();
    // A native function of this program, callable by clients like any global.
    let registered = Function::from_typed("example.scale", |x: f64, factor: f64| x * factor)
        .register_global("example.scale", false);
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:9090".into());
    let rpc_key = args.next().unwrap_or_default();
    let server = registered
        .and_then(|()| auth_key(None))
        .and_then(|auth_key| {
            let options = ServeOptions {
                rpc_key,
                auth_key,
                ..ServeOptions::default()
            };
            Server::bind(&address, options)
        });
    let server = match server {
        Ok(server) => server,
        Err(err) => {
            eprintln!("serve: {}: {}", err.kind(), err.message());
            return ExitCode::FAILURE;
        }
    };
    let host = address
        .rsplit_once(':')
        .map_or("127.0.0.1", |(host, _)| host);
    println!("RPC server listening on {host}:{}", server.port());
    let _ = std::io::stdout().flush();
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("serve: {}", err.message());
            ExitCode::FAILURE
        }
    }
}
