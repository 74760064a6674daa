//! What GPU backends share about kernels: their metadata ([`FunctionInfo`]), the launch
//! convention ([`LaunchConfig`]: which call arguments are grid and block dimensions), how
//! scalar arguments are packed ([`ArgKind`]), and the binary container of serialized device
//! modules ([`BinaryReader`], [`BinaryWriter`]).

mod args;
mod binary;
mod code_map;
mod info;
mod launch;

pub use args::{StorageBinding, TensorArg, tensor_arg};
pub use binary::{BinaryReader, BinaryWriter};
pub use code_map::{KernelCodeMap, register_module_loaders};
pub use info::{
    ArgExtraTag, FunctionInfo, function_map_from_json, read_function_map, read_kernel_file,
    write_function_map,
};
pub use launch::{
    ArgKind, COOPERATIVE_LAUNCH_TAG, DYN_SHARED_MEMORY_TAG, LaunchConfig, LaunchDims,
    PROGRAMMATIC_DEPENDENT_LAUNCH_TAG,
};
