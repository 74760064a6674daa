//! Maps and dicts built in one go (`ffi.Map`/`ffi.Dict` from packed pairs, `with_capacity`,
//! `collect`): the table is sized once, duplicates keep their first position, and growth past
//! the reserved room stays consistent.

use tvm_ffi::containers::map::{Dict, Map, MapRead};
use tvm_ffi::{Any, String};

use super::map::{global, ints, raw_dict, raw_map};

/// Packed arguments `(k0, v0, k1, v1, ...)` of int keys and values.
fn int_pairs(pairs: &[(i64, i64)]) -> Vec<Any> {
    pairs
        .iter()
        .flat_map(|&(k, v)| [Any::from(k), Any::from(v)])
        .collect()
}

#[test]
fn ffi_map_of_eight_pairs_is_sized_once() {
    let pairs: Vec<(i64, i64)> = (0..8).map(|i| (i, i * 10)).collect();
    let m: Map = global("ffi.Map")
        .call(int_pairs(&pairs).as_slice())
        .unwrap()
        .cast()
        .unwrap();
    let raw = raw_map(&m);
    assert!(!raw.is_small());
    assert_eq!((raw.slot_count(), raw.size), (16, 8));
    raw.check_dense();
    assert_eq!(ints(m.keys()), (0..8).collect::<Vec<_>>());
    assert_eq!(ints(m.values()), (0..8).map(|i| i * 10).collect::<Vec<_>>());
    for i in 0..8i64 {
        assert_eq!(m.get(&i).unwrap().cast::<i64>().unwrap(), i * 10);
    }
    assert!(m.get(&8i64).is_none());
}

#[test]
fn ffi_map_with_duplicate_keys_keeps_first_positions_and_last_values() {
    // 40 pairs over 13 distinct keys (ints and strings that equal each other's forms).
    let mut args = Vec::new();
    let mut model: Vec<(std::string::String, i64)> = Vec::new();
    for i in 0..40i64 {
        let key = format!("key number {}", i % 13);
        args.push(Any::from(key.as_str()));
        args.push(Any::from(i));
        match model.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = i,
            None => model.push((key, i)),
        }
    }
    for name in ["ffi.Map", "ffi.Dict"] {
        let built = global(name).call(args.as_slice()).unwrap();
        let (keys, values, raw) = if name == "ffi.Map" {
            let m: Map = built.cast().unwrap();
            (m.keys().collect::<Vec<_>>(), ints(m.values()), raw_map(&m))
        } else {
            let d: Dict = built.cast().unwrap();
            (d.keys().collect::<Vec<_>>(), ints(d.values()), raw_dict(&d))
        };
        let keys: Vec<std::string::String> = keys
            .into_iter()
            .map(|k| k.cast::<String>().unwrap().to_string())
            .collect();
        assert_eq!(
            keys,
            model.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
        );
        assert_eq!(values, model.iter().map(|(_, v)| *v).collect::<Vec<_>>());
        // Sized for 40 pairs: 128 slots, however many keys were distinct.
        assert_eq!((raw.slot_count(), raw.size), (128, 13));
        raw.check_dense();
    }
}

#[test]
fn ffi_map_of_few_pairs_stays_small() {
    for n in 0..=4i64 {
        let pairs: Vec<(i64, i64)> = (0..n).map(|i| (i, -i)).collect();
        let m: Map = global("ffi.Map")
            .call(int_pairs(&pairs).as_slice())
            .unwrap()
            .cast()
            .unwrap();
        let raw = raw_map(&m);
        assert!(raw.is_small());
        assert_eq!(raw.size, n as u64);
        assert_eq!(ints(m.keys()), (0..n).collect::<Vec<_>>());
    }
    // Duplicates within the small layout.
    let m: Map = global("ffi.Map")
        .call(int_pairs(&[(1, 1), (2, 2), (1, 3), (2, 4)]).as_slice())
        .unwrap()
        .cast()
        .unwrap();
    assert_eq!((ints(m.keys()), ints(m.values())), (vec![1, 2], vec![3, 4]));
}

