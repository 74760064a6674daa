"""Client sessions: connect to a server, call its functions, move tensors and files."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .. import ffi
from ..ffi import Device, Function, Module, get_global_func
from . import base

if TYPE_CHECKING:
    from .aio import AsyncCalls

__all__ = ["LocalSession", "PopenSession", "RPCSession", "connect"]

#: Device types at or above this carry a session index: ``type + 128 * (index + 1)``.
RPC_SESS_MASK = 128

#: Bytes moved per step of an upload or download that reports progress.
_CHUNK = 4 << 20


def _api(name: str, release_gil: bool = False) -> Function:
    func = get_global_func(name)
    if func is None:  # pragma: no cover - the extension always registers these
        raise RuntimeError(f"the native runtime has no {name}")
    if release_gil:
        # It waits on the network or a child process: other Python threads keep running.
        func.release_gil = True
    return func


class RPCSession:
    """A session with a remote (or the local machine): its functions are ordinary
    :class:`tvm.ffi.Function` values and its devices are devices of this process."""

    def __init__(self, sess: Module) -> None:
        self._sess = sess
        self._tbl_index: int = _api("rpc.SessTableIndex")(sess)
        self._async_calls: AsyncCalls | None = None

    def get_function(self, name: str) -> Function:
        """The remote global function ``name`` (``AttributeError`` when it has none). It
        releases the interpreter lock while it waits for the remote."""
        func = self._sess.get_function(name)
        func.release_gil = True
        return func

    async def async_call(self, name: str, *args: Any) -> Any:
        """Awaits remote function ``name`` called with ``args`` without blocking the event
        loop. A coroutine function of the server (:func:`tvm.rpc.aio.register_async_func`) runs
        without holding the session, so such calls on one session overlap on the server's event
        loop; any other function is called on a worker thread (see :mod:`tvm.rpc.aio`)."""
        calls = self._async_calls
        if calls is None:
            from .aio import AsyncCalls

            calls = self._async_calls = AsyncCalls(self.get_function)
        return await calls.call(name, *args)

    def system_lib(self) -> Module:
        """The remote's system library."""
        return self.get_function("ffi.SystemLib")()

    def device(self, dev_type: str | int, dev_id: int = 0) -> Device:
        """Device ``dev_type:dev_id`` of the remote, as a device of this process."""
        local = ffi.device(dev_type, dev_id)
        if local.device_type >= RPC_SESS_MASK:
            raise ValueError(f"{local!r} is already a remote device")
        return Device(local.device_type + RPC_SESS_MASK * (self._tbl_index + 1), local.device_id)

    def cpu(self, dev_id: int = 0) -> Device:
        """The remote CPU."""
        return self.device("cpu", dev_id)

    def cuda(self, dev_id: int = 0) -> Device:
        """A remote CUDA GPU."""
        return self.device("cuda", dev_id)

    def rocm(self, dev_id: int = 0) -> Device:
        """A remote ROCm GPU."""
        return self.device("rocm", dev_id)

    def vulkan(self, dev_id: int = 0) -> Device:
        """A remote Vulkan device."""
        return self.device("vulkan", dev_id)

    def metal(self, dev_id: int = 0) -> Device:
        """A remote Metal device."""
        return self.device("metal", dev_id)

    def webgpu(self, dev_id: int = 0) -> Device:
        """A remote WebGPU device."""
        return self.device("webgpu", dev_id)

    def cl(self, dev_id: int = 0) -> Device:
        """A remote OpenCL device."""
        return self.device("opencl", dev_id)

    def ext_dev(self, dev_id: int = 0) -> Device:
        """A remote extension device."""
        return self.device("ext_dev", dev_id)

    def upload(
        self,
        data: str | os.PathLike[str] | bytes | bytearray,
        target: str | None = None,
        progress: Callable[[int, int], object] | bool | None = None,
    ) -> None:
        """Uploads a local file (``target`` defaults to its name) or bytes (``target``
        required) into the server's work directory. ``progress`` is ``progress(done, total)``
        called as bytes go out, or ``True`` for a progress bar (with ``tqdm`` installed). A
        server of this runtime receives the file in chunks, read from disk as they go."""
        if isinstance(data, (bytes, bytearray)):
            if target is None:
                raise ValueError("upload of bytes needs a target name")
            total = len(data)
            chunks: Iterator[bytes] = (bytes(data[i : i + _CHUNK]) for i in range(0, total, _CHUNK))
        else:
            path = os.fspath(data)
            target = target if target is not None else os.path.basename(path)
            total = os.path.getsize(path)
            chunks = _file_chunks(path)
        report = _progress(progress, total, f"upload {target}")
        append = self._optional_function("tvm.rpc.server.upload_append")
        if append is None:  # a server without chunked transfers (Apache TVM's)
            self.get_function("tvm.rpc.server.upload")(target, b"".join(chunks))
            report(total)
            return
        self.get_function("tvm.rpc.server.upload")(target, b"")
        done = 0
        report(0)
        try:
            for chunk in chunks:
                append(target, chunk)
                done += len(chunk)
                report(done)
        except BaseException:
            # No partial file stays behind (where the session still works to remove it).
            with contextlib.suppress(Exception):
                self.remove(target)
            raise

    def download(
        self, path: str, progress: Callable[[int, int], object] | bool | None = None
    ) -> bytes:
        """The bytes of ``path`` in the server's work directory; ``progress`` as for
        :meth:`upload`."""
        read_range = self._optional_function("tvm.rpc.server.download_range")
        if read_range is None:
            blob = bytes(self.get_function("tvm.rpc.server.download")(path))
            _progress(progress, len(blob), f"download {path}")(len(blob))
            return blob
        total = int(self.get_function("tvm.rpc.server.file_size")(path))
        report = _progress(progress, total, f"download {path}")
        parts = []
        done = 0
        report(0)
        while done < total:
            part = bytes(read_range(path, done, min(_CHUNK, total - done)))
            if not part:
                break
            parts.append(part)
            done += len(part)
            report(done)
        return b"".join(parts)

    def download_linked_module(self, path: str) -> bytes:
        """The bytes of a shared library the server links from uploaded ``path`` (an object
        file ``.o`` or a ``.tar`` of them; a library comes back as it is)."""
        return bytes(self.get_function("tvm.rpc.server.download_linked_module")(path))

    def _optional_function(self, name: str) -> Function | None:
        try:
            return self.get_function(name)
        except AttributeError:
            return None

    def remove(self, path: str) -> None:
        """Removes ``path`` (a file or directory) from the server's work directory."""
        self.get_function("tvm.rpc.server.remove")(path)

    def listdir(self, path: str = ".") -> list[str]:
        """The names in ``path`` of the server's work directory."""
        names = str(self.get_function("tvm.rpc.server.listdir")(path))
        return [name for name in names.split(",") if name]

    def load_module(self, path: str) -> Module:
        """Loads an uploaded library on the remote; its functions run there."""
        return _api("rpc.LoadRemoteModule", release_gil=True)(self._sess, path)

    def close(self) -> None:
        """Ends the session; its remote functions and tensors stop working."""
        close = self._sess.get_function("CloseRPCConnection")
        close.release_gil = True
        close()

    def __enter__(self) -> RPCSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RPCSession {self._tbl_index}>"


