//! The arguments of a kernel call, read once per call: the kernel's own arguments as 8-byte
//! values (device addresses of tensors, packed scalars), then the launch dimensions, following
//! the shared launch convention of [`tvm_runtime::kernel`]. The values are handed to a launch
//! API as an array of their addresses (CUDA's `kernelParams`) or as one blob with each value
//! aligned to its size (HIP's `HIP_LAUNCH_PARAM_BUFFER_POINTER`).

use std::ffi::c_void;

use tvm_ffi::abi::{self, DLTensor};
use tvm_ffi::{AnyView, Device, Error, ErrorKind, Result, Tensor};
use tvm_runtime::kernel::{ArgExtraTag, ArgKind, FunctionInfo, LaunchConfig, LaunchDims};

/// Where a tensor passed to a kernel may live, as its backend sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorPlacement {
    /// On a device of the backend: the kernel runs on that device, which every such tensor of
    /// the call must share.
    OnDevice,
    /// Memory the device can reach without deciding which device runs (pinned host memory).
    Reachable,
    /// Memory the kernel cannot use (host memory, another backend's device).
    Refused,
}

/// How calls of one kernel are read: the kinds of its arguments and its launch configuration.
#[derive(Clone, Debug)]
pub struct KernelSignature {
    name: String,
    kinds: Vec<ArgKind>,
    by_address: Vec<bool>,
    launch: LaunchConfig,
}

/// One call of a kernel, read: argument values, launch dimensions and the device of its tensors.
#[derive(Debug)]
pub struct KernelCall<'a> {
    signature: &'a KernelSignature,
    values: Vec<u64>,
    /// The dimensions of the launch.
    pub dims: LaunchDims,
    /// The device of the tensor arguments placed [`TensorPlacement::OnDevice`], if any.
    pub device: Option<Device>,
}

