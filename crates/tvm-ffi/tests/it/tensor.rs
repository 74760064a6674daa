//! Tensors and DLPack exchange.

use std::ffi::c_void;

use tvm_ffi::abi::{self, DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use tvm_ffi::{Any, DataType, Device, Tensor};

#[test]
fn cpu_tensors_have_strides_and_data() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(&*t.strides(), &[3, 1]);
    assert!(!t.dltensor().strides.is_null());
    assert_eq!(t.dtype(), DataType::float(32));
    assert_eq!(t.device(), Device::cpu(0));
    assert_eq!(t.as_slice::<f32>().unwrap()[4], 5.0);
    assert_eq!(t.data_ptr() as usize % 64, 0);
    let err = t.as_slice::<i32>().unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message().contains("float32") && err.message().contains("int32"),
        "{err}"
    );
}

#[test]
fn a_view_with_another_dtype_of_the_same_size_shares_memory() {
    let t = Tensor::from_slice(&[1.0f32, -2.0, 3.5, 0.0], &[2, 2]).unwrap();
    let bits = t.with_dtype(DataType::uint(32)).unwrap();
    assert_eq!(
        (bits.shape(), &*bits.strides()),
        (&[2i64, 2][..], &[2i64, 1][..])
    );
    assert_eq!(bits.data_ptr(), t.data_ptr());
    assert_eq!(bits.as_slice::<u32>().unwrap()[1], (-2.0f32).to_bits());
    drop(t);
    assert_eq!(
        bits.as_slice::<u32>().unwrap()[2],
        3.5f32.to_bits(),
        "the view keeps the memory"
    );
    let err = bits.with_dtype(DataType::float(64)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("uint32") && err.message().contains("float64"),
        "{err}"
    );
    let err = bits.with_dtype(DataType::new(1, 4, 1)).unwrap_err();
    assert!(err.message().contains("element sizes differ"), "{err}");
}

#[test]
fn shape_mismatch_is_reported() {
    let err = Tensor::from_slice(&[1i32, 2, 3], &[2, 2]).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("[2, 2]"), "{err}");
}

#[test]
fn dlpack_round_trip_shares_memory_and_releases_once() {
    let t = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
    let managed = t.to_dlpack_versioned();
    // SAFETY: the export is a valid managed tensor owned by us.
    let back = unsafe { Tensor::from_dlpack_versioned(managed, 0, true) }.unwrap();
    assert_eq!(back.data_ptr(), t.data_ptr());
    assert_eq!(
        t.as_object().use_count(),
        2,
        "the import holds the export, which holds t"
    );
    drop(back);
    assert_eq!(t.as_object().use_count(), 1);

    let legacy = t.to_dlpack();
    // SAFETY: as above, legacy form.
    let back = unsafe { Tensor::from_dlpack(legacy, 64, false) }.unwrap();
    assert_eq!(back.as_slice::<i64>().unwrap(), &[1, 2, 3]);
}

struct Producer {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    data: Vec<f32>,
    released: *mut bool,
}

unsafe extern "C" fn release_producer(m: *mut DLManagedTensorVersioned) {
    // SAFETY: `manager_ctx` is the boxed producer.
    unsafe {
        let producer = Box::from_raw((*m).manager_ctx.cast::<Producer>());
        *producer.released = true;
    }
}

fn produce(
    data: Vec<f32>,
    shape: Vec<i64>,
    flags: u64,
    released: &mut bool,
) -> *mut DLManagedTensorVersioned {
    let mut producer = Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: abi::DLPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(release_producer),
            flags,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: abi::DLDevice {
                    device_type: abi::kDLCPU,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype: abi::DLDataType {
                    code: abi::kDLFloat,
                    bits: 32,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape,
        data,
        released,
    });
    producer.managed.dl_tensor.data = producer.data.as_mut_ptr().cast::<c_void>();
    producer.managed.dl_tensor.shape = producer.shape.as_mut_ptr();
    let raw = Box::into_raw(producer);
    // SAFETY: the box is live; the managed struct is its first field.
    unsafe {
        (*raw).managed.manager_ctx = raw.cast();
        &mut (*raw).managed
    }
}

