//! `Array` and `List` as values: emptiness, equality, formatting, snapshots, and the capacity a
//! list reserves and grows by.

use tvm_ffi::abi;
use tvm_ffi::{Any, Array, List};

/// The buffer, size and capacity in a list's sequence cell.
struct Cell {
    data: *mut std::ffi::c_void,
    size: i64,
    capacity: i64,
}

/// Reads the sequence cell of a list (offset 24 of the object).
fn cell(list: &List) -> Cell {
    // SAFETY: a list object: header, then the sequence cell; read while the list lives.
    let raw = unsafe {
        &*list
            .as_object()
            .as_raw()
            .cast::<u8>()
            .add(24)
            .cast::<abi::TVMFFISeqCell>()
    };
    Cell {
        data: raw.data,
        size: raw.size,
        capacity: raw.capacity,
    }
}

fn ints(values: &[Any]) -> Vec<i64> {
    values.iter().map(|v| v.cast::<i64>().unwrap()).collect()
}

#[test]
fn emptiness() {
    assert!(Array::new().is_empty());
    assert!(!Array::from_vec(vec![Any::none()]).is_empty());
    assert!(List::new().is_empty());
    let list = List::from_iter([1i64]);
    assert!(!list.is_empty());
    list.clear();
    assert!(list.is_empty());
}

#[test]
fn arrays_compare_element_by_element() {
    let a = Array::from_iter([1i64, 2, 3]);
    assert_eq!(a, Array::from_iter([1i64, 2, 3]));
    assert_ne!(a, Array::from_iter([1i64, 2, 4]));
    assert_ne!(a, Array::from_iter([1i64, 2]));
    assert_ne!(a, Array::new());
    assert_eq!(Array::new(), Array::new());
    let text = Array::from_iter(["a heap string of some length"]);
    assert_eq!(text, Array::from_iter(["a heap string of some length"]));
}

/// The strong reference count of the object a value holds.
fn strong_count(value: &Any) -> u32 {
    let obj = value.as_object_ptr().expect("an object value");
    // SAFETY: `value` holds a reference, so the header is live.
    unsafe { (*obj.cast::<tvm_ffi::Object>()).strong_count() }
}

#[test]
fn arrays_from_views_own_their_elements() {
    let text = Any::from("a string longer than seven bytes");
    let (one, none) = (Any::from(1i64), Any::none());
    let views = [one.as_view(), text.as_view(), none.as_view()];
    let array = Array::try_from_views(&views).unwrap();
    assert_eq!(array.len(), 3);
    assert_eq!(array.as_slice()[0].cast::<i64>().unwrap(), 1);
    assert_eq!(array.as_slice()[1], text);
    assert!(array.as_slice()[2].is_none());
    assert_eq!(strong_count(&text), 2);
    drop(array);
    assert_eq!(strong_count(&text), 1);
}

#[test]
fn a_failing_view_releases_the_elements_already_taken() {
    let text = Any::from("a string longer than seven bytes");
    // A moved-from rvalue reference: its slot is NULL.
    let mut slot: *mut abi::TVMFFIObject = std::ptr::null_mut();
    let moved = abi::TVMFFIAny {
        type_index: abi::kTVMFFIObjectRValueRef,
        small_str_len: 0,
        payload: abi::TVMFFIAnyPayload {
            v_ptr: (&mut slot as *mut *mut abi::TVMFFIObject).cast(),
        },
    };
    // SAFETY: the slot outlives the view.
    let moved = unsafe { tvm_ffi::AnyView::from_raw(moved) };
    let err = Array::try_from_views(&[text.as_view(), moved]).unwrap_err();
    assert!(err.message().contains("already moved"), "{err}");
    assert_eq!(strong_count(&text), 1);
}

