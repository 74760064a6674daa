//! A session on the other side of a connection: every request goes over an [`Endpoint`].

use std::sync::Arc;

use tvm_ffi::{ErrorKind, Function, Result};

use super::{CopySink, CopySource, LocalSession, Peer, RpcSession};
use crate::codec::{RPC_CALLBACK_INDEX, TensorMeta, WireValue};
use crate::endpoint::Endpoint;
use crate::protocol::RpcCode;
use crate::transport::Transport;

/// The remote side of a connection, as a session.
pub struct ClientSession {
    endpoint: Arc<Endpoint>,
    /// The local functions passed to the remote, which it may call back.
    callbacks: Arc<LocalSession>,
    /// In a chain, the peer this session serves, whose callbacks are forwarded to the remote.
    upstream: LocalSession,
}

impl ClientSession {
    /// A session with the peer on `transport` (after the handshake, before `kInitServer`),
    /// named `name` for messages.
    pub fn new(name: impl Into<String>, transport: Transport, own_protocol: bool) -> ClientSession {
        let callbacks = Arc::new(LocalSession::callbacks_only());
        let endpoint = Endpoint::new(name, transport, own_protocol, callbacks.clone());
        ClientSession {
            endpoint,
            callbacks,
            upstream: LocalSession::callbacks_only(),
        }
    }

    /// A callback of the upstream peer (in a chain) as a callback of this session: the remote
    /// calls it here, and the call goes on to the peer that passed it.
    fn forward_callback(&self, value: WireValue) -> Result<WireValue> {
        match value {
            WireValue::Object {
                type_index: RPC_CALLBACK_INDEX,
                handle,
            } if self.upstream.has_peer() => {
                let upstream_function: Function = self.upstream.callback(handle)?.cast()?;
                self.export_callback(upstream_function)
            }
            other => Ok(other),
        }
    }

    /// The endpoint the session talks through.
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

impl RpcSession for ClientSession {
    fn name(&self) -> String {
        self.endpoint.name().to_string()
    }

    fn get_function(&self, name: &str) -> Result<u64> {
        let value = self.endpoint.syscall(
            RpcCode::GetGlobalFunc,
            vec![WireValue::RawStr(name.as_bytes().to_vec())],
        )?;
        Ok(value.as_handle().unwrap_or(0))
    }

    fn call_function(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        let args = args
            .into_iter()
            .map(|value| self.forward_callback(value))
            .collect::<Result<Vec<_>>>()?;
        self.endpoint.call(handle, args)
    }

    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: CopySource<'_>) -> Result<()> {
        self.endpoint.copy_to_remote(tensor, nbytes, data)
    }

    fn check_copy_from_remote(&self, _tensor: &TensorMeta, _nbytes: u64) -> Result<()> {
        // The next hop checks; its refusal arrives before any byte.
        Ok(())
    }

    fn copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64, out: CopySink<'_>) -> Result<()> {
        self.endpoint.copy_from_remote(tensor, nbytes, out)
    }

    fn free_handle(&self, handle: u64) -> Result<()> {
        self.endpoint.free_handle(handle);
        Ok(())
    }

    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        self.endpoint.syscall(code, args)
    }

    fn post_device_call(&self, code: RpcCode, args: Vec<WireValue>) {
        self.endpoint.post(code, args);
    }

    fn export_callback(&self, function: Function) -> Result<WireValue> {
        if !self.endpoint.own_protocol() {
            tvm_ffi::bail!(
                ErrorKind::TypeError,
                "{} speaks protocol 0.8.0 (Apache TVM), which cannot call local functions back",
                self.endpoint.name()
            );
        }
        Ok(WireValue::Object {
            type_index: RPC_CALLBACK_INDEX,
            handle: self.callbacks.export(function),
        })
    }

    fn bind_peer(&self, peer: std::sync::Weak<dyn Peer>) {
        self.upstream.bind_peer(peer);
    }

    fn shutdown(&self) {
        self.endpoint.shutdown();
    }
}
