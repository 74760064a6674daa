//! Arrays, lists and shapes.

use tvm_ffi::abi;
use tvm_ffi::{Any, Array, Function, List, Shape, String};

#[test]
fn arrays_hold_any_values_inline() {
    let a: Array = vec![Any::from(1i64), Any::from("two"), Any::from(3.0f64)]
        .into_iter()
        .collect();
    assert_eq!(a.len(), 3);
    let obj = a.as_object().as_raw().cast::<u8>();
    // SAFETY: an array: header, sequence cell, inline elements at offset 56.
    unsafe {
        let cell = &*obj.add(24).cast::<abi::TVMFFISeqCell>();
        assert_eq!(cell.data, obj.add(56).cast());
        assert_eq!((cell.size, cell.capacity), (3, 3));
        assert!(cell.data_deleter.is_none());
    }
    assert_eq!(a.at(-1).unwrap().cast::<f64>().unwrap(), 3.0);
    let err = a.at(3).unwrap_err();
    assert_eq!(err.kind(), "IndexError");
    assert!(err.message().contains('3'), "{err}");
}

#[test]
fn ffi_array_global_builds_arrays() {
    let make = Function::get_global("ffi.Array").unwrap();
    let a = make
        .call((1i64, "x", 2.5f64))
        .unwrap()
        .cast::<Array>()
        .unwrap();
    assert_eq!(a.get(1).unwrap().cast::<String>().unwrap(), "x");
    let size = Function::get_global("ffi.ArraySize").unwrap();
    assert_eq!(size.call((a,)).unwrap().cast::<i64>().unwrap(), 3);
}

#[test]
fn ffi_array_get_item_borrows_arrays_and_checks_the_rest() {
    let get = Function::get_global("ffi.ArrayGetItem").unwrap();
    let s = Any::from("an element longer than seven bytes");
    let a: Any = Array::from_vec(vec![Any::from(10i64), s.clone(), Any::from(30i64)]).into();
    let obj = a.as_object_ptr().unwrap();
    // SAFETY: the header is live while `a` lives.
    let count =
        |p: *mut abi::TVMFFIObject| unsafe { (*p.cast::<tvm_ffi::Object>()).strong_count() };
    assert_eq!(
        get.call((a.clone(), 0i64)).unwrap().cast::<i64>().unwrap(),
        10
    );
    let item = get.call((a.clone(), 1i64)).unwrap();
    assert_eq!(
        item.cast::<String>().unwrap(),
        "an element longer than seven bytes"
    );
    assert_eq!(
        count(s.as_object_ptr().unwrap()),
        3,
        "the result holds its own reference"
    );
    drop(item);
    // A bool index, a negative index and a list all take the typed path.
    assert_eq!(
        get.call((a.clone(), true))
            .unwrap()
            .cast::<String>()
            .unwrap(),
        s.cast::<String>().unwrap()
    );
    assert_eq!(
        get.call((a.clone(), -1i64)).unwrap().cast::<i64>().unwrap(),
        30
    );
    let list = List::new();
    list.push(7i64);
    assert_eq!(get.call((list, 0i64)).unwrap().cast::<i64>().unwrap(), 7);
    assert_eq!(count(obj), 1, "the array was borrowed");
    // Errors are those of the typed adapter.
    let err = get.call((a.clone(), 3i64)).unwrap_err();
    assert_eq!(err.kind(), "IndexError");
    assert!(
        err.message().contains("index 3 out of range for length 3"),
        "{err}"
    );
    let err = get.call((a.clone(), -4i64)).unwrap_err();
    assert_eq!(err.kind(), "IndexError");
    let err = get.call((a.clone(), "0")).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("argument #1"), "{err}");
    let err = get.call((1i64, 0i64)).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("Expected `ffi.Array`"), "{err}");
    let err = get.call((a.clone(),)).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message().contains("Mismatched number of arguments"),
        "{err}"
    );
}

#[test]
fn elements_release_their_references() {
    let s = Any::from("a heap string, longer than seven bytes");
    let before = s.clone().into_raw();
    // SAFETY: restoring the reference taken by `into_raw`.
    drop(unsafe { Any::from_raw(before) });
    let obj = s.as_object_ptr().unwrap();
    // SAFETY: the header is live while `s` lives.
    let count = || unsafe { (*obj.cast::<tvm_ffi::Object>()).strong_count() };
    let a = Array::from_vec(vec![s.clone(), s.clone()]);
    assert_eq!(count(), 3);
    drop(a);
    assert_eq!(count(), 1);
}

