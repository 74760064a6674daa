//! RPC: the packet decoder, and a serving endpoint fed arbitrary byte streams.

use std::io::{self, Cursor};
use std::sync::Arc;

use tvm_ffi::{ErrorKind, Result};
use tvm_rpc::codec::{TensorMeta, WireValue, decode_message, encode_message};
use tvm_rpc::endpoint::serve;
use tvm_rpc::protocol::RpcCode;
use tvm_rpc::session::{CopySink, CopySource, LocalSession, RpcSession};
use tvm_rpc::transport::Transport;

/// Decodes a packet body; whatever decodes must encode to bytes that decode to the same packet.
pub fn rpc_message(data: &[u8]) {
    if let Ok(message) = decode_message(data) {
        let encoded = encode_message(&message);
        let again = decode_message(&encoded).expect("an encoded packet decodes");
        assert_eq!(again, message, "decode(encode(m)) != m");
    }
}

/// The local session with function lookup turned off (arbitrary input must not call the
/// process's real functions) and small allocations only.
struct Fenced(LocalSession);

impl RpcSession for Fenced {
    fn name(&self) -> String {
        "fuzz".into()
    }
    fn get_function(&self, _name: &str) -> Result<u64> {
        Ok(0)
    }
    fn call_function(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        self.0.call_function(handle, args)
    }
    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: CopySource<'_>) -> Result<()> {
        self.0.copy_to_remote(tensor, nbytes, data)
    }
    fn check_copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64) -> Result<()> {
        self.0.check_copy_from_remote(tensor, nbytes)
    }
    fn copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64, out: CopySink<'_>) -> Result<()> {
        self.0.copy_from_remote(tensor, nbytes, out)
    }
    fn free_handle(&self, handle: u64) -> Result<()> {
        self.0.free_handle(handle)
    }
    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        let large =
            |v: Option<&WireValue>| v.and_then(WireValue::as_int).is_some_and(|n| n > 1 << 20);
        if matches!(code, RpcCode::DevAllocData) && large(args.get(1)) {
            tvm_ffi::bail!(
                ErrorKind::MemoryError,
                "the fuzz session allocates at most 1 MiB"
            );
        }
        if matches!(code, RpcCode::DevAllocDataWithScope) {
            tvm_ffi::bail!(ErrorKind::ValueError, "not in the fuzz session");
        }
        self.0.device_call(code, args)
    }
}

/// Serves a stream of packets to a fenced local session: the endpoint must answer or refuse
/// each one and stop cleanly, never touch memory it did not hand out, and never panic.
pub fn rpc_serve(data: &[u8]) {
    let session = Arc::new(Fenced(LocalSession::new()));
    let mut transport = Transport::new(Box::new(Cursor::new(data.to_vec())), Box::new(io::sink()));
    transport.max_packet = 1 << 20;
    let _ = serve(transport, session, data.first().is_some_and(|b| b & 1 == 1));
}
