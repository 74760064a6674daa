//! The global functions of RPC: `rpc.*` (sessions from any language) and the server-side
//! helpers `tvm.rpc.server.*` that a client's `upload`, `download` and `load_module` call.

use std::net::TcpStream;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{LazyLock, Mutex, Once, PoisonError};

use tvm_ffi::{Any, AnyView, Error, ErrorKind, Function, Result};
use tvm_runtime::Module;

use crate::device::register_rpc_device_api;
use crate::handshake::{ClientHello, HANDSHAKE_TIMEOUT, auth_key, check_auth_key, server_verify};
use crate::pipe::{PipeSession, serve_pipe};
use crate::remote::{SessionCore, session_core_of_module};
use crate::server::{ServeOptions, connect, serve_authenticated, serve_connection};
use crate::session::LocalSession;
use crate::session::plain::plain_to_wire;
use crate::session::warm_memory;

/// The directory the server-side file helpers work in.
static WORK_DIR: LazyLock<Mutex<Option<PathBuf>>> = LazyLock::new(Default::default);

/// Sets the directory that `tvm.rpc.server.*` file helpers resolve names against.
pub fn set_work_dir(dir: impl Into<PathBuf>) {
    *WORK_DIR.lock().unwrap_or_else(PoisonError::into_inner) = Some(dir.into());
}

/// The work directory (a fresh one under the temporary directory when none was set).
pub fn work_dir() -> Result<PathBuf> {
    let mut dir = WORK_DIR.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(dir) = dir.as_ref() {
        return Ok(dir.clone());
    }
    let fresh = std::env::temp_dir().join(format!("tvm-rpc-{}", std::process::id()));
    std::fs::create_dir_all(&fresh).map_err(|e| {
        Error::new(
            ErrorKind::RuntimeError,
            format!("cannot create {}: {e}", fresh.display()),
        )
    })?;
    *dir = Some(fresh.clone());
    Ok(fresh)
}

/// `name` inside the work directory; names that leave it (absolute, `..`) are refused.
pub fn work_path(name: &str) -> Result<PathBuf> {
    let relative = Path::new(name);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if name.is_empty() || escapes {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "remote file name {name:?} must be a relative path inside the server's work directory"
        );
    }
    Ok(work_dir()?.join(relative))
}

fn io_error(what: &str, path: &Path, err: std::io::Error) -> Error {
    let kind = match err.kind() {
        std::io::ErrorKind::NotFound => ErrorKind::ValueError,
        _ => ErrorKind::RuntimeError,
    };
    Error::new(kind, format!("cannot {what} {}: {err}", path.display()))
}

fn arg<'a>(args: &'a [AnyView<'a>], index: usize, function: &str) -> Result<&'a AnyView<'a>> {
    args.get(index).ok_or_else(|| {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "{function} expects at least {} arguments, got {}",
                index + 1,
                args.len()
            ),
        )
    })
}

fn text_arg(args: &[AnyView<'_>], index: usize, function: &str) -> Result<String> {
    arg(args, index, function)?.cast::<String>()
}

fn register(name: &str, f: impl Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static) {
    // As a default: a name taken by someone else (a Python server environment, say) keeps
    // their function, and a library loaded later that brings its own (Apache TVM's
    // libtvm_runtime.so) replaces ours instead of failing to load.
    let _ = Function::from_packed(f).register_global_default(name);
}

fn session_module_any(core: &std::sync::Arc<SessionCore>) -> Any {
    Any::from(core.session_module().as_object().clone())
}

/// Registers the RPC device backend and the global functions (once per process).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tvm_runtime::init();
        register_rpc_device_api();
        register_session_functions();
        register_server_helpers();
        register_warm_memory_functions();
    });
}

