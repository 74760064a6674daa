//! Packets over a byte stream: the little-endian length, then the body, with size limits.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tvm_ffi::{Error, ErrorKind, Result};

/// Size of the read and write buffers of a connection.
const IO_BUFFER: usize = 256 * 1024;

/// The largest packet body held in memory (tensor bytes are streamed and not counted).
pub const DEFAULT_MAX_PACKET: u64 = 1 << 30;

/// The two directions of a connection, buffered.
pub struct Transport {
    reader: BufReader<Box<dyn Read + Send>>,
    writer: BufWriter<Box<dyn Write + Send>>,
    /// The largest packet body accepted into memory.
    pub max_packet: u64,
    /// Set once a read or write failed: the byte stream is out of step and cannot be used.
    broken: bool,
    /// Held while writing; `true` inside once the session expired (see [`Transport::gate`]).
    gate: Option<Arc<Mutex<bool>>>,
    /// Shuts the connection down under a blocked read or write (sockets only).
    interrupt: Option<Interrupt>,
    /// The socket under the reader, whose reads can be bounded (sockets only).
    socket: Option<TcpStream>,
}

/// Cuts a connection from another thread: reads and writes blocked on it fail at once.
pub type Interrupt = Arc<dyn Fn() + Send + Sync>;

/// A closed or broken connection, as the error users see.
pub fn connection_error(err: io::Error, doing: &str) -> Error {
    let kind = match err.kind() {
        io::ErrorKind::UnexpectedEof => "the connection closed",
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "the connection timed out",
        _ => "the connection failed",
    };
    Error::new("RPCError", format!("{kind} while {doing}: {err}"))
}

impl Transport {
    /// A transport over separate read and write halves.
    pub fn new(reader: Box<dyn Read + Send>, writer: Box<dyn Write + Send>) -> Transport {
        Transport {
            reader: BufReader::with_capacity(IO_BUFFER, reader),
            writer: BufWriter::with_capacity(IO_BUFFER, writer),
            max_packet: DEFAULT_MAX_PACKET,
            broken: false,
            gate: None,
            interrupt: None,
            socket: None,
        }
    }

    /// A transport over a connected socket.
    pub fn from_socket(socket: TcpStream) -> Result<Transport> {
        socket
            .set_nodelay(true)
            .map_err(|e| connection_error(e, "configuring the socket"))?;
        let clone = || {
            socket
                .try_clone()
                .map_err(|e| connection_error(e, "configuring the socket"))
        };
        let (reader, cut, timed) = (clone()?, clone()?, clone()?);
        let mut transport = Transport::new(Box::new(reader), Box::new(socket));
        transport.interrupt = Some(Arc::new(move || {
            let _ = cut.shutdown(Shutdown::Both);
        }));
        transport.socket = Some(timed);
        Ok(transport)
    }

    /// What cuts this connection from another thread, if it can be cut.
    pub fn interrupt(&self) -> Option<Interrupt> {
        self.interrupt.clone()
    }

    /// Bounds every later read by `timeout`; false when the stream cannot (a pipe).
    pub fn set_read_timeout(&mut self, timeout: Duration) -> bool {
        self.socket
            .as_ref()
            .is_some_and(|socket| socket.set_read_timeout(Some(timeout)).is_ok())
    }

    /// Serializes this transport's writes with another writer of the same socket (a session
    /// timer): writes hold the gate, and fail once the flag inside is set.
    pub fn set_gate(&mut self, gate: Arc<Mutex<bool>>) {
        self.gate = Some(gate);
    }

    fn gated<T>(
        &mut self,
        doing: &str,
        write: impl FnOnce(&mut Self) -> io::Result<T>,
    ) -> Result<T> {
        let gate = self.gate.clone();
        let guard = gate
            .as_ref()
            .map(|g| g.lock().unwrap_or_else(PoisonError::into_inner));
        if guard.as_deref() == Some(&true) {
            self.broken = true;
            return Err(Error::new(
                "RPCSessionTimeoutError",
                "the session has expired",
            ));
        }
        write(self).map_err(|e| self.fail(e, doing))
    }

    /// Whether a read or write failed (the connection is unusable).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Marks the connection unusable and returns `err` as the error users see.
    fn fail(&mut self, err: io::Error, doing: &str) -> Error {
        self.broken = true;
        connection_error(err, doing)
    }

    /// Reads exactly `buf.len()` bytes.
    pub fn read_exact(&mut self, buf: &mut [u8], doing: &str) -> Result<()> {
        match self.reader.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e, doing)),
        }
    }

    /// Reads a little-endian `i32`.
    pub fn read_i32(&mut self, doing: &str) -> Result<i32> {
        let mut word = [0u8; 4];
        self.read_exact(&mut word, doing)?;
        Ok(i32::from_le_bytes(word))
    }

    /// Reads the length that starts a packet; `None` when the peer closed the connection
    /// cleanly between packets.
    pub fn read_packet_len(&mut self) -> Result<Option<u64>> {
        let mut word = [0u8; 8];
        let mut filled = 0;
        while filled < word.len() {
            match self.reader.read(&mut word[filled..]) {
                Ok(0) if filled == 0 => return Ok(None),
                Ok(0) => {
                    self.broken = true;
                    return Err(Error::new(
                        "RPCError",
                        "the connection closed in the middle of a packet length",
                    ));
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(e, "reading a packet")),
            }
        }
        Ok(Some(u64::from_le_bytes(word)))
    }

    /// Reads a packet body of `len` bytes into memory, refusing more than the limit.
    pub fn read_body(&mut self, len: u64) -> Result<Vec<u8>> {
        if len > self.max_packet {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "an RPC packet of {len} bytes exceeds the limit of {} bytes",
                self.max_packet
            );
        }
        let mut body = Vec::new();
        let read = match (&mut self.reader).take(len).read_to_end(&mut body) {
            Ok(read) => read,
            Err(e) => return Err(self.fail(e, "reading a packet")),
        };
        if read as u64 != len {
            self.broken = true;
            return Err(Error::new(
                "RPCError",
                format!("the connection closed after {read} of a packet's {len} bytes"),
            ));
        }
        Ok(body)
    }

    /// Reads and drops `len` bytes (the rest of a refused packet).
    pub fn skip(&mut self, len: u64) -> Result<()> {
        let copied = match io::copy(&mut (&mut self.reader).take(len), &mut io::sink()) {
            Ok(copied) => copied,
            Err(e) => return Err(self.fail(e, "skipping a packet")),
        };
        if copied != len {
            self.broken = true;
            return Err(Error::new(
                "RPCError",
                "the connection closed in the middle of a packet",
            ));
        }
        Ok(())
    }

    /// The reader, for streaming tensor bytes. A caller whose read fails marks the transport
    /// with [`Transport::mark_broken`].
    pub fn reader(&mut self) -> &mut dyn Read {
        &mut self.reader
    }

    /// Records that the byte stream is out of step (a streamed read or write failed).
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Writes a whole packet: length, then body.
    pub fn write_packet(&mut self, body: &[u8]) -> Result<()> {
        self.write_all(&(body.len() as u64).to_le_bytes())?;
        self.write_all(body)
    }

    /// Writes raw bytes (part of a packet).
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.gated("sending a packet", |t| t.writer.write_all(bytes))
    }

    /// Sends what is buffered.
    pub fn flush(&mut self) -> Result<()> {
        self.gated("sending a packet", |t| t.writer.flush())
    }
}
