//! Devices ([`DLDevice`]): names of the DLPack device types and the [`Device`] wrapper.
//!
//! A device string is `TYPE[:ID]`, for example `cpu`, `cuda:1` or `rocm:0`; the id defaults to 0.

use std::fmt;
use std::str::FromStr;

use crate::abi::{
    DLDevice, kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLExtDev, kDLHexagon, kDLMAIA,
    kDLMetal, kDLOneAPI, kDLOpenCL, kDLROCM, kDLROCMHost, kDLTrn, kDLVPI, kDLVulkan, kDLWebGPU,
};

/// Canonical name of every DLPack 1.3 device type.
const DEVICE_NAMES: [(i32, &str); 16] = [
    (kDLCPU, "cpu"),
    (kDLCUDA, "cuda"),
    (kDLCUDAHost, "cuda_host"),
    (kDLOpenCL, "opencl"),
    (kDLVulkan, "vulkan"),
    (kDLMetal, "metal"),
    (kDLVPI, "vpi"),
    (kDLROCM, "rocm"),
    (kDLROCMHost, "rocm_host"),
    (kDLExtDev, "ext_dev"),
    (kDLCUDAManaged, "cuda_managed"),
    (kDLOneAPI, "oneapi"),
    (kDLWebGPU, "webgpu"),
    (kDLHexagon, "hexagon"),
    (kDLMAIA, "maia"),
    (kDLTrn, "trn"),
];

/// Further names accepted when parsing (target names that imply a device).
const DEVICE_ALIASES: [(&str, i32); 5] = [
    ("llvm", kDLCPU),
    ("c", kDLCPU),
    ("gpu", kDLCUDA),
    ("nvptx", kDLCUDA),
    ("cl", kDLOpenCL),
];

/// The canonical name of a device type (`2` → `"cuda"`), or `None` for an unknown type.
pub fn device_type_name(t: i32) -> Option<&'static str> {
    DEVICE_NAMES
        .iter()
        .find(|entry| entry.0 == t)
        .map(|entry| entry.1)
}

/// The device type for a name (`"cuda"`, `"gpu"` → 2); accepts canonical names and aliases.
pub fn device_type_from_name(name: &str) -> Option<i32> {
    DEVICE_NAMES
        .iter()
        .find(|entry| entry.1 == name)
        .map(|entry| entry.0)
        .or_else(|| {
            DEVICE_ALIASES
                .iter()
                .find(|entry| entry.0 == name)
                .map(|entry| entry.1)
        })
}

/// A [`DLDevice`] with string conversion and convenience constructors.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Device(pub DLDevice);

impl Device {
    /// A device from its DLPack device type and id.
    pub const fn new(device_type: i32, id: i32) -> Self {
        Self(DLDevice {
            device_type,
            device_id: id,
        })
    }

    /// CPU device `id`.
    pub const fn cpu(id: i32) -> Self {
        Self::new(kDLCPU, id)
    }

    /// CUDA device `id`.
    pub const fn cuda(id: i32) -> Self {
        Self::new(kDLCUDA, id)
    }

    /// ROCm device `id`.
    pub const fn rocm(id: i32) -> Self {
        Self::new(kDLROCM, id)
    }

    /// Vulkan device `id`.
    pub const fn vulkan(id: i32) -> Self {
        Self::new(kDLVulkan, id)
    }

    /// Metal device `id`.
    pub const fn metal(id: i32) -> Self {
        Self::new(kDLMetal, id)
    }

    /// WebGPU device `id`.
    pub const fn webgpu(id: i32) -> Self {
        Self::new(kDLWebGPU, id)
    }

    /// OpenCL device `id`.
    pub const fn opencl(id: i32) -> Self {
        Self::new(kDLOpenCL, id)
    }

    /// The DLPack device type.
    pub const fn device_type(self) -> i32 {
        self.0.device_type
    }

    /// The device id.
    pub const fn device_id(self) -> i32 {
        self.0.device_id
    }
}

impl FromStr for Device {
    type Err = String;