#[test]
fn imports_take_ownership_only_on_success() {
    let mut released = false;
    let managed = produce(
        vec![1.0; 6],
        vec![2, 3],
        abi::DLPACK_FLAG_BITMASK_READ_ONLY,
        &mut released,
    );
    // SAFETY: a valid managed tensor.
    let t = unsafe { Tensor::from_dlpack_versioned(managed, 0, true) }.unwrap();
    assert_eq!(&*t.strides(), &[3, 1], "missing strides are synthesized");
    assert!(t.is_read_only());
    let exported = t.to_dlpack_versioned();
    // SAFETY: a valid export; its flags carry the read-only bit; released once.
    unsafe {
        assert_eq!((*exported).flags & abi::DLPACK_FLAG_BITMASK_READ_ONLY, 1);
        ((*exported).deleter.unwrap())(exported);
    }
    drop(t);
    assert!(released, "the producer's deleter ran when the tensor died");

    let mut released = false;
    let managed = produce(
        vec![1.0; 4],
        vec![4],
        abi::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
        &mut released,
    );
    // SAFETY: a valid managed tensor; rejected, so still ours.
    let err = unsafe { Tensor::from_dlpack_versioned(managed, 0, false) }.unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(!released);
    // SAFETY: ownership stayed with us.
    unsafe { ((*managed).deleter.unwrap())(managed) };
    assert!(released);
}

#[test]
fn negative_dims_and_empty_dtypes_are_refused_at_import() {
    for (shape, bits, lanes, expected) in [
        (vec![2, -3], 32, 1, "negative dimension -3"),
        (vec![4], 0, 1, "0 bits"),
        (vec![4], 32, 0, "0 lanes"),
    ] {
        let mut released = false;
        let managed = produce(vec![0.0; 4], shape, 0, &mut released);
        // SAFETY: the producer's record is live; only the dtype is changed.
        unsafe {
            (*managed).dl_tensor.dtype.bits = bits;
            (*managed).dl_tensor.dtype.lanes = lanes;
        }
        // SAFETY: a managed tensor with readable dims; rejected, so still ours.
        let err = unsafe { Tensor::from_dlpack_versioned(managed, 0, false) }.unwrap_err();
        assert_eq!(err.kind(), "ValueError");
        assert!(err.message().contains(expected), "{err}");
        // SAFETY: ownership stayed with us.
        unsafe { ((*managed).deleter.unwrap())(managed) };
        assert!(released);
    }
}

#[test]
fn misaligned_or_strided_imports_are_rejected_when_required() {
    let t = Tensor::from_slice(&[0u8; 16], &[16]).unwrap();
    let managed: *mut DLManagedTensor = t.to_dlpack();
    // SAFETY: a valid export; shift the data by one byte.
    unsafe { (*managed).dl_tensor.byte_offset = 1 };
    // SAFETY: as above.
    let err = unsafe { Tensor::from_dlpack(managed, 64, false) }.unwrap_err();
    assert!(err.message().contains("aligned"), "{err}");
    // SAFETY: ownership stayed with us.
    unsafe { ((*managed).deleter.unwrap())(managed) };
    assert_eq!(t.as_object().use_count(), 1);
}

