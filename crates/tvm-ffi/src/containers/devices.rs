//! `ffi.ContainerFindFirstNonCPUDevice`: the device of the first tensor not on the CPU inside a
//! value, which a caller uses to pick the stream of a call whose tensors sit in containers.

use std::collections::HashSet;

use crate::abi::{kDLCPU, kTVMFFIArray, kTVMFFIDict, kTVMFFIList, kTVMFFIMap, kTVMFFITensor};
use crate::any::{Any, AnyView, TryFromAnyView};
use crate::containers::array::Array;
use crate::containers::map::{Map, MapRead};
use crate::device::Device;
use crate::function::Function;
use crate::tensor::Tensor;

/// The device of the first tensor whose device type is not the CPU, searching `value` itself
/// and then, depth first and in order, the elements of arrays and lists and the values (not the
/// keys) of maps and dicts. A container reached twice (shared, or containing itself) is searched
/// once, so cycles and deep nesting end without exhausting the stack.
pub fn first_non_cpu_device(value: &AnyView<'_>) -> Option<Device> {
    let mut pending: Vec<Any> = vec![value.to_owned()];
    let mut searched: HashSet<usize> = HashSet::new();
    while let Some(item) = pending.pop() {
        let view = item.as_view();
        match item.type_index() {
            kTVMFFITensor => {
                let device = Tensor::try_from_view(&view)?.device();
                if device.device_type() != kDLCPU {
                    return Some(device);
                }
            }
            kTVMFFIArray | kTVMFFIList | kTVMFFIMap | kTVMFFIDict => {
                let address = view.as_object_ptr()? as usize;
                if !searched.insert(address) {
                    continue;
                }
                // Lists and dicts are copied under their lock; the copies are searched.
                let children: Vec<Any> = if matches!(item.type_index(), kTVMFFIArray | kTVMFFIList)
                {
                    Array::try_from_view(&view)?.iter().cloned().collect()
                } else {
                    Map::try_from_view(&view)?.values().collect()
                };
                pending.extend(children.into_iter().rev());
            }
            _ => {}
        }
    }
    None
}

/// The global function `ffi.ContainerFindFirstNonCPUDevice(value) -> Device`: the device found
/// by [`first_non_cpu_device`], or `cpu:0` when there is none.
pub fn functions() -> Vec<(&'static str, Function)> {
    vec![(
        "ffi.ContainerFindFirstNonCPUDevice",
        Function::from_typed("ffi.ContainerFindFirstNonCPUDevice", |value: Any| {
            first_non_cpu_device(&value.as_view()).unwrap_or(Device::new(kDLCPU, 0))
        }),
    )]
}
