//! The arguments of a kernel call, read once per call: the kernel's own arguments as 8-byte
//! values (device addresses of tensors, packed scalars), then the launch dimensions, following
//! the shared launch convention of [`crate::kernel`]. The values are handed to a launch
//! API as an array of their addresses (CUDA's `kernelParams`) or as one blob with each value
//! aligned to its size (HIP's `HIP_LAUNCH_PARAM_BUFFER_POINTER`).

use std::ffi::c_void;

use crate::kernel::{ArgExtraTag, ArgKind, FunctionInfo, LaunchConfig, LaunchDims};
use tvm_ffi::abi::{self, DLTensor};
use tvm_ffi::{AnyView, Device, Error, ErrorKind, Result, Tensor};

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

/// Arguments of a call kept in place; a kernel that takes more has them on the heap. TVM's
/// kernels rarely take more than a dozen.
pub const INLINE_ARGS: usize = 16;

/// A list of a length fixed when made, in place when it holds at most `N` items and on the heap
/// past that: what a launch hands the driver (values, their addresses, the aligned blob),
/// without allocating for calls of up to [`INLINE_ARGS`] arguments. (A struct rather than an
/// enum of the two: made where it is used, it is not built elsewhere and copied in.)
#[derive(Debug)]
struct ArgBuffer<T, const N: usize> {
    /// The items, when there are at most `N`: the first `len`.
    inline: [T; N],
    len: usize,
    /// The items, when there are more (else empty, which allocates nothing).
    heap: Vec<T>,
}

impl<T: Copy, const N: usize> ArgBuffer<T, N> {
    /// `len` copies of `fill`.
    #[inline]
    fn filled(len: usize, fill: T) -> Self {
        ArgBuffer {
            inline: [fill; N],
            len,
            heap: if len <= N {
                Vec::new()
            } else {
                vec![fill; len]
            },
        }
    }

    #[inline]
    fn as_slice(&self) -> &[T] {
        if self.len <= N {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len <= N {
            &mut self.inline[..self.len]
        } else {
            &mut self.heap
        }
    }
}

/// One call of a kernel, read: argument values, launch dimensions and the device of its tensors.
#[derive(Debug)]
pub struct KernelCall<'a> {
    signature: &'a KernelSignature,
    values: ArgBuffer<u64, INLINE_ARGS>,
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
    #[inline]
    pub fn num_call_args(&self) -> usize {
        self.kinds.len() + self.launch.num_args()
    }

