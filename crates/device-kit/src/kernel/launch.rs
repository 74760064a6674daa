//! The launch convention GPU backends share. A kernel is called with its own arguments (in
//! `arg_types` order), then one integer per launch dimension tag (grid, block, cluster), in tag
//! order, then the dynamic shared memory size when its tag (always the last) is present.

use tvm_ffi::abi::{kDLFloat, kDLInt, kDLOpaqueHandle, kDLUInt};
use tvm_ffi::{AnyView, DataType, Error, ErrorKind, Result, TryFromAnyView};

use super::info::FunctionInfo;

/// What a launch dimension tag sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dimension {
    /// `blockIdx.{x,y,z}`.
    Grid(usize),
    /// `threadIdx.{x,y,z}`.
    Block(usize),
    /// `clusterCtaIdx.{x,y,z}`.
    Cluster(usize),
    /// `preferredClusterCtaIdx.{x,y,z}`.
    PreferredCluster(usize),
}

/// Tag of the dynamic shared memory size argument; it must be the last tag.
pub const DYN_SHARED_MEMORY_TAG: &str = "tirx.use_dyn_shared_memory";
/// Tag asking for a cooperative launch (no argument).
pub const COOPERATIVE_LAUNCH_TAG: &str = "tirx.use_cooperative_launch";
/// Tag asking for programmatic dependent launch (no argument).
pub const PROGRAMMATIC_DEPENDENT_LAUNCH_TAG: &str = "tirx.use_programtic_dependent_launch";

/// How a kernel's launch arguments are read, from its tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    kernel: String,
    dimensions: Vec<(Dimension, String)>,
    dyn_shared_memory: bool,
    cooperative: bool,
    programmatic_dependent_launch: bool,
}

/// The dimensions of one launch. Unset dimensions are 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks per grid, x y z.
    pub grid: [u32; 3],
    /// Threads per block, x y z.
    pub block: [u32; 3],
    /// Blocks per cluster (all 1: no clusters).
    pub cluster: [u32; 3],
    /// Preferred blocks per cluster (all 1: none).
    pub preferred_cluster: [u32; 3],
    /// Bytes of dynamic shared memory.
    pub dyn_shared_memory: u32,
    /// Whether the launch is cooperative.
    pub cooperative: bool,
    /// Whether programmatic dependent launch is asked for.
    pub programmatic_dependent_launch: bool,
}

impl Default for LaunchDims {
    /// One block of one thread, no dynamic shared memory, none of the launch features.
    fn default() -> LaunchDims {
        LaunchDims {
            grid: [1; 3],
            block: [1; 3],
            cluster: [1; 3],
            preferred_cluster: [1; 3],
            dyn_shared_memory: 0,
            cooperative: false,
            programmatic_dependent_launch: false,
        }
    }
}

impl LaunchDims {
    /// Number of grid and block dimensions used (1 to 3): the highest one not 1, plus one.
    pub fn work_dim(&self) -> usize {
        (0..3)
            .rev()
            .find(|&i| self.grid[i] != 1 || self.block[i] != 1)
            .map_or(1, |i| i + 1)
    }

    /// Total threads of the launch, or `None` past `u64`.
    pub fn total_threads(&self) -> Option<u64> {
        self.grid
            .iter()
            .chain(&self.block)
            .try_fold(1u64, |acc, d| acc.checked_mul(u64::from(*d)))
    }
}

fn axis(suffix: &str) -> Option<usize> {
    match suffix {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    }
}

fn dimension_of(tag: &str) -> Option<Dimension> {
    let (scope, suffix) = tag.rsplit_once('.')?;
    let index = axis(suffix)?;
    Some(match scope {
        "blockIdx" => Dimension::Grid(index),
        "threadIdx" => Dimension::Block(index),
        "clusterCtaIdx" => Dimension::Cluster(index),
        "preferredClusterCtaIdx" => Dimension::PreferredCluster(index),
        _ => return None,
    })
}

