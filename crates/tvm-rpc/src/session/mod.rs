//! Sessions: what one side of an RPC connection can do for the other.
//!
//! A session speaks in wire values ([`WireValue`]): remote functions, objects and memory are
//! handles that only the serving side can resolve. [`LocalSession`] serves the machine itself;
//! [`ClientSession`] forwards every request over an endpoint, so a server whose serving session
//! is a client session forwards to a further server (a chain).

mod client;
mod handles;
mod host_cache;
mod local;
mod local_device;
pub mod plain;
pub mod warm_memory;

use std::io::{Read, Write};
use std::sync::Weak;

use tvm_ffi::{ErrorKind, Function, Result};

pub use client::ClientSession;
pub use local::LocalSession;

use crate::codec::{TensorMeta, WireValue};
use crate::protocol::RpcCode;

/// Where the bytes of a copy to the remote come from.
pub enum CopySource<'a> {
    /// Memory this process holds: written out as it is.
    Bytes(&'a [u8]),
    /// A stream (the rest of a packet), read as the copy proceeds.
    Stream(&'a mut dyn Read),
}

/// Where the bytes of a copy from the remote go.
pub enum CopySink<'a> {
    /// Memory this process holds: read into as it is.
    Bytes(&'a mut [u8]),
    /// A stream (the reply being sent), written as the copy proceeds.
    Stream(&'a mut dyn Write),
}

/// The far side of the connection a session serves, as the session sees it: functions the peer
/// lent it (callbacks), called and released by handle. The endpoint implements it; a session
/// holds it weakly, so a closed connection is one whose peer is gone.
pub trait Peer: Send + Sync {
    /// Calls the peer's function `handle`; returns the encoded return list, as
    /// [`RpcSession::call_function`] does.
    fn call(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>>;

    /// Releases the peer's object behind `handle`.
    fn free_handle(&self, handle: u64);
}

/// What a session offers. Every method may be called from any thread.
pub trait RpcSession: Send + Sync {
    /// A short name for messages ("local", "client of 127.0.0.1:9090").
    fn name(&self) -> String;

    /// The handle of global function `name`; 0 when there is none.
    fn get_function(&self, name: &str) -> Result<u64>;

    /// Calls the function with `handle`; returns the encoded return list (the type index as an
    /// int, then the value or values, as the protocol's return convention has it). Handles in the
    /// result are owned by the caller, who frees them with [`RpcSession::free_handle`].
    fn call_function(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>>;

    /// Writes `nbytes` read from `data` into `tensor` at its byte offset.
    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: CopySource<'_>) -> Result<()>;

    /// Checks that `nbytes` of `tensor` can be read, before any byte is sent.
    fn check_copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64) -> Result<()>;

    /// Writes `nbytes` of `tensor`, from its byte offset, to `out`.
    fn copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64, out: CopySink<'_>) -> Result<()>;

    /// Releases the object behind `handle`. A remote session never waits for the release to
    /// be answered: it runs from destructors, which must not wait on the network.
    fn free_handle(&self, handle: u64) -> Result<()>;

    /// A device system call ([`RpcCode::DevGetAttr`] and the others after
    /// [`RpcCode::FreeHandle`]); returns its one value.
    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue>;

    /// A device system call whose answer nobody waits for ([`RpcCode::DevFreeData`] from a
    /// tensor's destructor): a remote session sends it without waiting, and a failure is
    /// dropped, as the remote releases everything of a closed session itself.
    fn post_device_call(&self, code: RpcCode, args: Vec<WireValue>) {
        let _ = self.device_call(code, args);
    }

    /// Makes `function` callable by the serving side for the length of a call (a callback),
    /// as the wire value that stands for it. Sessions whose peer cannot call back refuse.
    fn export_callback(&self, function: Function) -> Result<WireValue> {
        drop(function);
        tvm_ffi::bail!(
            ErrorKind::TypeError,
            "session {} cannot take local functions as arguments (callbacks need both sides to \
             run this runtime's protocol)",
            self.name()
        )
    }

    /// Tells a session which connection it serves, for calls back to the peer.
    fn bind_peer(&self, _peer: Weak<dyn Peer>) {}

    /// Whether the session is the machine itself (its memory is this process's).
    fn is_local(&self) -> bool {
        false
    }

    /// Ends the session; later requests fail.
    fn shutdown(&self) {}
}
