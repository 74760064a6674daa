//! Embeds the runtime without Python: loads a kernel library, calls its `add_one` on a tensor
//! allocated here, and prints the result.
//!
//! ```text
//! gcc -shared -fPIC -I python/tvm/include -o /tmp/add_one.so cpp-abi/examples/add_one_c.c
//! cargo run -p tvm-runtime --example run_kernel -- /tmp/add_one.so
//! ```
//!
//! No linker flags: the kernel's references to the C API resolve to the runtime linked in here
//! (the core exports it to the libraries the runtime loads).

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use tvm_ffi::{DataType, Device, Tensor};

fn main() -> tvm_ffi::Result<()> {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run_kernel <kernel library>");
        std::process::exit(2);
    };
    tvm_runtime::init();
    let module = tvm_runtime::load_module(&path)?;
    let add_one = module.get_function_required("add_one")?;
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.5], &[4])?;
    let y = Tensor::empty(&[4], DataType::float(32), Device::cpu(0))?;
    add_one.call((x.clone(), y.clone()))?;
    println!(
        "add_one({:?}) = {:?}",
        x.as_slice::<f32>()?,
        y.as_slice::<f32>()?
    );
    Ok(())
}
