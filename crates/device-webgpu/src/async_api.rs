//! The asynchronous face of the backend: synchronization and device→host copies as Rust
//! futures, served as global functions in two ways.
//!
//! - `webgpu.sync_async(device)` and `webgpu.copy_to_host_async(src, dst)`: registered with
//!   [`tvm_runtime::async_functions::register_async_function`], so that the RPC server's
//!   asynchronous mode serves them; a direct call returns when the future completes.
//! - `webgpu.sync_then(device, callback)` and `webgpu.copy_to_host_then(src, dst, callback)`:
//!   return at once; `callback(kind, message)` runs when the future completes (`kind` is `""`
//!   on success, else the error's kind), on the device's poller thread. Python's asyncio
//!   helpers (`tvm.runtime.webgpu_async`) resolve an asyncio future from it, so no thread
//!   blocks while the GPU works.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Wake, Waker};

use device_kit::buffer::copy::DeviceSide;
use tvm_ffi::abi::{DLTensor, kDLCPU, kDLWebGPU};
use tvm_ffi::{Any, AnyView, Device, Error, ErrorKind, Function, Result, Tensor, TryFromAnyView};
use tvm_runtime::async_functions::register_async_function;
use tvm_runtime::device::{check_copy_shapes, copy_host_strided, host_view};

use crate::backend::WebGpuBackend;
use crate::memory::aligned;

/// A future that completes when the work queued on `device` so far is done.
pub fn sync_async(
    backend: &WebGpuBackend,
    device: Device,
) -> Result<impl Future<Output = Result<()>> + Send + 'static + use<>> {
    let sync = backend.device(device)?.sync();
    Ok(async move { Ok(sync.await?) })
}

/// A future that copies WebGPU tensor `src` into host tensor `dst` (same shape and dtype, any
/// strides) once its bytes arrive, after the work queued before it.
pub fn copy_to_host_async(
    backend: &WebGpuBackend,
    src: Tensor,
    dst: Tensor,
) -> Result<impl Future<Output = Result<()>> + Send + 'static + use<>> {
    let (from, to) = (src.dltensor(), dst.dltensor());
    if from.device.device_type != kDLWebGPU || to.device.device_type != kDLCPU {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "copy_to_host_async copies a WebGPU tensor into a CPU tensor, got {} → {}",
            Device(from.device),
            Device(to.device)
        );
    }
    // SAFETY: both descriptors belong to live tensors.
    unsafe { check_copy_shapes(from, to) }?;
    // SAFETY: as above.
    let side = unsafe { DeviceSide::resolve(backend, from, "the copy's source") }?;
    let read = side.buffer.read(&side.extent);
    let start = aligned(&side.extent).start;
    Ok(async move {
        let staged = read.await?;
        let (from, to): (&DLTensor, &DLTensor) = (src.dltensor(), dst.dltensor());
        staged.with_bytes(|bytes| {
            let from_host = host_view(from, bytes.as_ptr().cast_mut(), start);
            // SAFETY: the staged bytes hold the source's elements; `dst` is live host memory
            // of the checked shape (both tensors are owned by this future).
            unsafe { copy_host_strided(&from_host, to) }
        })?;
        Ok(())
    })
}

type BoxedTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A future run by whoever wakes it: polled first by [`spawn`]'s caller, then on the thread
/// that completes what it waits for (the device's poller).
struct Task {
    future: Mutex<Option<BoxedTask>>,
    this: Weak<Task>,
}

impl Task {
    fn run(&self) {
        let mut slot = self.future.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(future) = slot.as_mut() else {
            return;
        };
        let Some(this) = self.this.upgrade() else {
            return;
        };
        let waker = Waker::from(this);
        if future
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            *slot = None;
        }
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.run();
    }
}

/// Runs `future` to completion without blocking: it makes progress each time it is woken.
fn spawn(future: impl Future<Output = ()> + Send + 'static) {
    let task = Arc::new_cyclic(|this| Task {
        future: Mutex::new(Some(Box::pin(future))),
        this: this.clone(),
    });
    task.run();
}

/// Runs `future` and reports its outcome to `callback(kind, message)` (`""` kind: success).
fn complete_with(
    callback: Function,
    future: Result<impl Future<Output = Result<()>> + Send + 'static>,
) {
    let report = move |outcome: Result<()>| {
        let (kind, message) = match outcome {
            Ok(()) => (String::new(), String::new()),
            Err(e) => (e.kind().into_owned(), e.message().into_owned()),
        };
        // The callback's own failure has no caller to go to.
        let _ = callback.call_packed(&[
            AnyView::from(&Any::from(kind)),
            AnyView::from(&Any::from(message)),
        ]);
    };
    match future {
        Ok(future) => spawn(async move { report(future.await) }),
        Err(e) => report(Err(e)),
    }
}

fn arg<T: TryFromAnyView>(args: &[Any], index: usize, name: &str, what: &str) -> Result<T> {
    args.get(index)
        .and_then(|a| a.cast::<T>().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::TypeError,
                format!("{name}: argument {index} must be {what}"),
            )
        })
}

/// Registers the asynchronous global functions of `backend` (see the module docs).
pub(crate) fn register_async_globals(api: &Arc<WebGpuBackend>) {
    let backend = Arc::clone(api);
    let _ = register_async_function(
        "webgpu.sync_async",
        move |args: Vec<Any>| {
            let started = arg::<Device>(&args, 0, "webgpu.sync_async", "a device")
                .and_then(|device| sync_async(&backend, device));
            async move { started?.await.map(|()| Any::default()) }
        },
        false,
    );
    let backend = Arc::clone(api);
    let _ = register_async_function(
        "webgpu.copy_to_host_async",
        move |args: Vec<Any>| {
            let name = "webgpu.copy_to_host_async";
            let started = arg::<Tensor>(&args, 0, name, "a tensor").and_then(|src| {
                let dst = arg::<Tensor>(&args, 1, name, "a tensor")?;
                copy_to_host_async(&backend, src, dst)
            });
            async move { started?.await.map(|()| Any::default()) }
        },
        false,
    );
    let backend = Arc::clone(api);
    let name = "webgpu.sync_then";
    let _ = Function::from_typed(name, move |device: Device, callback: Function| {
        complete_with(callback, sync_async(&backend, device));
    })
    .register_global(name, false);
    let backend = Arc::clone(api);
    let name = "webgpu.copy_to_host_then";
    let _ = Function::from_typed(name, move |src: Tensor, dst: Tensor, callback: Function| {
        complete_with(callback, copy_to_host_async(&backend, src, dst));
    })
    .register_global(name, false);
}