fn register_session_functions() {
    // Apache TVM's signature: (url, port, key, enable_logging, *constructor); the secret
    // comes from TVM_RPC_KEY.
    register("rpc.Connect", |args| {
        connect_from_args(args, "rpc.Connect", None)
    });
    // (url, port, key, secret, *constructor): the secret given explicitly.
    register("rpc.ConnectAuthenticated", |args| {
        let secret = match args.get(3).filter(|a| !a.is_none()) {
            Some(value) => Some(value.cast::<String>()?),
            None => None,
        };
        connect_from_args(args, "rpc.ConnectAuthenticated", secret.as_deref())
    });
    // (cmd...): a 0.8.0 server program started as `cmd... <read_fd> <write_fd>`.
    register("rpc.CreatePipeClient", |args| spawn_pipe(args, false));
    // (cmd...): a program of this runtime (`python -m tvm.exec.rpc_pipe_server`, say).
    register("rpc.CreatePipeClientOwnProtocol", |args| {
        spawn_pipe(args, true)
    });
    register("rpc.ServePipe", |args| {
        let fd = |i: usize| -> Result<i32> {
            let v = arg(args, i, "rpc.ServePipe")?.cast::<i64>()?;
            i32::try_from(v).map_err(|_| Error::new(ErrorKind::ValueError, format!("bad fd {v}")))
        };
        serve_pipe(fd(0)?, fd(1)?)?;
        Ok(Any::none())
    });
    register("rpc.LocalSession", |_| {
        let core = SessionCore::register(std::sync::Arc::new(LocalSession::new()))?;
        Ok(session_module_any(&core))
    });
    register("rpc.SessTableIndex", |args| {
        let module = arg(args, 0, "rpc.SessTableIndex")?.to_owned();
        Ok(Any::from(session_core_of_module(&module)?.index() as i64))
    });
    register("rpc.LoadRemoteModule", |args| {
        let module = arg(args, 0, "rpc.LoadRemoteModule")?.to_owned();
        let path = text_arg(args, 1, "rpc.LoadRemoteModule")?;
        let core = session_core_of_module(&module)?;
        let load = core
            .get_function("tvm.rpc.server.load_module")?
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::AttributeError,
                    "the remote has no tvm.rpc.server.load_module",
                )
            })?;
        load.call((path.as_str(),))
    });
    register("rpc.ServeSocket", |args| {
        let socket = socket_arg(args, 0, "rpc.ServeSocket")?;
        let key = args
            .get(1)
            .map(|k| k.cast::<String>())
            .transpose()?
            .unwrap_or_default();
        let secret = match args.get(2).filter(|a| !a.is_none()) {
            Some(value) => auth_key(Some(&value.cast::<String>()?))?,
            None => auth_key(None)?,
        };
        let options = ServeOptions {
            rpc_key: key,
            auth_key: secret,
            dedicated_process: true,
            ..ServeOptions::default()
        };
        serve_connection(socket, &options)?;
        Ok(Any::none())
    });
    // (fd, rpc_key, secret or None, timeout_s): the server's side of a client's handshake on
    // a borrowed socket, up to its last reply, within timeout_s in total. Returns the reason
    // (a str) for a refused peer (answered; close it), else [client_key, accept_reply]: the
    // caller sends
    // accept_reply (or RPC_CODE_BUSY) itself, then hands the socket to a session.
    register("rpc.ServerHandshake", |args| {
        let mut socket = socket_arg(args, 0, "rpc.ServerHandshake")?;
        let key = text_arg(args, 1, "rpc.ServerHandshake")?;
        let secret = match args.get(2).filter(|a| !a.is_none()) {
            Some(value) => Some(check_auth_key(&value.cast::<String>()?, "auth_key")?),
            None => None,
        };
        let timeout = match args.get(3).filter(|a| !a.is_none()) {
            Some(value) => {
                let seconds = value.cast::<f64>()?;
                if !(seconds > 0.0 && seconds.is_finite()) {
                    tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "handshake timeout must be a positive number of seconds, got {seconds}"
                    );
                }
                std::time::Duration::from_secs_f64(seconds)
            }
            None => HANDSHAKE_TIMEOUT,
        };
        let outcome = server_verify(&mut socket, &key, secret.as_deref(), timeout);
        // The deadline was the handshake's: the session served on this socket (the same
        // socket as the caller's descriptor) waits on its client as long as it needs.
        let _ = socket.set_read_timeout(None);
        let _ = socket.set_write_timeout(None);
        // A refused peer is an everyday event, not an error: its reason comes back as text
        // (an error's backtrace would be symbolized when Python reads it).
        Ok(match outcome {
            Ok(None) => Any::from("not an RPC client, or a wrong key or proof"),
            Err(error) => Any::from(format!("handshake failed: {}", error.message())),
            Ok(Some(verified)) => [
                Any::from(verified.hello.key),
                tvm_ffi::Bytes::from_bytes(&verified.accept_reply).into_any(),
            ]
            .into_iter()
            .collect::<tvm_ffi::Array>()
            .into(),
        })
    });
    // (fd, client_key): serves a session on a socket whose handshake rpc.ServerHandshake
    // completed (in this process or the one that accepted it).
    register("rpc.ServeAuthenticatedSocket", |args| {
        let socket = socket_arg(args, 0, "rpc.ServeAuthenticatedSocket")?;
        let key = text_arg(args, 1, "rpc.ServeAuthenticatedSocket")?;
        serve_authenticated(socket, &ClientHello::from_key(key), true)?;
        Ok(Any::none())
    });
}

