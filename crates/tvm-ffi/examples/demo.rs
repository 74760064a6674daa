//! A short tour of the runtime: register functions, call them through the C ABI, pass
//! containers and tensors, and watch errors cross the boundary with their kind and backtrace.

// This binary is a final artifact: it links the process state.
use tvm_ffi_capi as _;

use tvm_ffi::{Array, Error, ErrorKind, Function, Shape, Tensor};

fn main() -> tvm_ffi::Result<()> {
    // A typed Rust closure, registered globally: any language can now call "demo.scale".
    Function::from_typed(
        "demo.scale",
        |t: Tensor, factor: f64| -> tvm_ffi::Result<Tensor> {
            let values: Vec<f32> = t
                .as_slice::<f32>()?
                .iter()
                .map(|v| v * factor as f32)
                .collect();
            Tensor::from_slice(&values, t.shape())
        },
    )
    .register_global("demo.scale", false)?;

    let scale = Function::get_global_required("demo.scale")?;
    let input = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    let output: Tensor = scale.call((input, 2.5f64))?.cast()?;
    println!(
        "demo.scale(tensor, 2.5) -> {output:?} = {:?}",
        output.as_slice::<f32>()?
    );

    // Containers hold any values; the core's own globals build and read them.
    let array: Array = Function::get_global_required("ffi.Array")?
        .call((1i64, "two", 3.0f64, Shape::new(&[4, 5])))?
        .cast()?;
    println!("ffi.Array(1, 'two', 3.0, Shape([4, 5])) -> {array:?}");

    // A Rust closure behind the C ABI, called back through a function that takes a function.
    let square = Function::from_typed("square", |x: i64| x * x);
    let apply = Function::from_typed("apply", |f: Function, x: i64| f.call((x,)));
    println!("apply(square, 12) -> {:?}", apply.call((square, 12i64))?);

    // Errors keep their kind, message and backtrace across the C boundary.
    let err = scale.call(("not a tensor", 1.0f64)).unwrap_err();
    println!("bad call -> {err}");
    let get_item = Function::get_global_required("ffi.ArrayGetItem")?;
    let err: Error = get_item.call((array, 10i64)).unwrap_err();
    assert!(err.is_kind(ErrorKind::IndexError));
    println!("ffi.ArrayGetItem(array, 10) -> {err}");

    let names = Function::list_global_names()?;
    println!(
        "{} global functions registered, e.g. {:?}",
        names.len(),
        &names[..3]
    );
    Ok(())
}
