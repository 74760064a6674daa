//! Sessions with a child process over two pipes (no socket, no handshake): the child is started
//! as `command... <read_fd> <write_fd>` and serves until its input closes.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use tvm_ffi::{Error, ErrorKind, Result};

use crate::codec::{TensorMeta, WireValue};
use crate::protocol::{OWN_PROTOCOL_VERSION, PROTOCOL_VERSION, RpcCode};
use crate::remote::SessionCore;
use crate::server::serve_session;
use crate::session::{ClientSession, CopySink, CopySource, RpcSession};
use crate::transport::Transport;

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::new(
            ErrorKind::RuntimeError,
            format!("cannot create a pipe: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Clears close-on-exec so that a child inherits the descriptor.
fn inheritable(fd: &OwnedFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor this process owns.
    let ok = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) } == 0;
    if !ok {
        tvm_ffi::bail!(
            ErrorKind::RuntimeError,
            "cannot pass a pipe to the child: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A client session whose server is a child process; the child is reaped when the session
/// ends.
pub struct PipeSession {
    inner: ClientSession,
    child: Mutex<Option<Child>>,
}

impl PipeSession {
    /// Starts `command` (program and arguments; the two descriptors are appended) and opens a
    /// session with it. `own_protocol`: whether the child runs this runtime (which speaks
    /// [`OWN_PROTOCOL_VERSION`]) rather than a 0.8.0 server.
    pub fn spawn(command: &[String], own_protocol: bool) -> Result<Arc<SessionCore>> {
        let (program, args) = command.split_first().ok_or_else(|| {
            Error::new(ErrorKind::ValueError, "PopenSession needs a command to run")
        })?;
        let (child_read, parent_write) = pipe()?;
        let (parent_read, child_write) = pipe()?;
        inheritable(&child_read)?;
        inheritable(&child_write)?;
        let child = Command::new(program)
            .args(args)
            .arg(child_read.as_raw_fd().to_string())
            .arg(child_write.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| {
                Error::new(
                    ErrorKind::RuntimeError,
                    format!("cannot start RPC server process {program:?}: {e}"),
                )
            })?;
        drop((child_read, child_write));
        let transport = Transport::new(
            Box::new(File::from(parent_read)),
            Box::new(File::from(parent_write)),
        );
        let inner = ClientSession::new(
            format!("process {} ({program})", child.id()),
            transport,
            own_protocol,
        );
        let version = if own_protocol {
            OWN_PROTOCOL_VERSION
        } else {
            PROTOCOL_VERSION
        };
        let session = PipeSession {
            inner,
            child: Mutex::new(Some(child)),
        };
        // On failure the session drops here: the pipes close and the child is reaped.
        session.inner.endpoint().init_remote(version, Vec::new())?;
        SessionCore::register(Arc::new(session))
    }
}

impl Drop for PipeSession {
    fn drop(&mut self) {
        self.inner.shutdown();
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut child) = child {
            // The child ends when its input closes; reap it.
            let _ = child.wait();
        }
    }
}

impl RpcSession for PipeSession {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn get_function(&self, name: &str) -> Result<u64> {
        self.inner.get_function(name)
    }
    fn call_function(&self, handle: u64, args: Vec<WireValue>) -> Result<Vec<WireValue>> {
        self.inner.call_function(handle, args)
    }
    fn copy_to_remote(&self, tensor: &TensorMeta, nbytes: u64, data: CopySource<'_>) -> Result<()> {
        self.inner.copy_to_remote(tensor, nbytes, data)
    }
    fn check_copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64) -> Result<()> {
        self.inner.check_copy_from_remote(tensor, nbytes)
    }
    fn copy_from_remote(&self, tensor: &TensorMeta, nbytes: u64, out: CopySink<'_>) -> Result<()> {
        self.inner.copy_from_remote(tensor, nbytes, out)
    }
    fn free_handle(&self, handle: u64) -> Result<()> {
        self.inner.free_handle(handle)
    }
    fn device_call(&self, code: RpcCode, args: Vec<WireValue>) -> Result<WireValue> {
        self.inner.device_call(code, args)
    }
    fn post_device_call(&self, code: RpcCode, args: Vec<WireValue>) {
        self.inner.post_device_call(code, args);
    }
    fn export_callback(&self, function: tvm_ffi::Function) -> Result<WireValue> {
        self.inner.export_callback(function)
    }
    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

/// Serves a session on inherited pipe descriptors until the input closes (the child side of
/// [`PipeSession::spawn`]).
pub fn serve_pipe(read_fd: i32, write_fd: i32) -> Result<()> {
    let open = |fd: i32| -> Result<File> {
        if fd < 0 {
            tvm_ffi::bail!(ErrorKind::ValueError, "bad pipe descriptor {fd}");
        }
        // SAFETY: the descriptor is only borrowed to duplicate it, so the caller keeps its own.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let owned = borrowed.try_clone_to_owned().map_err(|e| {
            Error::new(
                ErrorKind::ValueError,
                format!("pipe descriptor {fd} is not open: {e}"),
            )
        })?;
        Ok(File::from(owned))
    };
    let transport = Transport::new(Box::new(open(read_fd)?), Box::new(open(write_fd)?));
    serve_session(transport, true)
}