    /// Parses `TYPE[:ID]`, where TYPE is a name accepted by [`device_type_from_name`] or
    /// `device(N)` (as printed for unknown types) and ID is an `i32` (default 0), optionally
    /// after `remote[K]:` (a device of RPC session K, as printed).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix("remote[") {
            let session = rest
                .split_once("]:")
                .and_then(|(k, local)| Some((k.parse::<i32>().ok()?, local)));
            let (session, local) =
                session.ok_or_else(|| format!("unknown device type in `{s}`"))?;
            let local = Device::from_str(local).map_err(|_| format!("invalid device `{s}`"))?;
            let device_type = session
                .checked_add(1)
                .and_then(|k| k.checked_mul(128))
                .and_then(|mask| mask.checked_add(local.device_type()))
                .filter(|_| (0..128).contains(&local.device_type()) && session >= 0)
                .ok_or_else(|| format!("invalid remote device in `{s}`"))?;
            return Ok(Self::new(device_type, local.device_id()));
        }
        let (type_part, id_part) = match s.split_once(':') {
            Some((t, id)) => (t, Some(id)),
            None => (s, None),
        };
        let device_type = device_type_from_name(type_part)
            .or_else(|| {
                let number = type_part.strip_prefix("device(")?.strip_suffix(')')?;
                number.parse::<i32>().ok()
            })
            .ok_or_else(|| format!("unknown device type in `{s}`"))?;
        let id = match id_part {
            None => 0,
            Some(id) => id
                .parse::<i32>()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| format!("invalid device id in `{s}`: must be an int >= 0"))?,
        };
        Ok(Self::new(device_type, id))
    }
}

