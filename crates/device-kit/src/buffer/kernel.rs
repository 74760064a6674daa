//! What the kernels of buffer-handle backends share: their metadata checked against the
//! buffer convention (tensor arguments first, bound as storage buffers 0..n-1; then scalars;
//! then one int per launch tag), their tensor arguments bound to live buffers, their pipelines
//! made once per device, and the packed function that launches them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tvm_ffi::abi::{self, kDLOpaqueHandle};
use tvm_ffi::{AnyView, DataType};

use super::{BackendError, BackendFailure, BackendResult, BufferBackend, DeviceBuffer};
use crate::kernel::{ArgKind, FunctionInfo, LaunchConfig, tensor_arg};

/// A kernel's metadata checked against the buffer convention.
#[derive(Clone, Debug)]
pub struct KernelShape {
    /// The kernel's metadata.
    pub info: FunctionInfo,
    /// Which trailing call arguments are grid and block sizes.
    pub launch: LaunchConfig,
    /// How many tensor arguments come first.
    pub num_buffers: usize,
    /// The scalar arguments after them, in order.
    pub scalars: Vec<ArgKind>,
}

/// A tensor argument: its buffer and the byte offset its binding starts at.
pub struct BoundBuffer<B> {
    /// The buffer behind the tensor.
    pub buffer: Arc<B>,
    /// The offset of the tensor's first element in the buffer.
    pub offset: u64,
    /// Whether the tensor is marked read-only.
    pub read_only: bool,
}

impl KernelShape {
    /// Checks `info`: launch tags of grid and block sizes only, tensors first, then scalars
    /// that `scalar` accepts (given the argument's index, its kind and type).
    pub fn new<F: BackendFailure>(
        info: FunctionInfo,
        scalar: impl Fn(usize, ArgKind, DataType) -> BackendResult<ArgKind, F>,
    ) -> BackendResult<KernelShape, F> {
        let name = &info.name;
        let fail = |what: String| BackendError::invalid(format!("kernel `{name}`: {what}"));
        let launch = LaunchConfig::of(&info)?;
        if launch.uses_dyn_shared_memory() || launch.uses_launch_features() {
            return Err(fail(format!(
                "{} launches take grid and block sizes only (launch tags {:?})",
                F::TITLE,
                info.launch_param_tags
            )));
        }
        let num_buffers = info
            .arg_types
            .iter()
            .take_while(|t| t.code() == kDLOpaqueHandle)
            .count();
        let scalars = info.arg_types[num_buffers..]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let index = num_buffers + i;
                if t.code() == kDLOpaqueHandle {
                    return Err(fail(format!(
                        "tensor argument {index} comes after a scalar; tensors must come first"
                    )));
                }
                scalar(index, ArgKind::of(name, index, *t)?, *t)
            })
            .collect::<BackendResult<Vec<_>, F>>()?;
        Ok(KernelShape {
            info,
            launch,
            num_buffers,
            scalars,
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// A `ValueError` about this kernel: `what`, after its name.
    pub fn fail<F>(&self, what: impl std::fmt::Display) -> BackendError<F> {
        BackendError::invalid(format!("kernel `{}`: {what}", self.name()))
    }

    /// The buffer behind argument `index`: a tensor of `backend`, or, where `handles`, a bare
    /// buffer handle (an opaque pointer).
    pub fn bind<B: BufferBackend>(
        &self,
        backend: &B,
        index: usize,
        value: &AnyView<'_>,
        handles: bool,
    ) -> BackendResult<BoundBuffer<B::Buffer>, B::Failure> {
        let title = B::Failure::TITLE;
        let argument = |e: BackendError<B::Failure>| self.fail(format!("argument {index}: {e}"));
        if let Some(t) = tensor_arg(self.name(), index, value, B::DEVICE_TYPE, title)? {
            let buffer = backend
                .buffers()
                .get(t.data, t.device.device_id)
                .map_err(argument)?;
            return Ok(BoundBuffer {
                buffer,
                offset: t.byte_offset,
                read_only: t.read_only,
            });
        }
        let raw = value.as_raw();
        if !handles || raw.type_index != abi::kTVMFFIOpaquePtr {
            let or_handle = if handles { " or buffer handle" } else { "" };
            return Err(BackendError::WrongType(format!(
                "kernel `{}`: argument {index} must be a {title} tensor{or_handle}, got {}",
                self.name(),
                value.type_name()
            )));
        }
        // SAFETY: opaque pointers store `v_ptr`.
        let handle = unsafe { raw.payload.v_ptr };
        let buffer = backend.buffers().get_anywhere(handle).map_err(argument)?;
        Ok(BoundBuffer {
            buffer,
            offset: 0,
            read_only: false,
        })
    }

    /// The buffers behind the tensor arguments (the first [`KernelShape::num_buffers`] of
    /// `args`, as [`KernelShape::bind`] finds them), checked to live on one device.
    pub fn bind_all<B: BufferBackend>(
        &self,
        backend: &B,
        args: &[AnyView<'_>],
        handles: bool,
    ) -> BackendResult<Vec<BoundBuffer<B::Buffer>>, B::Failure> {
        let bound = (0..self.num_buffers)
            .map(|i| self.bind(backend, i, &args[i], handles))
            .collect::<BackendResult<Vec<_>, B::Failure>>()?;
        if let Some(first) = bound.first() {
            let home = first.buffer.placement();
            let devices = B::Failure::DEVICE_NAME;
            for (i, b) in bound.iter().enumerate() {
                let here = b.buffer.placement();
                if here.device_id != home.device_id {
                    return Err(self.fail(format!(
                        "argument {i} is on {devices}:{}, argument 0 on {devices}:{}",
                        here.device_index, home.device_index
                    )));
                }
            }
        }
        Ok(bound)
    }
}

/// A kernel's pipelines by device (by the device object's id), each made on first use.
pub struct PipelineCache<P> {
    pipelines: Mutex<HashMap<u64, Arc<P>>>,
}

impl<P> Default for PipelineCache<P> {
    fn default() -> Self {
        PipelineCache {
            pipelines: Mutex::default(),
        }
    }
}

impl<P> PipelineCache<P> {
    /// The pipeline of device `id`, made by `make` on first use.
    pub fn get_or_make<E>(
        &self,
        id: u64,
        make: impl FnOnce() -> Result<P, E>,
    ) -> Result<Arc<P>, E> {
        let mut cache = self
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = cache.get(&id) {
            return Ok(Arc::clone(p));
        }
        let pipeline = Arc::new(make()?);
        cache.insert(id, Arc::clone(&pipeline));
        Ok(pipeline)
    }
}
