//! The backend kit: what the device backends of the runtime share, written once.
//!
//! - [`kernel`]: kernel metadata ([`kernel::FunctionInfo`]), the launch convention
//!   ([`kernel::LaunchConfig`]: which call arguments are grid and block dimensions), how scalar
//!   arguments are packed ([`kernel::ArgKind`]), and the binary container of serialized device
//!   modules ([`kernel::BinaryReader`], [`kernel::KernelCodeMap`]);
//! - [`driver`]: the half for backends that drive a vendor library through its C API (CUDA's
//!   driver API, HIP): the library opened at run time, state per device, launch arguments,
//!   copies through the driver, the device module loaded per device;
//! - [`buffer`]: the half for backends whose tensors hold buffer handles (Vulkan, WebGPU): the
//!   handle → buffer table, the copy plan, the default-stream-only device API, kernel binding,
//!   the shader-map module, the backend's errors;
//! - [`registration`]: the one registration shape of every backend crate;
//! - `testing` (feature `testing`): the fake drivers of the driver backends' tests, built from
//!   the C sources of `fake/` (the host-memory GPU `gpu_fake.h`, the kernels library
//!   `kernels.c`, and one fake vendor library per backend).

pub mod buffer;
pub mod driver;
pub mod kernel;
pub mod registration;
#[cfg(feature = "testing")]
pub mod testing;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;
