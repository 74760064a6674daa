//! The backend kit: what the device backends of the runtime share, written once.
//!
//! - [`kernel`]: kernel metadata ([`kernel::FunctionInfo`]), the launch convention
//!   ([`kernel::LaunchConfig`]: which call arguments are grid and block dimensions), how scalar
//!   arguments are packed ([`kernel::ArgKind`]), and the binary container of serialized device
//!   modules ([`kernel::BinaryReader`], [`kernel::KernelCodeMap`]);
//! - [`driver`]: the half for backends that drive a vendor library through its C API (CUDA's
//!   driver API, HIP): the library opened at run time, state per device, launch arguments,
//!   copies through the driver, the device module loaded per device, and streams, events,
//!   device queries and kernel lookup through the entry points both vendors share;
//! - [`buffer`]: the half for backends whose tensors hold buffer handles (Vulkan, WebGPU): the
//!   handle → buffer table, the copy plan, the default-stream-only device API, kernel binding,
//!   the shader-map module, the backend's errors;
//! - [`registration`]: the one registration shape of every backend crate
//!   ([`backend_registration!`]: `register()`, `register_backend(backend)`,
//!   `registered_backend()`, with the backend read by `<Backend>::from_env()`);
//! - `testing` (feature `testing`): the fake drivers of the driver backends' tests, built from
//!   the C sources of `fake/` (the host-memory GPU `gpu_fake.h`, the kernels library
//!   `kernels.c`, and one fake vendor library per backend: `libcuda_fake.c`, `libhip_fake.c`),
//!   and checks every backend of a half passes.
//!
//! # A backend is one folder with this file map
//!
//! A driver-API backend (`device-cuda`, `device-rocm`; Metal or OpenCL through their C APIs
//! would be one too):
//!
//! | file | holds |
//! | --- | --- |
//! | `lib.rs` | the crate's map, `<Name>Backend`, its device API aliases over [`driver::device_api`], and `install` behind [`backend_registration!`] |
//! | the driver table (`driver.rs`, `hip.rs`) | the vendor library's entry points ([`driver_table!`] and the names of the [`driver::shared_calls::SharedCalls`]), its [`driver::runtime::RuntimeNames`], versions and error text ([`driver::runtime::VendorErrors`]) |
//! | `runtime.rs` | the vendor runtime as a [`driver::runtime::GpuRuntime`]: device binding, memory, flat copies (streams, events and kernel lookup come from [`driver::shared_ops::SharedOps`]) |
//! | `module.rs` | the [`driver::module::KernelBackend`]: code loaded per device, launches, the module loaders |
//! | attributes (`api.rs`, `attributes.rs`) | the device attributes through [`driver::attributes`] |
//!
//! A buffer-handle backend (`device-vulkan`, `device-webgpu`; a Metal backend over buffers
//! would be one too):
//!
//! | file | holds |
//! | --- | --- |
//! | `lib.rs` | the crate's map, `<Name>DeviceApi` (= [`buffer::BufferDeviceApi`]`<<Name>Backend>`), `install` ([`registration::install_buffer_backend`] with `module.rs`'s loaders) behind [`backend_registration!`] |
//! | `backend.rs` | `<Name>Backend`: the [`buffer::BufferBackend`] (devices by index, attributes, allocation) |
//! | `instance.rs` | the vendor library opened and its devices listed, on first use |
//! | `device.rs` | one device and its queue, created on first use (again after a loss) |
//! | `memory.rs` | `<Name>Buffer`: the [`buffer::DeviceBuffer`] (host access, device copies) |
//! | `launch.rs` | `<Name>Kernel`: the [`buffer::ShaderKernel`] (pipelines per device, dispatch) |
//! | `module.rs` | the module kind: its serialized form and files, over [`buffer::ShaderModule`] |
//! | the shader reader (`spirv.rs`, `wgsl.rs`) | a shader's compute entry points |
//! | `error.rs` | the backend's failure in [`buffer::BackendError`] |
//!
//! Each backend implements only what is its own (its vendor calls); everything above those
//! traits lives here.

pub mod buffer;
pub mod driver;
pub mod kernel;
pub mod registration;
#[cfg(feature = "testing")]
pub mod testing;

// Unit tests run in a binary of their own, which links the process state.
#[cfg(test)]
use tvm_ffi_capi as _;
