//! What the launch-cost examples of the driver-API backends share: their command line, the
//! kernel they launch, the `packed` loop and the dimensions of the `bare` launches.

use tvm_ffi::{Any, AnyView, DataType};
use tvm_runtime::Module;

use crate::kernel::FunctionInfo;

/// The command line of a launch-cost example, `<example> <library> <packed|bare> <launches>`:
/// the library, the mode and the count (the usage is printed, and the process exits, otherwise).
pub fn launch_cost_args(example: &str, library: &str) -> (String, String, u64) {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, mode, launches] = args.as_slice() else {
        eprintln!("usage: {example} <{library}> <packed|bare> <launches>");
        std::process::exit(2);
    };
    let launches = launches.parse().expect("<launches> is a count");
    (path.clone(), mode.clone(), launches)
}

/// The metadata of `add_one(x, n)` of the fake drivers' code, launched with
/// `blockIdx.x` and `threadIdx.x`.
pub fn add_one_info() -> FunctionInfo {
    FunctionInfo {
        name: "add_one".into(),
        arg_types: vec![DataType::handle(), DataType::int(32)],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: Vec::new(),
    }
}

/// Calls `add_one` of `module` (made with [`add_one_info`]) `launches` times on one block of
/// one thread with `data` as `x`: the `packed` mode of the launch-cost examples.
pub fn launch_packed(module: Module, data: u64, launches: u64) -> tvm_ffi::Result<()> {
    let add_one = module.get_function_required("add_one")?;
    let values = [
        Any::from(data as usize as *mut std::ffi::c_void),
        Any::from(1i64),
        Any::from(1i64),
        Any::from(1i64),
    ];
    let views: Vec<AnyView<'_>> = values.iter().map(Any::as_view).collect();
    for _ in 0..launches {
        add_one.call_packed(&views)?;
    }
    Ok(())
}
