//! The backend API of compiled kernels as `libtvm_ffi.so` exports it, driven from C
//! (`cpp-abi/tests/backend/backend_host.c`) in processes that link the library and nothing else:
//! tasks, barriers, errors, nested and concurrent launches, workspaces, refusals; with the pool
//! sized by `TVM_NUM_THREADS`.

use std::path::PathBuf;
use std::process::Command;

use crate::hosts::{repo, run, scratch};

fn build_host(name: &str) -> PathBuf {
    let dir = scratch("backend_api", name);
    let source = repo().join("cpp-abi/tests/backend/backend_host.c");
    crate::hosts::build_host(
        &dir,
        "gcc",
        &source,
        "backend_host",
        &["-std=c11", "-O1", "-pthread"],
    )
}

fn run_host(name: &str, threads: usize) {
    let host = build_host(name);
    let output = run(Command::new(&host)
        .arg(threads.to_string())
        .env("TVM_NUM_THREADS", threads.to_string()));
    assert!(output.contains("backend host ok"), "{output}");
}

#[test]
fn four_threads() {
    run_host("four", 4);
}

#[test]
fn one_thread() {
    run_host("one", 1);
}

#[test]
fn a_bad_thread_count_is_an_error_naming_it() {
    let host = build_host("bad-count");
    for value in ["many", "0", "-3", "100000"] {
        let output = run(Command::new(&host)
            .arg("bad-count")
            .env("TVM_NUM_THREADS", value));
        assert!(output.contains("backend host ok"), "{value}: {output}");
    }
}