#[test]
fn debug_lists_the_elements() {
    let a = Array::from_vec(vec![Any::from(1i64), Any::from("x"), Any::none()]);
    assert_eq!(format!("{a:?}"), r#"[1, "x", None]"#);
    assert_eq!(format!("{:?}", Array::new()), "[]");
    let list = List::from_iter([Any::from(2i64), Any::from(true)]);
    assert_eq!(format!("{list:?}"), "[2, true]");
    assert_eq!(format!("{:?}", List::new()), "[]");
}

#[test]
fn to_vec_is_a_snapshot() {
    let list = List::from_iter([1i64, 2, 3]);
    let snapshot = list.to_vec();
    assert_eq!(ints(&snapshot), [1, 2, 3]);
    list.push(4i64);
    assert_eq!(snapshot.len(), 3);
    assert_eq!(ints(&list.to_vec()), [1, 2, 3, 4]);
    assert!(List::new().to_vec().is_empty());
}

#[test]
fn with_capacity_and_reserve_make_room_without_touching_contents() {
    let list = List::with_capacity(10);
    assert!(list.is_empty());
    assert_eq!(cell(&list).capacity, 10);
    for i in 0..3i64 {
        list.push(i);
    }
    list.reserve(100);
    let reserved = cell(&list);
    assert_eq!(reserved.capacity, 100);
    assert_eq!(ints(&list.to_vec()), [0, 1, 2]);
    // A smaller request keeps the buffer.
    list.reserve(5);
    assert_eq!(cell(&list).capacity, 100);
    assert_eq!(cell(&list).data, reserved.data);
    assert_eq!(ints(&list.to_vec()), [0, 1, 2]);
    // Pushing up to the reserved capacity does not move the elements.
    for i in 3..100i64 {
        list.push(i);
    }
    assert_eq!(cell(&list).data, reserved.data);
    assert_eq!(list.len(), 100);
}

#[test]
fn pushing_grows_the_buffer_geometrically() {
    let list = List::new();
    let mut buffers = 0;
    let mut data = cell(&list).data;
    for i in 0..4096i64 {
        list.push(i);
        let now = cell(&list);
        assert!(now.capacity >= now.size);
        if now.data != data {
            buffers += 1;
            data = now.data;
        }
    }
    // 4, 8, ..., 4096: eleven buffers; a constant increment would need hundreds.
    assert!(buffers <= 12, "{buffers} reallocations for 4096 pushes");
    assert_eq!(cell(&list).capacity, 4096);
    assert_eq!(ints(&list.to_vec()), (0..4096).collect::<Vec<_>>());
}

#[test]
fn list_slice_globals_replace_erase_reverse_and_reserve() {
    let global = |name: &str| tvm_ffi::Function::get_global(name).unwrap();
    let ints = |l: &tvm_ffi::List| -> Vec<i64> {
        l.to_vec()
            .iter()
            .map(|v| v.cast::<i64>().unwrap())
            .collect()
    };
    let list: tvm_ffi::List = (0..5i64).map(tvm_ffi::Any::from).collect();
    let replacement: tvm_ffi::List = [7i64, 8, 9].into_iter().map(tvm_ffi::Any::from).collect();
    global("ffi.ListReplaceSlice")
        .call((list.clone(), 1i64, 3i64, replacement))
        .unwrap();
    assert_eq!(ints(&list), [0, 7, 8, 9, 3, 4]);
    global("ffi.ListEraseRange")
        .call((list.clone(), 0i64, 2i64))
        .unwrap();
    assert_eq!(ints(&list), [8, 9, 3, 4]);
    global("ffi.ListReverse").call((list.clone(),)).unwrap();
    assert_eq!(ints(&list), [4, 3, 9, 8]);
    global("ffi.ListReserve")
        .call((list.clone(), 100i64))
        .unwrap();
    assert_eq!(ints(&list), [4, 3, 9, 8]);

    let err = global("ffi.ListEraseRange")
        .call((list.clone(), 3i64, 9i64))
        .unwrap_err();
    assert!(err.is_kind(tvm_ffi::ErrorKind::IndexError), "{err}");
    assert!(err.message().contains("3..9"), "{err}");
    let err = global("ffi.ListReserve")
        .call((list.clone(), -1i64))
        .unwrap_err();
    assert!(err.is_kind(tvm_ffi::ErrorKind::ValueError), "{err}");
    assert!(err.message().contains("-1"));
}
