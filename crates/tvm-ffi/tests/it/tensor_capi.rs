//! The C API's tensor exports (`TVMFFITensorToDLPack*`, `TVMFFITensorCreateUnsafeView`): what
//! they hand out, and how they refuse NULL and non-tensor handles.

use tvm_ffi::abi::{self, DLManagedTensor, DLManagedTensorVersioned, DLTensor, TVMFFIObjectHandle};
use tvm_ffi::object::ObjectRef;
use tvm_ffi::tensor::TensorObj;
use tvm_ffi::{Array, Tensor};

fn row_major() -> Tensor {
    Tensor::from_slice(&[1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap()
}

fn handle_of(t: &Tensor) -> TVMFFIObjectHandle {
    t.as_object().as_raw().cast()
}

/// The error the last call raised, as (kind, message).
fn raised() -> (String, String) {
    let err = tvm_ffi::Error::take_raised().expect("an error was raised");
    (err.kind().to_string(), err.message().to_string())
}

#[test]
fn exports_share_data_and_hold_a_reference() {
    let tensor = row_major();
    let mut legacy: *mut DLManagedTensor = std::ptr::null_mut();
    // SAFETY: a live tensor and a valid out slot.
    let rc = unsafe { abi::TVMFFITensorToDLPack(handle_of(&tensor), &mut legacy) };
    assert_eq!(rc, 0);
    let mut versioned: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { abi::TVMFFITensorToDLPackVersioned(handle_of(&tensor), &mut versioned) };
    assert_eq!(rc, 0);
    let data = tensor.dltensor().data;
    drop(tensor);
    // SAFETY: both exports are live until their deleters run, and keep the data alive.
    unsafe {
        assert_eq!((*legacy).dl_tensor.data, data);
        assert_eq!((*versioned).dl_tensor.data, data);
        assert_eq!((*versioned).version.major, abi::DLPACK_MAJOR_VERSION);
        let shape = std::slice::from_raw_parts((*legacy).dl_tensor.shape, 2);
        assert_eq!(shape, [2, 3]);
        let values = std::slice::from_raw_parts(data.cast::<f32>(), 6);
        assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        ((*legacy).deleter.unwrap())(legacy);
        let values = std::slice::from_raw_parts(data.cast::<f32>(), 6);
        assert_eq!(
            values[5], 6.0,
            "the versioned export still holds the tensor"
        );
        ((*versioned).deleter.unwrap())(versioned);
    }
}

#[test]
fn exports_refuse_null_and_non_tensor_handles() {
    let mut legacy: *mut DLManagedTensor = std::ptr::null_mut();
    // SAFETY: NULL is refused before any use.
    let rc = unsafe { abi::TVMFFITensorToDLPack(std::ptr::null_mut(), &mut legacy) };
    assert_ne!(rc, 0);
    let (kind, message) = raised();
    assert_eq!(kind, "ValueError");
    assert!(
        message.contains("tensor handle must not be NULL"),
        "{message}"
    );

    let array = Array::new();
    let handle: TVMFFIObjectHandle = array.as_object().as_raw().cast();
    let mut versioned: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: a live object, checked for its type before use.
    let rc = unsafe { abi::TVMFFITensorToDLPackVersioned(handle, &mut versioned) };
    assert_ne!(rc, 0);
    let (kind, message) = raised();
    assert_eq!(kind, "TypeError");
    assert!(
        message.contains("expected ffi.Tensor, got ffi.Array"),
        "{message}"
    );
    assert!(versioned.is_null(), "nothing is written on failure");

    let tensor = row_major();
    // SAFETY: a NULL out slot is refused.
    let rc = unsafe { abi::TVMFFITensorToDLPack(handle_of(&tensor), std::ptr::null_mut()) };
    assert_ne!(rc, 0);
    assert!(raised().1.contains("out"));
}

/// A descriptor of row `row` of a [2, 3] f32 tensor.
fn row_prototype(t: &Tensor, row: u64, shape: &mut [i64; 1], strides: &mut [i64; 1]) -> DLTensor {
    DLTensor {
        ndim: 1,
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: row * 3 * 4,
        ..*t.dltensor()
    }
}

#[test]
fn unsafe_views_keep_their_source_alive() {
    let tensor = row_major();
    let (mut shape, mut strides) = ([3i64], [1i64]);
    let prototype = row_prototype(&tensor, 1, &mut shape, &mut strides);
    let mut out: TVMFFIObjectHandle = std::ptr::null_mut();
    // SAFETY: the prototype lies within the tensor's memory, which the view keeps alive.
    let rc = unsafe { abi::TVMFFITensorCreateUnsafeView(handle_of(&tensor), &prototype, &mut out) };
    assert_eq!(rc, 0);
    drop(tensor);
    // SAFETY: `out` is one owned reference to a tensor.
    let view = Tensor::from_object(unsafe { ObjectRef::<TensorObj>::from_raw(out.cast()) });
    assert_eq!(view.shape(), [3]);
    assert_eq!(view.as_slice::<f32>().unwrap(), [4.0, 5.0, 6.0]);

    // Tensor::view is the safe-API counterpart: the last two elements of the row, whose byte
    // offset counts from the same data pointer as the view's own.
    let mut shape = [2i64];
    let mut strides = [1i64];
    let prototype = DLTensor {
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: view.dltensor().byte_offset + 4,
        ..*view.dltensor()
    };
    // SAFETY: the prototype is within `view`'s own memory.
    let tail = unsafe { view.view(&prototype) }.unwrap();
    drop(view);
    assert_eq!(tail.as_slice::<f32>().unwrap(), [5.0, 6.0]);
}

#[test]
fn unsafe_views_refuse_missing_arguments() {
    let tensor = row_major();
    let (mut shape, mut strides) = ([3i64], [1i64]);
    let mut prototype = row_prototype(&tensor, 0, &mut shape, &mut strides);
    let mut out: TVMFFIObjectHandle = std::ptr::null_mut();
    // SAFETY: each NULL is refused before use.
    unsafe {
        assert_ne!(
            abi::TVMFFITensorCreateUnsafeView(std::ptr::null_mut(), &prototype, &mut out),
            0
        );
        assert_eq!(
            raised(),
            ("ValueError".into(), "source must not be NULL".into())
        );
        let rc = abi::TVMFFITensorCreateUnsafeView(handle_of(&tensor), std::ptr::null(), &mut out);
        assert_ne!(rc, 0);
        assert!(raised().1.contains("prototype"));
    }
    prototype.strides = std::ptr::null_mut();
    // SAFETY: a valid prototype without strides, refused.
    let rc = unsafe { abi::TVMFFITensorCreateUnsafeView(handle_of(&tensor), &prototype, &mut out) };
    assert_ne!(rc, 0);
    let (kind, message) = raised();
    assert_eq!(kind, "ValueError");
    assert!(
        message.contains("a view prototype needs strides"),
        "{message}"
    );
    assert!(out.is_null());
}