#[test]
fn the_c_imports_refuse_alignments_that_are_not_powers_of_two() {
    let t = Tensor::from_slice(&[0u8; 16], &[16]).unwrap();
    // The outcome of one import: Ok, or the raised error's kind and message.
    let outcome = |rc: i32, handle: *mut c_void| {
        if rc == 0 {
            // SAFETY: one owned reference to the new tensor.
            unsafe { abi::TVMFFIObjectDecRef(handle) };
            return Ok(());
        }
        assert_eq!(rc, -1);
        let err = tvm_ffi::Error::take_raised().unwrap();
        Err(format!("{}: {}", err.kind(), err.message()))
    };
    for (align, accepted) in [
        (3, false),
        (-64, false),
        (6, false),
        (0, true),
        (1, true),
        (64, true),
    ] {
        let mut handle = std::ptr::null_mut();
        let legacy: *mut DLManagedTensor = t.to_dlpack();
        // SAFETY: a valid export; the C API takes it only on success.
        let legacy_rc = unsafe { abi::TVMFFITensorFromDLPack(legacy, align, 0, &mut handle) };
        let legacy_result = outcome(legacy_rc, handle);
        let versioned: *mut DLManagedTensorVersioned = t.to_dlpack_versioned();
        // SAFETY: as above.
        let rc = unsafe { abi::TVMFFITensorFromDLPackVersioned(versioned, align, 0, &mut handle) };
        let versioned_result = outcome(rc, handle);
        for result in [legacy_result, versioned_result] {
            match result {
                Ok(()) => assert!(accepted, "alignment {align} was accepted"),
                Err(err) => {
                    assert!(!accepted, "alignment {align}: {err}");
                    let wanted = format!(
                        "ValueError: require_alignment must be 0 (none) or a positive power of two, got {align}"
                    );
                    assert_eq!(err, wanted);
                }
            }
        }
        if !accepted {
            // SAFETY: refused, so both exports are still ours.
            unsafe {
                ((*legacy).deleter.unwrap())(legacy);
                ((*versioned).deleter.unwrap())(versioned);
            }
        }
    }
    assert_eq!(t.as_object().use_count(), 1);
}

#[test]
fn tensors_travel_in_any() {
    let t = Tensor::empty(&[4, 4], DataType::float(16), Device::cpu(0)).unwrap();
    let any = Any::from(t.clone());
    assert_eq!(any.type_index(), abi::kTVMFFITensor);
    assert_eq!(any.cast::<Tensor>().unwrap().shape(), &[4, 4]);
    let err = Tensor::empty(&[2], DataType::float(32), Device::cuda(0)).unwrap_err();
    assert!(err.message().contains("allocator"), "{err}");
}

#[test]
fn contiguity_ignores_size_one_dims_and_empty_tensors() {
    use tvm_ffi::tensor::is_contiguous;
    /// Shape, strides (None: compact), whether contiguous.
    type Case<'a> = (&'a [i64], Option<&'a [i64]>, bool);
    let cases: [Case<'_>; 10] = [
        (&[2, 3], None, true),
        (&[2, 3], Some(&[3, 1]), true),
        (&[2, 3], Some(&[1, 2]), false),
        (&[2, 3], Some(&[4, 1]), false),
        // A size-1 dimension may carry any stride.
        (&[2, 1, 3], Some(&[3, 99, 1]), true),
        (&[1, 4], Some(&[0, 1]), true),
        (&[4, 1], Some(&[1, 7]), true),
        // Zero elements: nothing to lay out.
        (&[0, 3], Some(&[5, 9]), true),
        (&[3, 0], Some(&[1, 1]), true),
        (&[], Some(&[]), true),
    ];
    for (shape, strides, expected) in cases {
        assert_eq!(
            is_contiguous(shape, strides),
            expected,
            "{shape:?} {strides:?}"
        );
    }
}

#[test]
fn require_contiguous_refuses_only_real_gaps() {
    for (strides, accepted) in [([3i64, 1], true), ([1, 2], false), ([99, 1], true)] {
        let mut released = false;
        // Shape [1, 3] for the size-1 case, [2, 3] otherwise.
        let shape = if strides[0] == 99 {
            vec![1, 3]
        } else {
            vec![2, 3]
        };
        let managed = produce(vec![0.0; 6], shape, 0, &mut released);
        let mut strides = strides.to_vec();
        // SAFETY: the producer record is live; the strides outlive the import attempt.
        unsafe { (*managed).dl_tensor.strides = strides.as_mut_ptr() };
        let mut handle = std::ptr::null_mut();
        // SAFETY: a valid managed tensor; the C API takes it only on success.
        let rc = unsafe { abi::TVMFFITensorFromDLPackVersioned(managed, 0, 1, &mut handle) };
        assert_eq!(rc == 0, accepted, "strides {strides:?}");
        if accepted {
            // SAFETY: one owned reference to the new tensor.
            unsafe { abi::TVMFFIObjectDecRef(handle) };
        } else {
            let err = tvm_ffi::Error::take_raised().unwrap();
            assert!(err.message().contains("not contiguous"), "{err}");
            // SAFETY: refused, so still ours.
            unsafe { ((*managed).deleter.unwrap())(managed) };
        }
        assert!(released);
    }
}