/// A duplicate of the socket descriptor passed as argument `index` (the caller keeps its own).
fn socket_arg(args: &[AnyView<'_>], index: usize, function: &str) -> Result<TcpStream> {
    let fd = arg(args, index, function)?.cast::<i64>()?;
    let fd = i32::try_from(fd)
        .ok()
        .filter(|fd| *fd >= 0)
        .ok_or_else(|| Error::new(ErrorKind::ValueError, format!("bad socket fd {fd}")))?;
    // SAFETY: the caller passes an open socket descriptor it keeps open for this call; it is
    // only borrowed to duplicate it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let owned: OwnedFd = borrowed.try_clone_to_owned().map_err(|e| {
        Error::new(
            ErrorKind::ValueError,
            format!("socket fd {fd} is not open: {e}"),
        )
    })?;
    Ok(TcpStream::from(owned))
}

fn connect_from_args(args: &[AnyView<'_>], function: &str, secret: Option<&str>) -> Result<Any> {
    let host = text_arg(args, 0, function)?;
    let port = arg(args, 1, function)?.cast::<i64>()?;
    let port = u16::try_from(port).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!("port {port} is outside 0..65535"),
        )
    })?;
    let key = args
        .get(2)
        .map(|k| k.cast::<String>())
        .transpose()?
        .unwrap_or_default();
    let constructor = args
        .iter()
        .skip(4)
        .map(|a| plain_to_wire(a, "a session constructor argument"))
        .collect::<Result<Vec<_>>>()?;
    let secret = auth_key(secret)?;
    let core = connect(&host, port, &key, secret.as_deref(), constructor)?;
    Ok(session_module_any(&core))
}