def _file_chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            yield chunk


def _progress(
    progress: Callable[[int, int], object] | bool | None, total: int, what: str
) -> Callable[[int], None]:
    """A reporter of bytes done: the user's callback, a ``tqdm`` bar for ``True`` (nothing
    when tqdm is not installed), or nothing."""
    if progress is None or progress is False:
        return lambda done: None
    if progress is True:
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:
            return lambda done: None
        bar = tqdm(total=total, unit="B", unit_scale=True, desc=what)
        shown = [0]

        def advance(done: int) -> None:
            bar.update(done - shown[0])
            shown[0] = done
            if done >= total:
                bar.close()

        return advance
    callback = progress

    def call(done: int) -> None:
        callback(done, total)

    return call


class LocalSession(RPCSession):
    """The local machine as a session: code written for a remote runs here unchanged."""

    def __init__(self) -> None:
        from .server import register_download_linked_module

        register_download_linked_module()
        super().__init__(_api("rpc.LocalSession")())


class PopenSession(RPCSession):
    """A session with a child process over pipes. With no ``binary``, the child is this
    runtime's own server (``python -m tvm.exec.rpc_pipe_server``); otherwise ``binary`` is a
    program (a path, or its bytes to write to a temporary file) that speaks protocol 0.8.0 and
    takes ``<read_fd> <write_fd>`` as its last arguments, such as a MinRPC server."""

    def __init__(self, binary: str | os.PathLike[str] | bytes | None = None) -> None:
        if binary is None:
            command = [sys.executable, "-m", "tvm.exec.rpc_pipe_server"]
            super().__init__(_api("rpc.CreatePipeClientOwnProtocol", release_gil=True)(*command))
            return
        if isinstance(binary, (bytes, bytearray)):
            from ..support import utils

            self._temp = utils.tempdir()
            path = self._temp.relpath("server.minrpc")
            with open(path, "wb") as file:
                file.write(binary)
            os.chmod(path, 0o700)
        else:
            path = os.fspath(binary)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise RuntimeError(f"{path} does not exist or is not executable")
        super().__init__(_api("rpc.CreatePipeClient", release_gil=True)(path))