impl LaunchConfig {
    /// The configuration of kernel `kernel` with launch tags `tags`; an unknown tag, or the
    /// dynamic shared memory tag anywhere but last, is a `ValueError` naming it.
    pub fn new(kernel: &str, tags: &[String]) -> Result<LaunchConfig> {
        let mut config = LaunchConfig {
            kernel: kernel.to_owned(),
            dimensions: Vec::new(),
            dyn_shared_memory: false,
            cooperative: false,
            programmatic_dependent_launch: false,
        };
        for (position, tag) in tags.iter().enumerate() {
            if let Some(dimension) = dimension_of(tag) {
                config.dimensions.push((dimension, tag.clone()));
            } else if tag == DYN_SHARED_MEMORY_TAG {
                if position + 1 != tags.len() {
                    tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "kernel `{kernel}`: {DYN_SHARED_MEMORY_TAG} must be the last launch tag"
                    );
                }
                config.dyn_shared_memory = true;
            } else if tag == COOPERATIVE_LAUNCH_TAG {
                config.cooperative = true;
            } else if tag == PROGRAMMATIC_DEPENDENT_LAUNCH_TAG {
                config.programmatic_dependent_launch = true;
            } else if !(tag.starts_with("vthread") || tag == "cthread") {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "kernel `{kernel}`: unknown launch tag {tag:?} (blockIdx.*, threadIdx.*, \
                     clusterCtaIdx.*, preferredClusterCtaIdx.*, vthread*, {DYN_SHARED_MEMORY_TAG}, \
                     {COOPERATIVE_LAUNCH_TAG} or {PROGRAMMATIC_DEPENDENT_LAUNCH_TAG})"
                );
            }
        }
        Ok(config)
    }

    /// The configuration of the kernel `info` describes.
    pub fn of(info: &FunctionInfo) -> Result<LaunchConfig> {
        LaunchConfig::new(&info.name, &info.launch_param_tags)
    }

    /// Number of launch arguments that follow the kernel's own.
    pub fn num_args(&self) -> usize {
        self.dimensions.len() + usize::from(self.dyn_shared_memory)
    }

    /// Refuses a call of kernel `info` (launched by this configuration) with `count` values
    /// instead of its arguments followed by its launch parameters: a `TypeError` naming both.
    pub fn check_arg_count(&self, info: &FunctionInfo, count: usize) -> Result<()> {
        let nargs = info.arg_types.len();
        if count != nargs + self.num_args() {
            return Err(Error::new(
                ErrorKind::TypeError,
                format!(
                    "kernel `{}` takes {nargs} arguments and {} launch parameters ({}), got \
                     {count} values",
                    info.name,
                    self.num_args(),
                    info.launch_param_tags.join(", "),
                ),
            ));
        }
        Ok(())
    }

    /// Whether the launch takes a dynamic shared memory size.
    pub fn uses_dyn_shared_memory(&self) -> bool {
        self.dyn_shared_memory
    }

    /// Whether a tag sets the block size along `axis` (0 = x), rather than leaving it 1.
    pub fn sets_block(&self, axis: usize) -> bool {
        self.dimensions
            .iter()
            .any(|(dimension, _)| *dimension == Dimension::Block(axis))
    }

    /// Whether any tag asks for thread-block clusters (plain or preferred), a cooperative
    /// launch or programmatic dependent launch: what only some backends offer.
    pub fn uses_launch_features(&self) -> bool {
        self.cooperative
            || self.programmatic_dependent_launch
            || self.dimensions.iter().any(|(dimension, _)| {
                matches!(
                    dimension,
                    Dimension::Cluster(_) | Dimension::PreferredCluster(_)
                )
            })
    }

    /// The dimensions of a launch from its launch arguments (the tail of a call's arguments,
    /// [`LaunchConfig::num_args`] of them). A dimension of zero or past `u32` is a
    /// `ValueError` naming the tag and the value.
    pub fn dims(&self, launch_args: &[AnyView<'_>]) -> Result<LaunchDims> {
        let mut dims = LaunchDims::default();
        self.read_dims(launch_args, &mut dims)?;
        Ok(dims)
    }

    /// [`LaunchConfig::dims`] written into `dims` (all of it), for a caller that keeps the
    /// dimensions in a larger value: a launch is hot, and this copies nothing.
    #[inline]
    pub fn read_dims(&self, launch_args: &[AnyView<'_>], dims: &mut LaunchDims) -> Result<()> {
        if launch_args.len() != self.num_args() {
            return Err(self.wrong_count(launch_args.len()));
        }
        *dims = LaunchDims {
            cooperative: self.cooperative,
            programmatic_dependent_launch: self.programmatic_dependent_launch,
            ..LaunchDims::default()
        };
        for ((dimension, tag), value) in self.dimensions.iter().zip(launch_args) {
            let value = self.extent(tag, value, 1)?;
            match *dimension {
                Dimension::Grid(i) => dims.grid[i] = value,
                Dimension::Block(i) => dims.block[i] = value,
                Dimension::Cluster(i) => dims.cluster[i] = value,
                Dimension::PreferredCluster(i) => dims.preferred_cluster[i] = value,
            }
        }
        if self.dyn_shared_memory {
            let last = &launch_args[launch_args.len() - 1];
            dims.dyn_shared_memory = self.extent(DYN_SHARED_MEMORY_TAG, last, 0)?;
        }
        Ok(())
    }

    /// The launch argument of `tag`, at least `least`. Launches are hot: the errors are made
    /// out of line, only when there is one.
    #[inline]
    fn extent(&self, tag: &str, value: &AnyView<'_>, least: u32) -> Result<u32> {
        let Some(number) = i64::try_from_view(value) else {
            return Err(self.not_an_int(tag, value));
        };
        match u32::try_from(number) {
            Ok(extent) if extent >= least => Ok(extent),
            _ => Err(self.out_of_range(tag, number, least)),
        }
    }

    #[cold]
    fn wrong_count(&self, got: usize) -> Error {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "kernel `{}` takes {} launch arguments after its own, got {got}",
                self.kernel,
                self.num_args()
            ),
        )
    }

    #[cold]
    fn not_an_int(&self, tag: &str, value: &AnyView<'_>) -> Error {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "kernel `{}`: launch argument {tag} must be an int, got {}",
                self.kernel,
                value.type_key()
            ),
        )
    }

    #[cold]
    fn out_of_range(&self, tag: &str, number: i64, least: u32) -> Error {
        Error::new(
            ErrorKind::ValueError,
            format!(
                "kernel `{}`: launch argument {tag} is {number}, outside {least}..={}",
                self.kernel,
                u32::MAX
            ),
        )
    }
}