fn spawn_pipe(args: &[AnyView<'_>], own_protocol: bool) -> Result<Any> {
    let command = args
        .iter()
        .map(|a| a.cast::<String>())
        .collect::<Result<Vec<_>>>()?;
    let core = PipeSession::spawn(&command, own_protocol)?;
    Ok(session_module_any(&core))
}

fn register_server_helpers() {
    register("rpc.SetWorkDirectory", |args| {
        set_work_dir(text_arg(args, 0, "rpc.SetWorkDirectory")?);
        Ok(Any::none())
    });
    register("tvm.rpc.server.workpath", |args| {
        let name = text_arg(args, 0, "tvm.rpc.server.workpath")?;
        Ok(Any::from(work_path(&name)?.to_string_lossy().into_owned()))
    });
    register("tvm.rpc.server.upload", |args| {
        let name = text_arg(args, 0, "tvm.rpc.server.upload")?;
        let data = tvm_ffi::Bytes::try_from_view(arg(args, 1, "tvm.rpc.server.upload")?)
            .ok_or_else(|| {
                Error::new(ErrorKind::TypeError, "tvm.rpc.server.upload expects bytes")
            })?;
        let path = work_path(&name)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error("create", parent, e))?;
        }
        std::fs::write(&path, data.as_bytes()).map_err(|e| io_error("write", &path, e))?;
        Ok(Any::none())
    });
    // Chunked transfers (this runtime's servers): append to a file, read a range of one.
    register("tvm.rpc.server.upload_append", |args| {
        let name = text_arg(args, 0, "tvm.rpc.server.upload_append")?;
        let data = tvm_ffi::Bytes::try_from_view(arg(args, 1, "tvm.rpc.server.upload_append")?)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::TypeError,
                    "tvm.rpc.server.upload_append expects bytes",
                )
            })?;
        let path = work_path(&name)?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| io_error("append to", &path, e))?;
        std::io::Write::write_all(&mut file, data.as_bytes())
            .map_err(|e| io_error("append to", &path, e))?;
        Ok(Any::none())
    });
    register("tvm.rpc.server.download_range", |args| {
        let path = work_path(&text_arg(args, 0, "tvm.rpc.server.download_range")?)?;
        let offset = arg(args, 1, "tvm.rpc.server.download_range")?.cast::<i64>()?;
        let length = arg(args, 2, "tvm.rpc.server.download_range")?.cast::<i64>()?;
        let (Ok(offset), Ok(length)) = (u64::try_from(offset), usize::try_from(length)) else {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "download_range needs a non-negative offset and length, got {offset} and {length}"
            );
        };
        let mut file = std::fs::File::open(&path).map_err(|e| io_error("read", &path, e))?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset))
            .map_err(|e| io_error("read", &path, e))?;
        let mut data = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut file, length as u64),
            &mut data,
        )
        .map_err(|e| io_error("read", &path, e))?;
        Ok(tvm_ffi::Bytes::from_bytes(&data).into_any())
    });
    register("tvm.rpc.server.file_size", |args| {
        let path = work_path(&text_arg(args, 0, "tvm.rpc.server.file_size")?)?;
        let size = std::fs::metadata(&path)
            .map_err(|e| io_error("read", &path, e))?
            .len();
        Ok(Any::from(size as i64))
    });
    register("tvm.rpc.server.download", |args| {
        let path = work_path(&text_arg(args, 0, "tvm.rpc.server.download")?)?;
        let data = std::fs::read(&path).map_err(|e| io_error("read", &path, e))?;
        Ok(tvm_ffi::Bytes::from_bytes(&data).into_any())
    });
    register("tvm.rpc.server.remove", |args| {
        let path = work_path(&text_arg(args, 0, "tvm.rpc.server.remove")?)?;
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| io_error("remove", &path, e))?;
        Ok(Any::none())
    });
    register("tvm.rpc.server.listdir", |args| {
        let name = args
            .first()
            .map(|a| a.cast::<String>())
            .transpose()?
            .unwrap_or_else(|| ".".into());
        let path = work_path(&name)?;
        let mut names = std::fs::read_dir(&path)
            .map_err(|e| io_error("list", &path, e))?
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>();
        names.sort();
        Ok(Any::from(names.join(",")))
    });
    register("tvm.rpc.server.load_module", |args| {
        let path = work_path(&text_arg(args, 0, "tvm.rpc.server.load_module")?)?;
        let module = tvm_runtime::load_module(path)?;
        Ok(Any::from(module.as_object().clone()))
    });
    register("tvm.rpc.server.ModuleGetFunction", |args| {
        let module: Module = arg(args, 0, "tvm.rpc.server.ModuleGetFunction")?.cast()?;
        let name = text_arg(args, 1, "tvm.rpc.server.ModuleGetFunction")?;
        let query_imports = args
            .get(2)
            .map(|q| q.cast::<bool>())
            .transpose()?
            .unwrap_or(true);
        Ok(Any::from(module.get_function(&name, query_imports)?))
    });
}

/// The session zygote's side of [`warm_memory`] (`tvm.rpc._zygote`).
fn register_warm_memory_functions() {
    register("rpc.WarmMemoryReserve", |args| {
        let count = size_arg(args, 0, "rpc.WarmMemoryReserve")?;
        let bytes = size_arg(args, 1, "rpc.WarmMemoryReserve")?;
        warm_memory::reserve(count, bytes)?;
        Ok(Any::none())
    });
    register("rpc.WarmMemoryClaim", |_| {
        Ok(Any::from(warm_memory::claim()))
    });
    register("rpc.WarmMemoryPrefault", |args| {
        let max_bytes = size_arg(args, 0, "rpc.WarmMemoryPrefault")?;
        Ok(Any::from(warm_memory::prefault(max_bytes)))
    });
    register("rpc.WarmMemoryScrub", |_| {
        Ok(Any::from(warm_memory::scrub() as i64))
    });
    register("rpc.WarmMemoryReleaseDead", |args| {
        let pid = size_arg(args, 0, "rpc.WarmMemoryReleaseDead")?;
        let pid = u32::try_from(pid).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("rpc.WarmMemoryReleaseDead: {pid} is not a process id"),
            )
        })?;
        Ok(Any::from(warm_memory::release_dead(pid) as i64))
    });
}

/// Argument `index` as a count or size: a non-negative integer.
fn size_arg(args: &[AnyView<'_>], index: usize, function: &str) -> Result<usize> {
    let value = arg(args, index, function)?.cast::<i64>()?;
    usize::try_from(value).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!("{function}: argument {index} must be a non-negative integer, got {value}"),
        )
    })
}
