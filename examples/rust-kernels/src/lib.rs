//! Kernels written in Rust, exported as TVM FFI library functions: build this `cdylib`
//! (`cargo build -p rust-kernels`) and load `librust_kernels.so` as a module from Python
//! (`tvm.runtime.load_module`) or C++ (`tvm::ffi::Module::LoadFromFile`). Each export records its
//! type schema, so `python -m tvm.support.stubgen module librust_kernels.so` writes its stub.

use tvm_ffi::{
    ArrayOf, DataType, Error, ErrorKind, MapOf, Object, ObjectRef, Result, Tensor,
    export_typed_func,
};

/// A float32 CPU tensor's elements, or a `TypeError` naming `what` and what it is.
fn f32_elements(tensor: &Tensor, what: &str) -> Result<*mut f32> {
    if tensor.dtype() != DataType::float(32)
        || tensor.device().device_type() != tvm_ffi::abi::kDLCPU
    {
        return Err(Error::new(
            ErrorKind::TypeError,
            format!(
                "{what} must be a float32 CPU tensor, got {} on {}",
                tensor.dtype(),
                tensor.device()
            ),
        ));
    }
    if !tensor.is_contiguous() {
        return Err(Error::new(
            ErrorKind::ValueError,
            format!("{what} must be contiguous"),
        ));
    }
    Ok(tensor.data_ptr().cast::<f32>())
}

/// `y[i] = x[i] + 1` for float32 CPU tensors of one shape.
fn add_one(x: Tensor, y: Tensor) -> Result<()> {
    let (src, dst) = (f32_elements(&x, "x")?, f32_elements(&y, "y")?);
    if y.is_read_only() {
        return Err(Error::new(
            ErrorKind::ValueError,
            "y is read-only: add_one writes its result there",
        ));
    }
    if x.shape() != y.shape() {
        return Err(Error::new(
            ErrorKind::ValueError,
            format!("x has shape {:?} but y has {:?}", x.shape(), y.shape()),
        ));
    }
    let n = usize::try_from(x.numel()).unwrap_or(0);
    // SAFETY: both are contiguous float32 CPU tensors of `n` elements, alive for the call;
    // `src` and `dst` may be one buffer, read before written element by element.
    unsafe {
        for i in 0..n {
            *dst.add(i) = *src.add(i) + 1.0;
        }
    }
    Ok(())
}

export_typed_func!(
    add_one,
    add_one,
    "Writes x + 1 into y (float32 CPU tensors, one shape)."
);
export_typed_func!(scale, |x: f64, factor: Option<f64>| x * factor
    .unwrap_or(2.0));
export_typed_func!(greet, |name: tvm_ffi::String| format!("hello, {name}"));
export_typed_func!(
    total_length,
    |words: ArrayOf<tvm_ffi::String>| words.iter().map(|w| w.len() as i64).sum::<i64>(),
    "The total length of the words.",
);
export_typed_func!(count_keys, |counts: MapOf<tvm_ffi::String, i64>| {
    counts.iter().map(|(_, n)| n).sum::<i64>()
});

/// A labelled rectangle: an object type with reflected fields, defined in Rust.
#[derive(Object)]
#[object(key = "rust_kernels.Rect")]
#[repr(C)]
pub struct Rect {
    base: Object,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
    /// A label.
    pub label: tvm_ffi::String,
}

/// A reference to a [`Rect`], as functions take and return it.
#[derive(ObjectRef)]
pub struct RectRef(tvm_ffi::ObjectRef<Rect>);

export_typed_func!(
    make_rect,
    |width: f64, height: f64, label: tvm_ffi::String| RectRef::new(Rect {
        base: Object::header(),
        width,
        height,
        label,
    }),
    "A rectangle of the given size.",
);
export_typed_func!(area, |rect: RectRef| rect.width * rect.height);