impl fmt::Display for Device {
    /// Prints `cuda:1`, `remote[0]:cpu:0` for a device of RPC session 0 (types from 128 up),
    /// or `device(99):0` for a type without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.device_type >= 128 {
            let session = self.0.device_type / 128 - 1;
            let local = Device::new(self.0.device_type % 128, self.0.device_id);
            return write!(f, "remote[{session}]:{local}");
        }
        match device_type_name(self.0.device_type) {
            Some(name) => write!(f, "{name}:{}", self.0.device_id),
            None => write!(f, "device({}):{}", self.0.device_type, self.0.device_id),
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<DLDevice> for Device {
    fn from(d: DLDevice) -> Self {
        Self(d)
    }
}

impl From<Device> for DLDevice {
    fn from(d: Device) -> Self {
        d.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_every_device_type() {
        let expected = [
            (1, "cpu"),
            (2, "cuda"),
            (3, "cuda_host"),
            (4, "opencl"),
            (7, "vulkan"),
            (8, "metal"),
            (9, "vpi"),
            (10, "rocm"),
            (11, "rocm_host"),
            (12, "ext_dev"),
            (13, "cuda_managed"),
            (14, "oneapi"),
            (15, "webgpu"),
            (16, "hexagon"),
            (17, "maia"),
            (18, "trn"),
        ];
        for (t, name) in expected {
            assert_eq!(device_type_name(t), Some(name));
            assert_eq!(device_type_from_name(name), Some(t));
        }
        for t in [-1, 0, 5, 6, 19, 99] {
            assert_eq!(device_type_name(t), None);
        }
    }

    #[test]
    fn aliases() {
        for (name, t) in [
            ("llvm", 1),
            ("c", 1),
            ("cpu", 1),
            ("gpu", 2),
            ("nvptx", 2),
            ("cl", 4),
            ("cuda", 2),
        ] {
            assert_eq!(device_type_from_name(name), Some(t), "{name}");
        }
        assert_eq!(device_type_from_name("CUDA"), None);
        assert_eq!(device_type_from_name(""), None);
    }

    #[test]
    fn parse_and_print() {
        assert_eq!("cuda".parse::<Device>(), Ok(Device::cuda(0)));
        assert_eq!("cuda:1".parse::<Device>(), Ok(Device::cuda(1)));
        assert_eq!("cpu:0".parse::<Device>(), Ok(Device::cpu(0)));
        assert_eq!("gpu:3".parse::<Device>(), Ok(Device::cuda(3)));
        assert_eq!("device(99):2".parse::<Device>(), Ok(Device::new(99, 2)));
        assert_eq!(Device::cuda(1).to_string(), "cuda:1");
        assert_eq!(Device::new(99, 0).to_string(), "device(99):0");
        assert_eq!(format!("{:?}", Device::rocm(2)), "rocm:2");
        for d in [
            Device::cpu(0),
            Device::vulkan(1),
            Device::metal(2),
            Device::webgpu(3),
            Device::opencl(4),
            Device::new(kDLTrn, 7),
            Device::new(-5, 0),
        ] {
            assert_eq!(d.to_string().parse::<Device>(), Ok(d));
        }
    }

    #[test]
    fn parse_errors_name_the_input() {
        for (input, message) in [
            ("cdua:0", "unknown device type in `cdua:0`"),
            ("", "unknown device type in ``"),
            (":1", "unknown device type in `:1`"),
            ("device(x):0", "unknown device type in `device(x):0`"),
            ("cuda:", "invalid device id in `cuda:`: must be an int >= 0"),
            (
                "cuda:-1",
                "invalid device id in `cuda:-1`: must be an int >= 0",
            ),
            (
                "cuda:one",
                "invalid device id in `cuda:one`: must be an int >= 0",
            ),
            (
                "cuda:1:2",
                "invalid device id in `cuda:1:2`: must be an int >= 0",
            ),
            (
                "cuda: 1",
                "invalid device id in `cuda: 1`: must be an int >= 0",
            ),
        ] {
            assert_eq!(input.parse::<Device>(), Err(message.to_string()));
        }
    }

    #[test]
    fn accessors_and_conversions() {
        let d = Device::new(kDLCUDA, 3);
        assert_eq!((d.device_type(), d.device_id()), (2, 3));
        let raw: DLDevice = d.into();
        assert_eq!(
            raw,
            DLDevice {
                device_type: 2,
                device_id: 3
            }
        );
        assert_eq!(Device::from(raw), d);
    }
}

/// What a device can be asked about (a backend's `DeviceApi::attr` in `tvm-runtime`); the numbering is TVM's
/// `DeviceAttrKind`, so that a C backend and apache-tvm-ffi agree on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DeviceAttr {
    /// Whether the device exists (an int, 0 or 1). Every backend answers it for any index.
    Exist = 0,
    /// Most threads in one block (int).
    MaxThreadsPerBlock = 1,
    /// Threads that run in lockstep (int).
    WarpSize = 2,
    /// Shared memory one block may use, in bytes (int).
    MaxSharedMemoryPerBlock = 3,
    /// The compute capability or architecture version, such as "8.0" (str).
    ComputeVersion = 4,
    /// The device's name (str).
    DeviceName = 5,
    /// The highest clock rate, in kHz (int).
    MaxClockRate = 6,
    /// Streaming multiprocessors or compute units (int).
    MultiProcessorCount = 7,
    /// Largest block extent per dimension, as "[x, y, z]" (str).
    MaxThreadDimensions = 8,
    /// Registers available to one block (int).
    MaxRegistersPerBlock = 9,
    /// The GCN architecture of an AMD GPU (int).
    GcnArch = 10,
    /// The driver API's version (int).
    ApiVersion = 11,
    /// The driver's version (int or str).
    DriverVersion = 12,
    /// Size of the L2 cache, in bytes (int).
    L2CacheSizeBytes = 13,
    /// Total device memory, in bytes (int).
    TotalGlobalMemory = 14,
    /// Device memory not in use, in bytes (int).
    AvailableGlobalMemory = 15,
    /// Pitch alignment of images, in bytes (int).
    ImagePitchAlignment = 16,
}

impl DeviceAttr {
    /// Every attribute, in numbering order.
    pub const ALL: [DeviceAttr; 17] = [
        DeviceAttr::Exist,
        DeviceAttr::MaxThreadsPerBlock,
        DeviceAttr::WarpSize,
        DeviceAttr::MaxSharedMemoryPerBlock,
        DeviceAttr::ComputeVersion,
        DeviceAttr::DeviceName,
        DeviceAttr::MaxClockRate,
        DeviceAttr::MultiProcessorCount,
        DeviceAttr::MaxThreadDimensions,
        DeviceAttr::MaxRegistersPerBlock,
        DeviceAttr::GcnArch,
        DeviceAttr::ApiVersion,
        DeviceAttr::DriverVersion,
        DeviceAttr::L2CacheSizeBytes,
        DeviceAttr::TotalGlobalMemory,
        DeviceAttr::AvailableGlobalMemory,
        DeviceAttr::ImagePitchAlignment,
    ];

    /// The attribute with TVM's number `code`, if there is one.
    pub fn from_code(code: i32) -> Option<DeviceAttr> {
        DeviceAttr::ALL.into_iter().find(|a| *a as i32 == code)
    }

    /// The attribute's snake-case name, as Python spells it (`max_threads_per_block`).
    pub const fn name(self) -> &'static str {
        match self {
            DeviceAttr::Exist => "exist",
            DeviceAttr::MaxThreadsPerBlock => "max_threads_per_block",
            DeviceAttr::WarpSize => "warp_size",
            DeviceAttr::MaxSharedMemoryPerBlock => "max_shared_memory_per_block",
            DeviceAttr::ComputeVersion => "compute_version",
            DeviceAttr::DeviceName => "device_name",
            DeviceAttr::MaxClockRate => "max_clock_rate",
            DeviceAttr::MultiProcessorCount => "multi_processor_count",
            DeviceAttr::MaxThreadDimensions => "max_thread_dimensions",
            DeviceAttr::MaxRegistersPerBlock => "max_registers_per_block",
            DeviceAttr::GcnArch => "gcn_arch",
            DeviceAttr::ApiVersion => "api_version",
            DeviceAttr::DriverVersion => "driver_version",
            DeviceAttr::L2CacheSizeBytes => "l2_cache_size_bytes",
            DeviceAttr::TotalGlobalMemory => "total_global_memory",
            DeviceAttr::AvailableGlobalMemory => "available_global_memory",
            DeviceAttr::ImagePitchAlignment => "image_pitch_alignment",
        }
    }
}

impl fmt::Display for DeviceAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
