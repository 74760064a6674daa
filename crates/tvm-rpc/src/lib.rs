//! TVM RPC: run functions and move tensors on another machine or process.
//!
//! The local machine is a session like any other; a remote is a client session over an
//! endpoint:
//!
//! ```text
//! client -> ClientSession -> Endpoint -> socket/pipe -> serve() -> LocalSession
//! ```
//!
//! [`codec`] is the pure wire format (driven by a fuzz target), [`transport`] frames packets,
//! [`endpoint`] speaks the protocol, [`session`] holds what each side can do, [`remote`] turns a
//! session into ordinary [`tvm_ffi::Function`] values and devices of the runtime's registry, and
//! [`server`] accepts connections. The protocol is Apache TVM's version 0.8.0; peers that both
//! run this runtime also negotiate [`protocol::OWN_PROTOCOL_VERSION`].

// The ABI's type-index constants keep their C names (`kTVMFFIInt`) in match patterns.
#![allow(non_upper_case_globals)]

pub mod codec;
pub mod device;
pub mod endpoint;
pub mod globals;
pub mod handshake;
pub mod module;
pub mod pipe;
pub mod protocol;
pub mod remote;
pub mod server;
pub mod session;
pub mod transport;

pub use endpoint::Endpoint;
pub use session::{ClientSession, LocalSession, RpcSession};