/// How a kernel argument travels to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A tensor or pointer: a device address or buffer.
    Handle,
    /// A 64-bit signed integer.
    Int64,
    /// A 32-bit signed integer (narrowed from the call's int, checked).
    Int32,
    /// A 32-bit unsigned integer (checked).
    UInt32,
    /// A double.
    Float64,
    /// A float (narrowed from the call's float).
    Float32,
}

impl ArgKind {
    /// The kind of argument `index` of `kernel`, of type `dtype`; types a device function cannot
    /// take are a `TypeError` naming them.
    pub fn of(kernel: &str, index: usize, dtype: DataType) -> Result<ArgKind> {
        let DataType(raw) = dtype;
        if raw.lanes != 1 {
            tvm_ffi::bail!(
                ErrorKind::TypeError,
                "kernel `{kernel}`: argument {index} has vector type {dtype}, which device \
                 functions cannot take"
            );
        }
        Ok(match (raw.code, raw.bits) {
            (c, 64) if c == kDLOpaqueHandle => ArgKind::Handle,
            (c, 64) if c == kDLInt => ArgKind::Int64,
            (c, 32) if c == kDLInt => ArgKind::Int32,
            (c, 32) if c == kDLUInt => ArgKind::UInt32,
            (c, 64) if c == kDLFloat => ArgKind::Float64,
            (c, 32) if c == kDLFloat => ArgKind::Float32,
            _ => tvm_ffi::bail!(
                ErrorKind::TypeError,
                "kernel `{kernel}`: argument {index} has type {dtype}; device functions take \
                 handle, int32, int64, uint32, float32 or float64"
            ),
        })
    }

    /// Bytes of the value on the device (handles: a pointer).
    pub fn size(self) -> usize {
        match self {
            ArgKind::Int32 | ArgKind::UInt32 | ArgKind::Float32 => 4,
            ArgKind::Handle | ArgKind::Int64 | ArgKind::Float64 => 8,
        }
    }

    /// The scalar `value` as its little-endian bytes, 8 wide with a 32-bit value in the low
    /// four (TVM's `ArgUnion64`). A value of the wrong type or out of range is an error naming
    /// the argument.
    #[inline]
    pub fn scalar_bytes(self, kernel: &str, index: usize, value: &AnyView<'_>) -> Result<[u8; 8]> {
        let int =
            || i64::try_from_view(value).ok_or_else(|| wrong_type(kernel, index, value, "an int"));
        let float =
            || f64::try_from_view(value).ok_or_else(|| wrong_type(kernel, index, value, "a float"));
        let mut out = [0u8; 8];
        match self {
            ArgKind::Handle => {
                return Err(wrong_type(kernel, index, value, "a scalar, not a handle"));
            }
            ArgKind::Int64 => out = int()?.to_le_bytes(),
            ArgKind::Int32 => {
                let number = int()?;
                let narrow = i32::try_from(number)
                    .map_err(|_| out_of_range(kernel, index, number, "int32"))?;
                out[..4].copy_from_slice(&narrow.to_le_bytes());
            }
            ArgKind::UInt32 => {
                let number = int()?;
                let narrow = u32::try_from(number)
                    .map_err(|_| out_of_range(kernel, index, number, "uint32"))?;
                out[..4].copy_from_slice(&narrow.to_le_bytes());
            }
            ArgKind::Float64 => out = float()?.to_le_bytes(),
            ArgKind::Float32 => out[..4].copy_from_slice(&(float()? as f32).to_le_bytes()),
        }
        Ok(out)
    }
}

/// "kernel `k`: argument 1 must be an int, got str" (made only on failure: launches are hot).
#[cold]
fn wrong_type(kernel: &str, index: usize, value: &AnyView<'_>, what: &str) -> Error {
    Error::new(
        ErrorKind::TypeError,
        format!(
            "kernel `{kernel}`: argument {index} must be {what}, got {}",
            value.type_key()
        ),
    )
}

#[cold]
fn out_of_range(kernel: &str, index: usize, number: i64, what: &str) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!("kernel `{kernel}`: argument {index} is {number}, outside {what}"),
    )
}
