//! The half of the kit for backends that drive a vendor library through its C API (CUDA's
//! driver API, HIP):
//!
//! - [`DriverLibrary`] and [`driver_table!`](crate::driver_table): the vendor library opened at
//!   run time with `dlopen`, its entry points resolved into a table of function pointers, and
//!   errors that say which file was looked for and why it did not load;
//! - [`PerDevice`]: state created lazily, once per device index (contexts, loaded modules);
//! - [`args`]: the arguments of a kernel call turned into what the launch API takes (an array of
//!   argument addresses, or one aligned blob), tensors checked to live on the launch device;
//! - [`attributes`]: the device attributes read one vendor attribute number each;
//! - [`copy`]: copies between host and device memory with any strides and byte offsets, flat
//!   copies straight through the driver and the others through host staging;
//! - [`runtime`] and [`device_api`]: a vendor runtime behind one interface, opened on first
//!   use, and the device API of its devices and of its pinned host memory;
//! - [`shared_calls`] and [`shared_ops`]: the entry points both vendor APIs have in one shape,
//!   and what the kit does through them (streams, events, device queries, kernel lookup);
//! - [`launch`]: the launch entry points both vendor APIs have, called with a launch's
//!   dimensions;
//! - [`module`]: a device module (kind, format, kernel metadata, code) whose code is loaded on
//!   each device at its first use, its serialized form and its files.

pub mod args;
pub mod attributes;
pub mod copy;
pub mod device_api;
pub mod launch;
mod library;
pub mod module;
mod per_device;
pub mod runtime;
pub mod shared_calls;
pub mod shared_ops;

pub use library::DriverLibrary;
pub use per_device::PerDevice;
