//! Constants of the wire protocol: magic numbers, versions, packet codes and server statuses.
//!
//! Every multi-byte scalar on the wire is little-endian. The numbering follows Apache TVM's
//! protocol version 0.8.0, which this crate speaks unchanged; [`OWN_PROTOCOL_VERSION`] adds
//! features on top and is only used when both peers announce it at connect.

/// The magic number that opens a data-plane connection; also the "accepted" reply.
pub const RPC_MAGIC: i32 = 0xFF271;
/// Reply of a proxy: a server with this key is already waiting.
pub const RPC_CODE_DUPLICATE: i32 = RPC_MAGIC + 1;
/// Reply: no server matches the key (or the key was refused).
pub const RPC_CODE_MISMATCH: i32 = RPC_MAGIC + 2;
/// Reply of this runtime's servers: the client authenticated but the server is at its limit of
/// concurrent sessions or pending handshakes; try again later. (Apache TVM's client reports it
/// as "not a TVM RPC server".)
pub const RPC_CODE_BUSY: i32 = RPC_MAGIC + 3;
/// The magic number that opens a connection to a tracker.
pub const RPC_TRACKER_MAGIC: i32 = 0x2F271;

/// The protocol version of Apache TVM's RPC, spoken with every peer.
pub const PROTOCOL_VERSION: &str = "0.8.0";
/// This runtime's own protocol version: 0.8.0 plus error kinds, callbacks, chunked transfers
/// and authentication. A 0.8.0 peer refuses it at `kInitServer` naming both versions.
pub const OWN_PROTOCOL_VERSION: &str = "0.9.0-tvm-rs";

/// Device types at or above this carry an RPC session index: `type + 128 * (index + 1)`.
pub const RPC_SESS_MASK: i32 = 128;

/// The code at the start of every packet body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum RpcCode {
    /// Ends the session.
    Shutdown = 1,
    /// Checks the protocol version and constructs the serving session.
    InitServer = 2,
    /// Calls a remote function by handle.
    CallFunc = 3,
    /// The values a request returned.
    Return = 4,
    /// The message of an error a request raised.
    Exception = 5,
    /// Reads bytes of a remote tensor.
    CopyFromRemote = 6,
    /// Writes bytes into a remote tensor.
    CopyToRemote = 7,
    /// The reply to [`RpcCode::CopyFromRemote`]: the bytes follow the code directly.
    CopyAck = 8,
    /// Looks up a global function (the first system call).
    GetGlobalFunc = 9,
    /// Releases a remote object handle.
    FreeHandle = 10,
    /// Makes a device current (a no-op for most backends).
    DevSetDevice = 11,
    /// Reads a device attribute.
    DevGetAttr = 12,
    /// Allocates device memory.
    DevAllocData = 13,
    /// Frees device memory.
    DevFreeData = 14,
    /// Waits for a stream.
    DevStreamSync = 15,
    /// Copies between two remote tensors.
    CopyAmongRemote = 16,
    /// Allocates device memory for a tensor, in a memory scope.
    DevAllocDataWithScope = 17,
    /// Creates a stream.
    DevCreateStream = 18,
    /// Frees a stream.
    DevFreeStream = 19,
    /// Makes a stream current.
    DevSetStream = 20,
    /// Reads the current stream.
    DevGetCurrentStream = 21,
}

impl RpcCode {
    /// The code with this number, if it is one.
    pub fn from_i32(code: i32) -> Option<RpcCode> {
        use RpcCode::*;
        const ALL: [RpcCode; 21] = [
            Shutdown,
            InitServer,
            CallFunc,
            Return,
            Exception,
            CopyFromRemote,
            CopyToRemote,
            CopyAck,
            GetGlobalFunc,
            FreeHandle,
            DevSetDevice,
            DevGetAttr,
            DevAllocData,
            DevFreeData,
            DevStreamSync,
            CopyAmongRemote,
            DevAllocDataWithScope,
            DevCreateStream,
            DevFreeStream,
            DevSetStream,
            DevGetCurrentStream,
        ];
        ALL.into_iter().find(|c| *c as i32 == code)
    }

    /// Whether the code is a system call (answered with one return value).
    pub fn is_syscall(self) -> bool {
        self as i32 >= RpcCode::GetGlobalFunc as i32
    }
}

/// The prefix of the message of an error that ended a session past its time limit.
pub const SESSION_TIMEOUT_PREFIX: &str = "RPCSessionTimeoutError: ";