    /// Reads the arguments of a call and runs `launch` with them. `placement` says where a
    /// tensor of a device type may live. A wrong count, a value of the wrong type or a tensor
    /// the kernel cannot use is an error naming the kernel and the argument, and `launch` does
    /// not run.
    ///
    /// The call is lent to `launch` rather than returned: it lives in this frame, so reading a
    /// call copies nothing (a launch is hot, and a returned call would be moved twice).
    #[inline]
    pub fn read_call<R>(
        &self,
        args: &[AnyView<'_>],
        placement: impl Fn(Device) -> TensorPlacement,
        launch: impl FnOnce(&mut KernelCall<'_>) -> Result<R>,
    ) -> Result<R> {
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
        let (own, launch_args) = args.split_at(self.kinds.len());
        // Made in place and filled there: the values are not moved once read.
        let mut call = KernelCall {
            signature: self,
            values: ArgBuffer::filled(own.len(), 0),
            dims: LaunchDims::default(),
            device: None,
        };
        for (index, ((kind, value), slot)) in self
            .kinds
            .iter()
            .zip(own)
            .zip(call.values.as_mut_slice())
            .enumerate()
        {
            *slot = match kind {
                ArgKind::Handle => self.handle(index, value, &placement, &mut call.device)?,
                scalar => u64::from_le_bytes(scalar.scalar_bytes(&self.name, index, value)?),
            };
        }
        self.launch.read_dims(launch_args, &mut call.dims)?;
        launch(&mut call)
    }

    /// The device address argument `index` stands for.
    #[inline]
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
    /// What a failed launch says before the driver's error: `<backend> launch of kernel `k` on
    /// <device> failed (grid=(..), block=(..), dynamic shared memory=N)`. Made only on failure.
    #[cold]
    pub fn launch_failure(&self, backend: &str, device: Device) -> String {
        let [gx, gy, gz] = self.dims.grid;
        let [bx, by, bz] = self.dims.block;
        let shared = self.dims.dyn_shared_memory;
        format!(
            "{backend} launch of kernel `{}` on {device} failed (grid=({gx}, {gy}, {gz}), \
             block=({bx}, {by}, {bz}), dynamic shared memory={shared})",
            self.kernel()
        )
    }

    /// The kernel's name.
    #[inline]
    pub fn kernel(&self) -> &str {
        &self.signature.name
    }

    /// The argument values, 8 bytes each (32-bit scalars in the low 4).
    #[inline]
    pub fn values(&self) -> &[u64] {
        self.values.as_slice()
    }

    /// Calls `launch` with an array of one address per argument, pointing at its value
    /// (CUDA's `kernelParams`), except for arguments passed by address (tensor maps), whose
    /// value is the address itself; NULL for a kernel without arguments. The array and the
    /// values are valid during `launch`.
    #[inline]
    pub fn with_addresses<R>(&mut self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
        let values = self.values.as_mut_slice();
        let mut addresses = ArgBuffer::<_, INLINE_ARGS>::filled(values.len(), std::ptr::null_mut());
        let by_address = &self.signature.by_address;
        for ((address, value), by_address) in addresses
            .as_mut_slice()
            .iter_mut()
            .zip(values)
            .zip(by_address)
        {
            *address = if *by_address {
                *value as *mut c_void
            } else {
                (value as *mut u64).cast()
            };
        }
        let addresses = addresses.as_mut_slice();
        launch(if addresses.is_empty() {
            std::ptr::null_mut()
        } else {
            addresses.as_mut_ptr()
        })
    }

    /// Calls `launch` with the arguments as one blob in C struct layout: each value aligned to
    /// its own size (TVM's `PackFuncPackedArgAligned`).
    #[inline]
    pub fn with_aligned_blob<R>(&self, launch: impl FnOnce(&mut [u8]) -> R) -> R {
        let values = self.values.as_slice();
        // Each value takes at most 8 bytes with its padding (sizes are 4 or 8).
        let mut blob = ArgBuffer::<u8, { 8 * INLINE_ARGS }>::filled(values.len() * 8, 0);
        let bytes = blob.as_mut_slice();
        // Sizes are 4 or 8, so the end is always 4-aligned: a 4-byte value goes right there, an
        // 8-byte one after padding to 8. (Copies of a fixed size: a launch is hot.)
        let mut end = 0usize;
        for (value, kind) in values.iter().zip(&self.signature.kinds) {
            end = if kind.size() == 4 {
                bytes[end..end + 4].copy_from_slice(&(*value as u32).to_le_bytes());
                end + 4
            } else {
                let start = end.next_multiple_of(8);
                bytes[start..start + 8].copy_from_slice(&value.to_le_bytes());
                start + 8
            };
        }
        launch(&mut bytes[..end])
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
        let (values, blob, first) = signature
            .read_call(&views, everything_on_device, |call| {
                assert_eq!(call.dims.grid, [3, 1, 1]);
                let blob = call.with_aligned_blob(|blob| blob.to_vec());
                // SAFETY: each address points at the call's value of that argument.
                let first = call.with_addresses(|addresses| unsafe { *(*addresses as *const i32) });
                Ok((call.values().to_vec(), blob, first))
            })
            .unwrap();
        assert_eq!(values[0], 7);
        assert_eq!(values[1], 0x1000);
        assert_eq!(values[2], u64::from(1.5f32.to_bits()));
        // int32 at 0, pointer at 8, float at 16, int64 at 24.
        assert_eq!(blob.len(), 32);
        assert_eq!(&blob[0..4], &7i32.to_le_bytes());
        assert_eq!(&blob[8..16], &0x1000u64.to_le_bytes());
        assert_eq!(&blob[16..20], &1.5f32.to_le_bytes());
        assert_eq!(&blob[24..32], &(-2i64).to_le_bytes());
        assert_eq!(first, 7);
    }

    #[test]
    fn calls_past_the_inline_arguments_pack_alike() {
        // 2 * INLINE_ARGS arguments, int32 and pointer in turn: the values, their addresses and
        // the blob live on the heap, laid out as for a short call.
        let types: Vec<&str> = (0..INLINE_ARGS).flat_map(|_| ["int32", "handle"]).collect();
        let signature = KernelSignature::new(&info(&types, &[])).unwrap();
        let args: Vec<Any> = (0..INLINE_ARGS)
            .flat_map(|i| [Any::from(i as i64), Any::from((0x1000 + i) as *mut c_void)])
            .collect();
        let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
        signature
            .read_call(&views, everything_on_device, |call| {
                assert_eq!(call.values().len(), 2 * INLINE_ARGS);
                assert_eq!(
                    call.values()[2 * INLINE_ARGS - 1],
                    0x1000 + INLINE_ARGS as u64 - 1
                );
                let blob = call.with_aligned_blob(|blob| blob.to_vec());
                assert_eq!(blob.len(), 16 * INLINE_ARGS);
                let last = 16 * INLINE_ARGS - 16;
                assert_eq!(
                    &blob[last..last + 4],
                    &(INLINE_ARGS as i32 - 1).to_le_bytes()
                );
                assert_eq!(
                    &blob[last + 8..],
                    &(0x1000 + INLINE_ARGS as u64 - 1).to_le_bytes()
                );
                let read = call.with_addresses(|addresses| {
                    // SAFETY: one address per argument, each pointing at its value.
                    let addresses =
                        unsafe { std::slice::from_raw_parts(addresses, 2 * INLINE_ARGS) };
                    // SAFETY: as above.
                    let read = |a: &*mut c_void| unsafe { *(*a as *const u64) };
                    addresses.iter().map(read).collect::<Vec<_>>()
                });
                assert_eq!(read, call.values());
                Ok(())
            })
            .unwrap();
        let empty = KernelSignature::new(&info(&[], &[])).unwrap();
        empty
            .read_call(&[], everything_on_device, |call| {
                assert!(call.with_addresses(|addresses| addresses.is_null()));
                assert!(call.with_aligned_blob(|blob| blob.is_empty()));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn wrong_counts_and_types_name_the_kernel_and_launch_nothing() {
        let signature = KernelSignature::new(&info(&["handle"], &["threadIdx.x"])).unwrap();
        let launched = |_: &mut KernelCall<'_>| -> Result<()> { panic!("launched a bad call") };
        let one = [Any::from(1i64)];
        let views: Vec<AnyView<'_>> = one.iter().map(Any::as_view).collect();
        let err = signature
            .read_call(&views, everything_on_device, launched)
            .unwrap_err();
        assert!(err.is_kind(ErrorKind::TypeError) && err.message().contains("takes 2"));
        let two = [Any::from("text"), Any::from(1i64)];
        let views: Vec<AnyView<'_>> = two.iter().map(Any::as_view).collect();
        let err = signature
            .read_call(&views, everything_on_device, launched)
            .unwrap_err();
        assert!(
            err.message().contains("argument 0 must be a tensor"),
            "{err}"
        );
        let zero_block = [Any::from(std::ptr::null_mut::<c_void>()), Any::from(0i64)];
        let views: Vec<AnyView<'_>> = zero_block.iter().map(Any::as_view).collect();
        let err = signature
            .read_call(&views, everything_on_device, launched)
            .unwrap_err();
        assert!(
            err.is_kind(ErrorKind::ValueError)
                && err
                    .message()
                    .contains("launch argument threadIdx.x is 0, outside 1..=4294967295"),
            "{err}"
        );
    }
}