#[test]
fn an_export_outlives_its_tensor_and_is_released_once() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let data = t.data_ptr();
    // Two exports alive at once get two records; the tensor goes before its consumers do.
    let first = t.to_dlpack_versioned();
    let second = t.to_dlpack();
    assert_ne!(first.cast::<c_void>(), second.cast::<c_void>());
    assert_eq!(t.as_object().use_count(), 3);
    drop(t);
    // SAFETY: the exports are live until their deleters run, once each.
    unsafe {
        assert_eq!((*first).dl_tensor.data, data);
        assert_eq!(
            std::slice::from_raw_parts((*first).dl_tensor.shape, 2),
            &[2, 3]
        );
        assert_eq!(
            std::slice::from_raw_parts((*second).dl_tensor.strides, 2),
            &[3, 1]
        );
        ((*first).deleter.unwrap())(first);
        assert_eq!(*(*second).dl_tensor.data.cast::<f32>().add(5), 6.0);
        ((*second).deleter.unwrap())(second);
    }
    // A released record is reused by the next export, which starts out whole again.
    let u = Tensor::from_slice(&[7i32], &[1]).unwrap();
    let again = u.to_dlpack_versioned();
    // SAFETY: a live export, released once.
    unsafe {
        assert_eq!((*again).version.major, abi::DLPACK_MAJOR_VERSION);
        assert_eq!((*again).flags, 0);
        assert_eq!(*(*again).dl_tensor.data.cast::<i32>(), 7);
        ((*again).deleter.unwrap())(again);
    }
    assert_eq!(u.as_object().use_count(), 1);
}

#[test]
fn an_export_released_on_another_thread_frees_its_record() {
    let t = Tensor::from_slice(&[1u8, 2, 3], &[3]).unwrap();
    let exports: Vec<usize> = (0..4).map(|_| t.to_dlpack_versioned() as usize).collect();
    std::thread::spawn(move || {
        for managed in exports {
            let managed = managed as *mut DLManagedTensorVersioned;
            // SAFETY: each export is live and released once, here.
            unsafe { ((*managed).deleter.unwrap())(managed) };
        }
    })
    .join()
    .unwrap();
    assert_eq!(t.as_object().use_count(), 1);
}

#[test]
fn imports_keep_the_producers_shape_and_strides() {
    let mut released = false;
    let managed = produce(vec![0.0; 12], vec![3, 4], 0, &mut released);
    let mut strides = [1i64, 3];
    // SAFETY: a valid producer; column-major strides of its own, living past the import.
    unsafe { (*managed).dl_tensor.strides = strides.as_mut_ptr() };
    // SAFETY: a valid producer whose record outlives the import.
    let t = unsafe { Tensor::from_dlpack_versioned(managed, 0, false) }.unwrap();
    assert_eq!(t.shape(), &[3, 4]);
    assert_eq!(&*t.strides(), &[1, 3]);
    assert!(!t.is_contiguous());
    // The export describes the same layout.
    let out = t.to_dlpack_versioned();
    // SAFETY: a live export, released once.
    unsafe {
        assert_eq!(
            std::slice::from_raw_parts((*out).dl_tensor.strides, 2),
            &[1, 3]
        );
        ((*out).deleter.unwrap())(out);
    }
    drop(t);
    assert!(released);

    // Without strides the import computes compact ones.
    let mut released = false;
    let managed = produce(vec![0.0; 24], vec![2, 3, 4], 0, &mut released);
    // SAFETY: a valid producer.
    let t = unsafe { Tensor::from_dlpack_versioned(managed, 0, true) }.unwrap();
    assert_eq!(&*t.strides(), &[12, 4, 1]);
    assert!(!t.dltensor().strides.is_null());
    drop(t);
    assert!(released);
}