#[test]
fn ffi_map_rejects_an_odd_count_and_releases_converted_pairs() {
    let err = global("ffi.Map").call((1i64, 2i64, 3i64)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("ffi.Map expects an even number"),
        "{err}"
    );
    let err = global("ffi.Dict").call(("a",)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(
        err.message().contains("ffi.Dict expects an even number"),
        "{err}"
    );
}

#[test]
fn growth_past_the_reserved_room_stays_consistent() {
    let mut m = Map::with_capacity(5);
    assert_eq!(raw_map(&m).slot_count(), 16);
    let d = Dict::with_capacity(5);
    for i in 0..100i64 {
        m.insert(i, i + 1);
        d.insert(i, i + 1);
        if i % 7 == 0 {
            raw_map(&m).check_dense();
            raw_dict(&d).check_dense();
        }
    }
    for i in 0..100i64 {
        assert_eq!(m.get(&i).unwrap().cast::<i64>().unwrap(), i + 1);
        assert_eq!(d.get(&i).unwrap().cast::<i64>().unwrap(), i + 1);
    }
    assert_eq!(ints(m.keys()), (0..100).collect::<Vec<_>>());
    assert_eq!(ints(d.keys()), (0..100).collect::<Vec<_>>());
    assert_eq!(raw_map(&m).slot_count(), 128);
    // Small capacities keep the small layout, which grows as usual.
    let mut small = Map::with_capacity(4);
    assert!(raw_map(&small).is_small());
    for i in 0..6i64 {
        small.insert(i, i);
    }
    raw_map(&small).check_dense();
    assert_eq!(ints(small.keys()), (0..6).collect::<Vec<_>>());
}

#[test]
fn collect_reserves_from_the_size_hint() {
    let m: Map = (0..9i64).map(|i| (i, i)).collect();
    assert_eq!((raw_map(&m).slot_count(), m.len()), (32, 9));
    raw_map(&m).check_dense();
    let d: Dict = (0..9i64).map(|i| (i % 3, i)).collect();
    assert_eq!(
        (ints(d.keys()), ints(d.values())),
        (vec![0, 1, 2], vec![6, 7, 8])
    );
    raw_dict(&d).check_dense();
}

#[test]
fn ffi_map_get_item_borrows_maps_and_checks_the_rest() {
    let get = global("ffi.MapGetItem");
    let value = Any::from("a value longer than seven bytes");
    let pairs: Map = (0..8i64).map(|i| (i, value.clone())).collect();
    let m: Any = pairs.clone().into();
    drop(pairs);
    let obj = m.as_object_ptr().unwrap();
    // SAFETY: the headers are live while `m` and `value` live.
    let count = |p: *mut tvm_ffi::abi::TVMFFIObject| unsafe {
        (*p.cast::<tvm_ffi::Object>()).strong_count()
    };
    let before = count(value.as_object_ptr().unwrap());
    let got = get.call((m.clone(), 3i64)).unwrap();
    assert_eq!(got.as_object_ptr(), value.as_object_ptr());
    assert_eq!(count(value.as_object_ptr().unwrap()), before + 1);
    drop(got);
    assert_eq!(count(obj), 1, "the map was borrowed");
    // A missing key is the adapter's KeyError, naming the key.
    let err = get.call((m.clone(), 8i64)).unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("key 8 is not in Map"), "{err}");
    // Keys equal across forms: a small string finds a heap string key and back.
    let m2: Any = Map::from_iter([("short", 1i64), ("a key longer than seven bytes", 2i64)]).into();
    assert_eq!(
        get.call((m2.clone(), "short"))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        1
    );
    let long = Any::from("a key longer than seven bytes");
    assert_eq!(get.call((m2, long)).unwrap().cast::<i64>().unwrap(), 2);
    // A dict is accepted (the adapter copies it); bad arguments are TypeErrors.
    let d: Any = Dict::from_iter([(1i64, 5i64)]).into();
    assert_eq!(
        get.call((d.clone(), 1i64)).unwrap().cast::<i64>().unwrap(),
        5
    );
    let err = get.call((1i64, 1i64)).unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("Expected `ffi.Map`"), "{err}");
    let err = get.call((m.clone(),)).unwrap_err();
    assert!(
        err.message().contains("Mismatched number of arguments"),
        "{err}"
    );
    // ffi.DictGetItem borrows dicts the same way.
    let dget = global("ffi.DictGetItem");
    assert_eq!(
        dget.call((d.clone(), 1i64)).unwrap().cast::<i64>().unwrap(),
        5
    );
    assert_eq!(count(d.as_object_ptr().unwrap()), 1);
    let err = dget.call((d, 2i64)).unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("key 2 is not in Dict"), "{err}");
}