#[test]
fn arrays_release_objects_among_plain_values() {
    // Plain values only (released without nested bookkeeping), then an object in last place
    // (released through it), built from views and from owned values.
    let make = Function::get_global("ffi.Array").unwrap();
    let plain = make.call((1i64, 2.5f64, true)).unwrap();
    drop(plain);
    let s = Any::from("an object among plain values");
    let obj = s.as_object_ptr().unwrap();
    // SAFETY: the header is live while `s` lives.
    let count = || unsafe { (*obj.cast::<tvm_ffi::Object>()).strong_count() };
    let from_views = make.call((1i64, 2i64, s.clone())).unwrap();
    let from_vec = Array::from_vec(vec![Any::from(1i64), s.clone()]);
    assert_eq!(count(), 3);
    drop(from_views);
    drop(from_vec);
    assert_eq!(count(), 1);
    let empty = make.call(()).unwrap();
    assert_eq!(empty.cast::<Array>().unwrap().len(), 0);
}

#[test]
fn lists_are_shared_and_mutable() {
    let list = List::new();
    let alias = list.clone();
    for i in 0..10i64 {
        list.push(i);
    }
    assert_eq!(alias.len(), 10);
    alias.insert(0, "first").unwrap();
    assert_eq!(list.get(0).unwrap().cast::<String>().unwrap(), "first");
    assert_eq!(list.pop().unwrap().cast::<i64>().unwrap(), 9);
    list.set(-1, 100i64).unwrap();
    assert_eq!(alias.get(-1).unwrap().cast::<i64>().unwrap(), 100);
    assert_eq!(list.remove(1).unwrap().cast::<i64>().unwrap(), 0);
    assert_eq!(list.len(), 9);
    list.clear();
    assert!(alias.is_empty());
    let obj = list.as_object().as_raw().cast::<u8>();
    // SAFETY: a list's cell at offset 24.
    let cell = unsafe { &*obj.add(24).cast::<abi::TVMFFISeqCell>() };
    assert!(
        cell.data_deleter.is_some(),
        "list buffers always carry a deleter"
    );
}

#[test]
fn arrays_and_lists_convert_into_each_other() {
    let list: List = [1i64, 2, 3].into_iter().collect();
    let as_array = Any::from(list).cast::<Array>().unwrap();
    assert_eq!(as_array.len(), 3);
    let back = Any::from(as_array).cast::<List>().unwrap();
    assert_eq!(back.get(2).unwrap().cast::<i64>().unwrap(), 3);
}

#[test]
fn shapes_store_values_inline() {
    let s = Shape::new(&[2, 3, 4]);
    assert_eq!(&*s, &[2, 3, 4]);
    assert_eq!(s.numel(), 24);
    let made = Function::get_global("ffi.Shape")
        .unwrap()
        .call((5i64, 6i64))
        .unwrap();
    assert_eq!(made.cast::<Shape>().unwrap().as_slice(), &[5, 6]);
    let err = Function::get_global("ffi.Shape")
        .unwrap()
        .call(("x",))
        .unwrap_err();
    assert_eq!(err.kind(), "ValueError");
}

#[test]
fn dropping_deeply_nested_containers_does_not_overflow_the_stack() {
    let mut nested = Any::from(List::new());
    for _ in 0..200_000 {
        let outer = List::new();
        outer.push(nested);
        nested = Any::from(outer);
    }
    let mut array = Any::from(Array::new());
    for _ in 0..200_000 {
        array = Any::from(Array::from_vec(vec![array]));
    }
    drop(nested);
    drop(array);
}

#[test]
fn weak_references_survive_deferred_drops() {
    // Objects released deep in a nested drop (queued) with weak references outstanding: the
    // value is destroyed before the memory is freed, and the weak reference sees it gone.
    let inner = tvm_ffi::Error::new("RuntimeError", "inner");
    let weak = inner.as_object().downgrade();
    let mut nested = Any::from(inner);
    for _ in 0..1_000 {
        nested = Any::from(Array::from_vec(vec![nested]));
    }
    drop(nested);
    assert!(weak.upgrade().is_none());
}
