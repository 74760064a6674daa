//! Errors across the connection: what a peer's exception packet becomes on this side, and what
//! this side's error becomes on the wire.

use tvm_ffi::Error;

use crate::codec::WireValue;
use crate::protocol::SESSION_TIMEOUT_PREFIX;

/// The error a peer's exception packet stands for. A peer of this runtime sends the kind and
/// backtrace too, and the error keeps them; a 0.8.0 peer sends a message only, which becomes an
/// `RPCError` (or `RPCSessionTimeoutError`), as Apache TVM raises it.
pub fn remote_error(values: &[WireValue]) -> Error {
    let text = |i: usize| {
        values
            .get(i)
            .and_then(WireValue::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let message = text(0).unwrap_or_else(|| "the remote raised an error with no message".into());
    match text(1) {
        Some(kind) => {
            let error = Error::new(kind, message);
            if let Some(trace) = text(2).filter(|t| !t.is_empty()) {
                error.update_backtrace(&trace, true);
            }
            error
        }
        None if message.starts_with(SESSION_TIMEOUT_PREFIX) => {
            Error::new("RPCSessionTimeoutError", message)
        }
        None => Error::new(
            "RPCError",
            format!("Error caught from RPC call:\n{message}"),
        ),
    }
}

/// The values of an exception packet for `error`: the message alone for a 0.8.0 peer, plus
/// kind and backtrace for a peer that speaks the own protocol version.
pub fn exception_values(error: &Error, own_protocol: bool) -> Vec<WireValue> {
    if own_protocol {
        vec![
            WireValue::RawStr(error.message().as_bytes().to_vec()),
            WireValue::RawStr(error.kind().as_bytes().to_vec()),
            WireValue::RawStr(error.backtrace().as_bytes().to_vec()),
        ]
    } else {
        let text = format!("{}: {}", error.kind(), error.message());
        vec![WireValue::RawStr(text.into_bytes())]
    }
}