impl KernelSignature {
    /// The signature of the kernel `info` describes; argument types a device function cannot
    /// take and unknown launch tags are errors naming them.
    pub fn new(info: &FunctionInfo) -> Result<KernelSignature> {
        let kinds = info
            .arg_types
            .iter()
            .enumerate()
            .map(|(index, dtype)| ArgKind::of(&info.name, index, *dtype))
            .collect::<Result<Vec<_>>>()?;
        let by_address = (0..kinds.len())
            .map(|i| info.arg_extra_tags.get(i) == Some(&ArgExtraTag::TensorMap))
            .collect();
        Ok(KernelSignature {
            name: info.name.clone(),
            kinds,
            by_address,
            launch: LaunchConfig::of(info)?,
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Arguments a call takes: the kernel's own, then the launch arguments.
    pub fn num_call_args(&self) -> usize {
        self.kinds.len() + self.launch.num_args()
    }

    /// Reads the arguments of a call. `placement` says where a tensor of a device type may live.
    /// A wrong count, a value of the wrong type or a tensor the kernel cannot use is an error
    /// naming the kernel and the argument.
    pub fn read_call(
        &self,
        args: &[AnyView<'_>],
        placement: impl Fn(Device) -> TensorPlacement,
    ) -> Result<KernelCall<'_>> {
        if args.len() != self.num_call_args() {
            tvm_ffi::bail!(
                ErrorKind::TypeError,
                "kernel `{}` takes {} arguments ({} of its own and {} launch arguments), got {}",
                self.name,
                self.num_call_args(),
                self.kinds.len(),
                self.launch.num_args(),
                args.len()
            );
        }
        let (own, launch) = args.split_at(self.kinds.len());
        let mut values = Vec::with_capacity(own.len());
        let mut device = None;
        for (index, (kind, value)) in self.kinds.iter().zip(own).enumerate() {
            values.push(match kind {
                ArgKind::Handle => self.handle(index, value, &placement, &mut device)?,
                scalar => u64::from_le_bytes(scalar.scalar_bytes(&self.name, index, value)?),
            });
        }
        Ok(KernelCall {
            signature: self,
            values,
            dims: self.launch.dims(launch)?,
            device,
        })
    }

    /// The device address argument `index` stands for.
    fn handle(
        &self,
        index: usize,
        value: &AnyView<'_>,
        placement: &impl Fn(Device) -> TensorPlacement,
        device: &mut Option<Device>,
    ) -> Result<u64> {
        let raw = value.as_raw();
        let tensor: DLTensor = match raw.type_index {
            abi::kTVMFFINone => return Ok(0),
            // SAFETY: the payload of an opaque pointer is `v_ptr`.
            abi::kTVMFFIOpaquePtr => return Ok(unsafe { raw.payload.v_ptr } as u64),
            // SAFETY: a DLTensor pointer argument points at a descriptor valid for the call.
            abi::kTVMFFIDLTensorPtr => unsafe { *(raw.payload.v_ptr as *const DLTensor) },
            abi::kTVMFFITensor => *value
                .cast::<Tensor>()
                .map_err(|e| Error::new(ErrorKind::TypeError, e.message()))?
                .dltensor(),
            _ => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "kernel `{}`: argument {index} must be a tensor or a pointer, got {}",
                self.name,
                value.type_name()
            ),
        };
        let on = Device(tensor.device);
        match placement(on) {
            TensorPlacement::Refused => tvm_ffi::bail!(
                ErrorKind::ValueError,
                "kernel `{}`: argument {index} is a tensor on {on}, which the kernel cannot use",
                self.name
            ),
            TensorPlacement::OnDevice => match *device {
                Some(first) if first != on => tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "kernel `{}`: argument {index} is a tensor on {on}, but an earlier tensor \
                     argument is on {first}; a kernel runs on one device",
                    self.name
                ),
                _ => *device = Some(on),
            },
            TensorPlacement::Reachable => {}
        }
        Ok((tensor.data as u64).wrapping_add(tensor.byte_offset))
    }
}

impl KernelCall<'_> {
    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.signature.name
    }

    /// The argument values, 8 bytes each (32-bit scalars in the low 4).
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// One address per argument, pointing at its value (CUDA's `kernelParams`), except for
    /// arguments passed by address (tensor maps), whose value is the address itself. Valid while
    /// `self` is neither moved nor changed.
    pub fn addresses(&mut self) -> Vec<*mut c_void> {
        let by_address = &self.signature.by_address;
        self.values
            .iter_mut()
            .zip(by_address)
            .map(|(value, by_address)| {
                if *by_address {
                    *value as *mut c_void
                } else {
                    (value as *mut u64).cast()
                }
            })
            .collect()
    }

    /// The arguments as one blob in C struct layout: each value aligned to its own size
    /// (TVM's `PackFuncPackedArgAligned`).
    pub fn aligned_blob(&self) -> Vec<u8> {
        let mut blob = Vec::with_capacity(self.values.len() * 8);
        for (value, kind) in self.values.iter().zip(&self.signature.kinds) {
            let size = kind.size();
            blob.resize(blob.len().next_multiple_of(size), 0);
            blob.extend_from_slice(&value.to_le_bytes()[..size]);
        }
        blob
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::{Any, DataType};

    fn info(types: &[&str], tags: &[&str]) -> FunctionInfo {
        FunctionInfo {
            name: "k".into(),
            arg_types: types
                .iter()
                .map(|t| DataType(tvm_ffi::dtype::parse_dtype(t).unwrap()))
                .collect(),
            launch_param_tags: tags.iter().map(|t| t.to_string()).collect(),
            arg_extra_tags: Vec::new(),
        }
    }

    fn everything_on_device(_: Device) -> TensorPlacement {
        TensorPlacement::OnDevice
    }

    #[test]
    fn scalars_pack_into_slots_and_aligned_blobs() {
        let signature = KernelSignature::new(&info(
            &["int32", "handle", "float32", "int64"],
            &["blockIdx.x"],
        ))
        .unwrap();
        let args: Vec<Any> = vec![
            Any::from(7i64),
            Any::from(0x1000 as *mut c_void),
            Any::from(1.5f64),
            Any::from(-2i64),
            Any::from(3i64),
        ];
        let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
        let mut call = signature.read_call(&views, everything_on_device).unwrap();
        assert_eq!(call.dims.grid, [3, 1, 1]);
        assert_eq!(call.values()[0], 7);
        assert_eq!(call.values()[1], 0x1000);
        assert_eq!(call.values()[2], u64::from(1.5f32.to_bits()));
        let blob = call.aligned_blob();
        // int32 at 0, pointer at 8, float at 16, int64 at 24.
        assert_eq!(blob.len(), 32);
        assert_eq!(&blob[0..4], &7i32.to_le_bytes());
        assert_eq!(&blob[8..16], &0x1000u64.to_le_bytes());
        assert_eq!(&blob[24..32], &(-2i64).to_le_bytes());
        let addresses = call.addresses();
        // SAFETY: each address points at the call's value of that argument.
        assert_eq!(unsafe { *(addresses[0] as *const i32) }, 7);
    }

    #[test]
    fn wrong_counts_and_types_name_the_kernel() {
        let signature = KernelSignature::new(&info(&["handle"], &["threadIdx.x"])).unwrap();
        let one = [Any::from(1i64)];
        let views: Vec<AnyView<'_>> = one.iter().map(Any::as_view).collect();
        let err = signature
            .read_call(&views, everything_on_device)
            .unwrap_err();
        assert!(err.is_kind(ErrorKind::TypeError) && err.message().contains("takes 2"));
        let two = [Any::from("text"), Any::from(1i64)];
        let views: Vec<AnyView<'_>> = two.iter().map(Any::as_view).collect();
        let err = signature
            .read_call(&views, everything_on_device)
            .unwrap_err();
        assert!(
            err.message().contains("argument 0 must be a tensor"),
            "{err}"
        );
    }
}
