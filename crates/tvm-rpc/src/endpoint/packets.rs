//! The packet loop both sides of a connection run: it reads packets until the reply to this
//! side's request arrives (a client) or the connection ends (a server), and hands each request
//! of the peer to [`super::serving`].

use tvm_ffi::{Error, ErrorKind, Result};

use super::serving::serve_copy_to;
use super::{Endpoint, Waited, decode_reply, forward, unexpected};
use crate::codec::{DecodeError, Message, WireValue, decode_message};
use crate::protocol::RpcCode;
use crate::session::CopySink;
use crate::transport::{Transport, connection_error};

/// The start of a packet: its length and code; `None` when the peer closed between packets.
fn read_header(t: &mut Transport) -> Result<Option<(u64, i32)>> {
    loop {
        let Some(len) = t.read_packet_len()? else {
            return Ok(None);
        };
        if len == 0 {
            continue;
        }
        if len < 4 {
            t.skip(len)?;
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "an RPC packet of {len} bytes has no code"
            );
        }
        return Ok(Some((len, t.read_i32("reading a packet")?)));
    }
}

/// Whether packet code `code` is a reply (a return or an exception).
fn is_reply(code: i32) -> bool {
    code == RpcCode::Return as i32 || code == RpcCode::Exception as i32
}

/// The rest of a packet whose header was read, decoded with its code.
fn read_message_body(t: &mut Transport, len: u64, code: i32) -> Result<Vec<u8>> {
    let mut body = code.to_le_bytes().to_vec();
    body.extend_from_slice(&t.read_body(len - 4)?);
    Ok(body)
}

impl Endpoint {
    /// The error of a packet the peer sent that does not decode: the connection is closed, since
    /// a peer that sends one cannot be trusted to frame the next.
    fn malformed(&self, error: DecodeError) -> Error {
        *self.transport() = None;
        Error::new("RPCError", format!("{} sent a {error}", self.name))
    }

    /// Reads packets, answering requests, until a reply (when `expect_reply`) or the end of the
    /// connection.
    pub(super) fn run(&self, expect_reply: bool) -> Result<Waited> {
        loop {
            let Some((len, code)) = self.io(read_header)? else {
                // The peer is gone: later requests fail at once with a clear error.
                *self.transport() = None;
                return Ok(Waited::Closed);
            };
            if code == RpcCode::CopyToRemote as i32 {
                let own = self.own_protocol;
                let serving = &*self.serving;
                self.io(|t| serve_copy_to(t, serving, len - 4, own))?;
                continue;
            }
            let body = self.io(|t| read_message_body(t, len, code))?;
            if is_reply(code) && self.answers_post() {
                continue;
            }
            let message = decode_message(&body).map_err(|e| self.malformed(e))?;
            match message {
                Message::Return(values) if expect_reply => return Ok(Waited::Reply(values)),
                Message::Exception(values) if expect_reply => {
                    return Err(super::remote_error(&values));
                }
                message => {
                    if let Some(end) = self.answer(message)? {
                        return Ok(end);
                    }
                }
            }
        }
    }

    /// Reads the reply to a copy from the remote, streaming its bytes into `out`; the values of
    /// an exception instead, if the peer refused.
    pub(super) fn run_copy_from(
        &self,
        nbytes: u64,
        mut out: CopySink<'_>,
    ) -> Result<Option<Vec<WireValue>>> {
        loop {
            let Some((len, code)) = self.io(read_header)? else {
                return Err(Error::new(
                    "RPCError",
                    format!("{} closed the connection during a copy", self.name),
                ));
            };
            if code == RpcCode::CopyAck as i32 {
                return self
                    .io(|t| receive_copy_ack(t, &self.name, len, nbytes, &mut out))
                    .map(|()| None);
            }
            let body = self.io(|t| read_message_body(t, len, code))?;
            if is_reply(code) && self.answers_post() {
                continue;
            }
            if is_reply(code) {
                return match decode_reply(&self.name, &body)? {
                    Err(values) => Ok(Some(values)),
                    Ok(_) => Err(unexpected(&self.name, &Message::Return(Vec::new()))),
                };
            }
            let message = decode_message(&body).map_err(|e| self.malformed(e))?;
            if let Some(Waited::Closed) = self.answer(message)? {
                return Err(Error::new(
                    "RPCError",
                    format!("{} closed the connection during a copy", self.name),
                ));
            }
        }
    }
}

fn receive_copy_ack(
    t: &mut Transport,
    name: &str,
    len: u64,
    nbytes: u64,
    out: &mut CopySink<'_>,
) -> Result<()> {
    if len != 4 + nbytes || matches!(out, CopySink::Bytes(b) if b.len() as u64 != nbytes) {
        t.mark_broken();
        return Err(Error::new(
            "RPCError",
            format!("{name} answered a copy of {nbytes} bytes with {len}"),
        ));
    }
    let out = match out {
        CopySink::Bytes(bytes) => return t.read_exact(bytes, "receiving tensor bytes"),
        CopySink::Stream(out) => out,
    };
    let mut failure = None;
    let streamed = forward(t.reader(), nbytes, |chunk| {
        if failure.is_none()
            && let Err(e) = out.write_all(chunk)
        {
            failure = Some(e);
        }
        Ok(())
    });
    if let Err(e) = streamed {
        // Part of the reply is unread: the stream cannot continue.
        t.mark_broken();
        return Err(e.unwrap_or_else(|io| connection_error(io, "receiving tensor bytes")));
    }
    match failure {
        Some(e) => Err(Error::new(
            ErrorKind::RuntimeError,
            format!("writing downloaded tensor bytes failed: {e}"),
        )),
        None => Ok(()),
    }
}
