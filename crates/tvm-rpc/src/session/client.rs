//! A session on the other side of a connection: every request goes over an [`Endpoint`].

use std::io::{Read, Write};
use std::sync::Arc;

use tvm_ffi::Result;

use super::RpcSession;
use crate::codec::{TensorMeta, WireValue};
use crate::endpoint::Endpoint;
use crate::protocol::RpcCode;

/// The remote side of a connection, as a session.
pub struct ClientSession {
    endpoint: Arc<Endpoint>,
}

impl ClientSession {
    /// A session that forwards every request over `endpoint`.
    pub fn new(endpoint: Arc<Endpoint>) -> ClientSession {
        ClientSession { endpoint }
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
        self.endpoint.call(handle, args)
    }

    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: &mut dyn Read) -> Result<()> {
        self.endpoint.copy_to_remote(tensor, nbytes, data)
    }

    fn check_copy_from_remote(&self, _tensor: &TensorMeta, _nbytes: u64) -> Result<()> {
        // The next hop checks; its refusal arrives before any byte.
        Ok(())
    }

    fn copy_from_remote(
        &self,
        tensor: &TensorMeta,
        nbytes: u64,
        out: &mut dyn Write,
    ) -> Result<()> {
        self.endpoint.copy_from_remote(tensor, nbytes, out)
    }

    fn free_handle(&self, handle: u64) -> Result<()> {
        self.endpoint
            .syscall(RpcCode::FreeHandle, vec![WireValue::Handle(handle)])
            .map(drop)
    }

    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        self.endpoint.syscall(code, args)
    }

    fn shutdown(&self) {
        self.endpoint.shutdown();
    }
}