def connect(
    url: str,
    port: int,
    key: str = "",
    session_timeout: float = 0,
    session_constructor_args: Sequence[Any] | None = None,
    enable_logging: bool = False,
    auth_key: str | None = None,
    handshake_timeout: float | None = None,
) -> RPCSession:
    """Opens a session with the RPC server at ``url:port`` (``"127.0.0.1"`` for this machine).

    ``session_timeout`` (seconds) asks the server to end the session after that long;
    ``session_constructor_args`` names the serving session, e.g. ``["rpc.Connect", host, port,
    key, False]`` to reach a further server through this one. ``auth_key`` (default: the
    ``TVM_RPC_KEY`` environment variable) is the shared secret: both sides prove they hold it
    by keyed hashes over fresh nonces, never sending it, and a client with a key refuses a
    server that does not prove the same key. An empty or whitespace ``auth_key`` (or a set but
    empty ``TVM_RPC_KEY``) is a ``ValueError``.

    The server must complete the handshake within ``handshake_timeout`` seconds (default 60),
    or the call raises ``TimeoutError`` naming the address. Connecting releases the interpreter
    lock, as remote calls do: other Python threads run while it waits."""
    auth_key = base.resolve_auth_key(auth_key)
    if handshake_timeout is not None:
        number = isinstance(handshake_timeout, (int, float)) and not isinstance(
            handshake_timeout, bool
        )
        if not (number and 0 < float(handshake_timeout) < 1e9):
            raise ValueError(
                f"handshake_timeout must be a positive number of seconds, got {handshake_timeout!r}"
            )
        # A client-side option: the native handshake reads it and does not send it.
        key = f"{key} -handshake_timeout={float(handshake_timeout)!r}"
    if session_constructor_args is None:
        session_constructor_args = []
    if not isinstance(session_constructor_args, (list, tuple)):
        raise TypeError(
            "session_constructor_args must be a list or tuple, "
            f"got {type(session_constructor_args).__name__}"
        )
    if session_timeout:
        key = f"{key} -timeout={session_timeout}"
    if auth_key is not None:
        connect_native = _api("rpc.ConnectAuthenticated", release_gil=True)
        sess = connect_native(url, int(port), key, auth_key, *session_constructor_args)
    else:
        connect_native = _api("rpc.Connect", release_gil=True)
        sess = connect_native(url, int(port), key, enable_logging, *session_constructor_args)
    return RPCSession(sess)