#[test]
fn zero_dim_tensors_import_and_export() {
    let mut released = false;
    let managed = produce(vec![2.5], vec![], 0, &mut released);
    // SAFETY: a valid producer of a scalar.
    let t = unsafe { Tensor::from_dlpack_versioned(managed, 4, true) }.unwrap();
    assert_eq!((t.ndim(), t.shape(), t.numel()), (0, &[][..], 1));
    assert!(t.dltensor().shape.is_null() && t.dltensor().strides.is_null());
    let out = t.to_dlpack();
    drop(t);
    assert!(!released, "the export keeps the producer");
    // SAFETY: a live export, released once.
    unsafe {
        assert_eq!((*out).dl_tensor.ndim, 0);
        assert_eq!(*(*out).dl_tensor.data.cast::<f32>(), 2.5);
        ((*out).deleter.unwrap())(out);
    }
    assert!(released);
}

/// The address of a tensor's object.
fn object_address(t: &Tensor) -> usize {
    t.as_object().header() as *const _ as usize
}

#[test]
fn a_released_tensor_block_is_reused_by_the_next_tensor_of_its_size_class() {
    std::thread::spawn(|| {
        let first = Tensor::from_slice(&[1i32, 2, 3], &[3]).unwrap();
        let address = object_address(&first);
        drop(first);
        // The same size class (one dim, shape and strides copied): the thread's spare block.
        let second = Tensor::from_slice(&[4i32, 5], &[2]).unwrap();
        assert_eq!(object_address(&second), address);
        assert_eq!(second.as_slice::<i32>().unwrap(), &[4, 5]);
        assert_eq!(&*second.strides(), &[1]);
        drop(second);
        // A larger tensor does not fit the spare and leaves it for the next small one.
        let large = Tensor::from_slice(&[0u8; 24], &[2, 3, 4]).unwrap();
        assert_ne!(object_address(&large), address);
        assert_eq!(&*large.strides(), &[12, 4, 1]);
        let third = Tensor::from_slice(&[7u8], &[1]).unwrap();
        assert_eq!(object_address(&third), address);
        drop((large, third));
    })
    .join()
    .unwrap();
}

#[test]
fn a_weakly_referenced_tensor_keeps_its_block_until_the_last_weak_reference() {
    std::thread::spawn(|| {
        let first = Tensor::from_slice(&[1.5f64], &[1]).unwrap();
        let address = object_address(&first);
        let weak = first.as_object().downgrade();
        drop(first);
        assert!(weak.upgrade().is_none());
        let second = Tensor::from_slice(&[2.5f64], &[1]).unwrap();
        let second_address = object_address(&second);
        assert_ne!(
            second_address, address,
            "the weak reference holds the block"
        );
        drop(second);
        drop(weak);
        // The second tensor's block is the spare now; the first one's was freed.
        let third = Tensor::from_slice(&[3.5f64], &[1]).unwrap();
        assert_eq!(object_address(&third), second_address);
        assert_eq!(third.as_slice::<f64>().unwrap(), &[3.5]);
    })
    .join()
    .unwrap();
}

#[test]
fn a_tensor_released_on_another_thread_gives_its_block_to_that_thread() {
    let t = Tensor::from_slice(&[1u16, 2], &[2]).unwrap();
    let address = object_address(&t);
    let next = std::thread::spawn(move || {
        drop(t);
        let next = Tensor::from_slice(&[3u16, 4], &[2]).unwrap();
        (
            object_address(&next),
            next.as_slice::<u16>().unwrap().to_vec(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(next, (address, vec![3, 4]));
}
