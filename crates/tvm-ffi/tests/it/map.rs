//! Maps and dicts: behaviour, the exact object layout, hash vectors, globals and properties.

use std::ffi::c_void;

use proptest::prelude::*;
use tvm_ffi::abi::{self, TVMFFIAny};
use tvm_ffi::containers::hash::{any_equal, any_hash, hash_bytes, hash_combine};
use tvm_ffi::containers::map::{Dict, Map, MapRead, PROBE};
use tvm_ffi::object::alloc_object;
use tvm_ffi::{Any, Bytes, Function, Object, ObjectRef, String};

// ---------------------------------------------------------------------------------------------
// Raw layout helpers
// ---------------------------------------------------------------------------------------------

const FIB: u64 = 11_400_714_819_323_198_485;

/// The fields of a map object, read from its raw bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawMap {
    obj: *const u8,
    data: *const u8,
    pub(crate) size: u64,
    slots: u64,
    deleter: usize,
}

impl RawMap {
    fn of(obj: *mut abi::TVMFFIObject) -> RawMap {
        let obj = obj.cast::<u8>().cast_const();
        // SAFETY: a live map object: the common part is 56 bytes.
        unsafe {
            RawMap {
                obj,
                data: obj.add(24).cast::<*const u8>().read(),
                size: obj.add(32).cast::<u64>().read(),
                slots: obj.add(40).cast::<u64>().read(),
                deleter: obj.add(48).cast::<usize>().read(),
            }
        }
    }

    pub(crate) fn is_small(&self) -> bool {
        self.slots >> 63 == 1
    }

    pub(crate) fn slot_count(&self) -> u64 {
        self.slots & !(1 << 63)
    }

    fn fib_shift(&self) -> u32 {
        // SAFETY: dense objects are 80 bytes.
        unsafe { self.obj.add(56).cast::<u32>().read() }
    }

    fn head(&self) -> u64 {
        // SAFETY: as above.
        unsafe { self.obj.add(64).cast::<u64>().read() }
    }

    fn tail(&self) -> u64 {
        // SAFETY: as above.
        unsafe { self.obj.add(72).cast::<u64>().read() }
    }

    fn meta(&self, i: u64) -> u8 {
        // SAFETY: `i` is below the slot count of a dense table.
        unsafe { *self.data.add((i / 16) as usize * 784 + (i % 16) as usize) }
    }

    fn item(&self, i: u64) -> *const u8 {
        // SAFETY: as above.
        unsafe {
            self.data
                .add((i / 16) as usize * 784 + 16 + (i % 16) as usize * 48)
        }
    }

    fn key(&self, i: u64) -> TVMFFIAny {
        // SAFETY: a live slot's item starts with its key.
        unsafe { self.item(i).cast::<TVMFFIAny>().read() }
    }

    fn next(&self, i: u64) -> u64 {
        // SAFETY: `next` is at offset 40 of an item.
        unsafe { self.item(i).add(40).cast::<u64>().read() }
    }

    fn prev(&self, i: u64) -> u64 {
        // SAFETY: `prev` is at offset 32 of an item.
        unsafe { self.item(i).add(32).cast::<u64>().read() }
    }

    fn home(&self, key: &TVMFFIAny) -> u64 {
        any_hash(key).wrapping_mul(FIB) >> self.fib_shift()
    }

    /// Checks every invariant of a dense table: heads at home slots, chains reach every live
    /// slot, the iteration list links exactly the live slots, and the size matches.
    pub(crate) fn check_dense(&self) {
        assert!(!self.is_small());
        let slots = self.slot_count();
        assert!(slots.is_power_of_two());
        assert_eq!(self.fib_shift(), 64 - slots.trailing_zeros());
        let mut live = 0;
        for i in 0..slots {
            let meta = self.meta(i);
            assert_ne!(meta, 0xFE, "no protected slot survives an operation");
            if meta == 0xFF {
                continue;
            }
            live += 1;
            let key = self.key(i);
            let home = self.home(&key);
            let home_meta = self.meta(home);
            assert!(
                home_meta != 0xFF && home_meta & 0x80 == 0,
                "home slot {home} is a head"
            );
            // Walk the chain from the head to slot `i`.
            let mut at = home;
            let mut steps = 0;
            while at != i {
                let jump = self.meta(at) & 0x7F;
                assert_ne!(jump, 0, "slot {i} is reachable from its home {home}");
                at = (at + PROBE[jump as usize]) & (slots - 1);
                assert!(
                    self.meta(at) & 0x80 != 0,
                    "chain members after the head are not heads"
                );
                steps += 1;
                assert!(steps <= slots);
            }
        }
        assert_eq!(live, self.size);
        // The iteration list covers the live slots, doubly linked.
        let mut count = 0;
        let mut prev = u64::MAX;
        let mut at = self.head();
        while at != u64::MAX {
            assert!(self.meta(at) != 0xFF);
            assert_eq!(self.prev(at), prev);
            prev = at;
            at = self.next(at);
            count += 1;
            assert!(count <= live);
        }
        assert_eq!(self.tail(), prev);
        assert_eq!(count, live);
    }
}

pub(crate) fn raw_map(m: &Map) -> RawMap {
    RawMap::of(m.as_object().as_raw())
}

pub(crate) fn raw_dict(d: &Dict) -> RawMap {
    RawMap::of(d.as_object().as_raw())
}

pub(crate) fn ints(values: impl IntoIterator<Item = Any>) -> Vec<i64> {
    values
        .into_iter()
        .map(|v| v.cast::<i64>().unwrap())
        .collect()
}

/// The strong count of the object held in `v`, not counting the reference made to read it.
fn strong_count(v: &Any) -> u32 {
    let obj: ObjectRef<Object> = v.cast().unwrap();
    obj.use_count() - 1
}

// ---------------------------------------------------------------------------------------------
// Probe table and hash vectors
// ---------------------------------------------------------------------------------------------

#[test]
fn probe_table_has_126_entries() {
    assert_eq!(PROBE.len(), 126);
    for (i, &d) in PROBE.iter().take(16).enumerate() {
        assert_eq!(d, i as u64);
    }
    assert_eq!(&PROBE[16..20], &[21, 28, 36, 45]);
    assert_eq!(PROBE[82], 2628);
    assert_eq!(PROBE[83], 8515);
    assert_eq!(PROBE[125], 5_209_859_154_120_846_435);
    assert!(PROBE.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn hash_bytes_vectors() {
    assert_eq!(hash_bytes(b""), 0);
    assert_eq!(hash_bytes(b"hello"), 1_819_043_398);
    assert_eq!(
        hash_bytes(b"hello"),
        u64::from_le_bytes(*b"hello\0\0\0") % 2_147_483_647
    );
    assert_eq!(hash_bytes(b"hello world!"), 1_639_549_387);
    assert_eq!(hash_bytes(b"abcdefghijklmnopqrstuvwxyz"), 537_122_896);
    assert_eq!(hash_combine(0, 0), 0x9e37_79b9);
    assert_eq!(hash_combine(65, 0), 2_654_440_008);
    assert_eq!(hash_combine(1, 1), 2_654_435_835);
}

#[test]
fn small_and_heap_strings_hash_their_content() {
    let small = Any::from("hello");
    assert_eq!(small.type_index(), abi::kTVMFFISmallStr);
    assert_eq!(
        any_hash(small.as_raw()),
        hash_combine(65, hash_bytes(b"hello"))
    );
    assert_eq!(any_hash(small.as_raw()), 4_473_483_278);
    let heap = Any::from("hello world!");
    assert_eq!(heap.type_index(), abi::kTVMFFIStr);
    assert_eq!(
        any_hash(heap.as_raw()),
        hash_combine(65, hash_bytes(b"hello world!"))
    );
    assert_eq!(any_hash(heap.as_raw()), 4_293_989_269);
    let empty = Any::from("");
    assert_eq!(any_hash(empty.as_raw()), hash_combine(65, 0));

    // Two distinct heap objects with equal content are equal keys.
    let other = Any::from(std::string::String::from("hello world!"));
    assert_ne!(heap.as_object_ptr(), other.as_object_ptr());
    assert!(any_equal(heap.as_raw(), other.as_raw()));
    assert_eq!(any_hash(heap.as_raw()), any_hash(other.as_raw()));

    // Bytes hash with their own type index and never equal strings.
    let small_bytes: Any = Bytes::from(&b"hello"[..]).into();
    let heap_bytes: Any = Bytes::from(&b"hello world!"[..]).into();
    assert_eq!(
        any_hash(small_bytes.as_raw()),
        hash_combine(66, hash_bytes(b"hello"))
    );
    assert_eq!(
        any_hash(heap_bytes.as_raw()),
        hash_combine(66, hash_bytes(b"hello world!"))
    );
    assert!(!any_equal(small.as_raw(), small_bytes.as_raw()));
    assert!(!any_equal(heap.as_raw(), heap_bytes.as_raw()));
}

#[test]
fn pod_values_hash_by_tag_and_bits() {
    let one = Any::from(1i64);
    let yes = Any::from(true);
    assert_eq!(any_hash(one.as_raw()), hash_combine(1, 1));
    assert_eq!(any_hash(yes.as_raw()), hash_combine(2, 1));
    assert_ne!(any_hash(one.as_raw()), any_hash(yes.as_raw()));
    assert!(!any_equal(one.as_raw(), yes.as_raw()));
    assert_ne!(one, yes);

    let zero = Any::from(0.0f64);
    let minus_zero = Any::from(-0.0f64);
    assert_eq!(any_hash(zero.as_raw()), 2_654_435_962);
    assert_eq!(any_hash(minus_zero.as_raw()), 9_223_372_039_509_211_770);
    assert!(!any_equal(zero.as_raw(), minus_zero.as_raw()));
    let nan = Any::from(f64::NAN);
    assert_eq!(nan, nan.clone());
    assert_eq!(Any::none(), Any::none());
    assert_ne!(Any::none(), Any::from(0i64));
}

#[test]
fn objects_hash_by_pointer() {
    let a = Map::new();
    let b = Map::new();
    let (a, b): (Any, Any) = (a.into(), b.into());
    let ptr = a.as_object_ptr().unwrap() as u64;
    assert_eq!(any_hash(a.as_raw()), hash_combine(72, ptr));
    assert_ne!(a, b);
    assert_eq!(a, a.clone());
}

#[test]
fn any_works_as_a_rust_map_key() {
    let mut set = std::collections::HashMap::new();
    set.insert(Any::from("hello world!"), 1);
    set.insert(Any::from(1i64), 2);
    set.insert(Any::from(true), 3);
    assert_eq!(
        set[&Any::from(std::string::String::from("hello world!"))],
        1
    );
    assert_eq!(set[&Any::from(1i64)], 2);
    assert_eq!(set[&Any::from(true)], 3);
}

// ---------------------------------------------------------------------------------------------
// Custom hash/equality hooks from the type attribute columns
// ---------------------------------------------------------------------------------------------

#[repr(C)]
struct CustomKey {
    base: Object,
    id: i64,
}

fn custom_key(type_index: i32, id: i64) -> Any {
    // SAFETY: repr(C) with the header first; nothing to release.
    let ptr = unsafe {
        alloc_object(
            CustomKey {
                base: Object::header(),
                id,
            },
            0,
            type_index,
        )
    };
    // SAFETY: the new reference moves into the value.
    Any::from_object(unsafe { ObjectRef::<Object>::from_raw(ptr.as_ptr().cast()) })
}

fn custom_id(v: &TVMFFIAny) -> i64 {
    // SAFETY: hooks are only called on values of the custom key types.
    unsafe { (*v.payload.v_obj.cast::<CustomKey>()).id }
}

fn register_attr(type_index: i32, name: &str, value: Any) {
    tvm_ffi::reflection::register_type_attr(type_index, name, &value).unwrap();
}

unsafe extern "C" fn c_hash(v: *const TVMFFIAny) -> i64 {
    // SAFETY: called with a valid custom key.
    custom_id(unsafe { &*v }) * 7
}

unsafe extern "C" fn c_equal(a: *const TVMFFIAny, b: *const TVMFFIAny) -> bool {
    // SAFETY: called with valid custom keys.
    unsafe { custom_id(&*a) == custom_id(&*b) }
}

#[test]
fn custom_hooks_as_functions() {
    let index =
        tvm_ffi::types::register_type("testing.map.FnKey", abi::kTVMFFIObject, 0, true).unwrap();
    let hash = Function::from_typed("hash", |v: Any| custom_id(v.as_raw()) * 3);
    let equal = Function::from_typed("equal", |a: Any, b: Any| {
        custom_id(a.as_raw()) == custom_id(b.as_raw())
    });
    register_attr(index, "__any_hash__", hash.into());
    register_attr(index, "__any_equal__", equal.into());

    let (k1, k2, k3) = (
        custom_key(index, 5),
        custom_key(index, 5),
        custom_key(index, 6),
    );
    assert_eq!(any_hash(k1.as_raw()), hash_combine(index as u64, 15));
    assert!(any_equal(k1.as_raw(), k2.as_raw()));
    assert!(!any_equal(k1.as_raw(), k3.as_raw()));
    let mut m = Map::new();
    m.insert(k1.clone(), "five");
    assert_eq!(
        m.get(&k2).unwrap().cast::<std::string::String>().unwrap(),
        "five"
    );
    assert!(m.get(&k3).is_none());
    // Dense tables use the hooks too.
    for i in 0..20 {
        m.insert(custom_key(index, 100 + i), i);
    }
    assert_eq!(
        m.get(&custom_key(index, 113))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        13
    );
    assert_eq!(
        m.get(&k2).unwrap().cast::<std::string::String>().unwrap(),
        "five"
    );
    raw_map(&m).check_dense();
}

#[test]
fn custom_hooks_as_c_function_pointers() {
    let index =
        tvm_ffi::types::register_type("testing.map.CKey", abi::kTVMFFIObject, 0, true).unwrap();
    register_attr(index, "__any_hash__", Any::from(c_hash as *mut c_void));
    register_attr(index, "__any_equal__", Any::from(c_equal as *mut c_void));
    let (k1, k2) = (custom_key(index, 4), custom_key(index, 4));
    assert_eq!(any_hash(k1.as_raw()), hash_combine(index as u64, 28));
    assert!(any_equal(k1.as_raw(), k2.as_raw()));
    let d = Dict::new();
    d.insert(k1, 1i64);
    assert!(d.contains_key(&k2));
    assert_eq!(d.insert(k2, 2i64).unwrap().cast::<i64>().unwrap(), 1);
    assert_eq!(d.len(), 1);
}

/// Hooks of `testing.map.SafeKey`: keys by id.
struct IdHooks;

impl tvm_ffi::containers::hash::AnyHashHooks for IdHooks {
    fn hash(value: tvm_ffi::AnyView<'_>) -> i64 {
        custom_id(value.as_raw()) * 11
    }
    fn equal(a: tvm_ffi::AnyView<'_>, b: tvm_ffi::AnyView<'_>) -> bool {
        custom_id(a.as_raw()) == custom_id(b.as_raw())
    }
}

#[test]
fn custom_hooks_through_the_safe_registration() {
    let index =
        tvm_ffi::types::register_type("testing.map.SafeKey", abi::kTVMFFIObject, 0, true).unwrap();
    tvm_ffi::containers::hash::register_hooks::<IdHooks>(index).unwrap();
    let (k1, k2, k3) = (
        custom_key(index, 3),
        custom_key(index, 3),
        custom_key(index, 4),
    );
    assert_eq!(any_hash(k1.as_raw()), hash_combine(index as u64, 33));
    assert!(any_equal(k1.as_raw(), k2.as_raw()));
    assert!(!any_equal(k1.as_raw(), k3.as_raw()));
    let d = Dict::new();
    d.insert(k1, 1i64);
    assert!(d.contains_key(&k2));
    assert!(!d.contains_key(&k3));
}

// ---------------------------------------------------------------------------------------------
// Behaviour
// ---------------------------------------------------------------------------------------------

#[test]
fn small_layout_then_dense_at_five_entries() {
    let mut m = Map::new();
    let obj = m.as_object().as_raw();
    let raw = raw_map(&m);
    assert!(raw.is_small());
    assert_eq!(raw.slot_count(), 2);
    assert_eq!(raw.data, raw.obj.wrapping_add(56));
    assert_eq!((raw.size, raw.deleter), (0, 0));

    let mut announced = Vec::new();
    for i in 0..4i64 {
        m.insert(i, i * 10);
        let raw = raw_map(&m);
        assert!(raw.is_small());
        assert_eq!(raw.size, i as u64 + 1);
        announced.push(raw.slot_count());
        // The pairs are inline, in insertion order.
        // SAFETY: `size` pairs of two values follow the common part.
        let key = unsafe { raw.obj.add(56 + 32 * i as usize).cast::<TVMFFIAny>().read() };
        assert_eq!(key.type_index, abi::kTVMFFIInt);
        // SAFETY: ints store `v_int64`.
        assert_eq!(unsafe { key.payload.v_int64 }, i);
    }
    assert_eq!(announced, [2, 2, 4, 4]);
    m.insert(4i64, 40i64);
    let raw = raw_map(&m);
    assert!(!raw.is_small());
    assert_eq!((raw.slot_count(), raw.fib_shift(), raw.size), (8, 61, 5));
    assert_ne!(raw.deleter, 0);
    assert_ne!(raw.data, raw.obj.wrapping_add(56));
    raw.check_dense();
    // Unique: the switch happened in place.
    assert_eq!(m.as_object().as_raw(), obj);
    assert_eq!(ints(m.keys()), [0, 1, 2, 3, 4]);
    assert_eq!(ints(m.values()), [0, 10, 20, 30, 40]);
}

#[test]
fn slot_counts_grow_by_doubling() {
    let mut m = Map::new();
    let mut seen = Vec::new();
    for i in 0..40i64 {
        m.insert(i, i);
        let raw = raw_map(&m);
        seen.push((i + 1, raw.is_small(), raw.slot_count()));
        if !raw.is_small() {
            raw.check_dense();
        }
    }
    for &(n, small, slots) in &seen {
        match n {
            1..=4 => assert!(small && slots == if n <= 2 { 2 } else { 4 }, "{seen:?}"),
            5..=7 => assert!(!small && slots == 8, "{seen:?}"),
            9..=15 => assert_eq!(slots, 16, "{seen:?}"),
            17..=31 => assert_eq!(slots, 32, "{seen:?}"),
            33..=40 => assert_eq!(slots, 64, "{seen:?}"),
            // 8, 16 and 32 entries fit exactly when the last key lands in an empty home slot.
            8 => assert!(slots == 8 || slots == 16, "{seen:?}"),
            16 => assert!(slots == 16 || slots == 32, "{seen:?}"),
            32 => assert!(slots == 32 || slots == 64, "{seen:?}"),
            _ => unreachable!(),
        }
    }
}

#[test]
fn dense_layout_fields_and_homes_in_a_32_slot_table() {
    let keys: Vec<Any> = (0..20)
        .map(|i| {
            if i % 2 == 0 {
                Any::from(i as i64 * 977)
            } else {
                Any::from(format!("key number {i}"))
            }
        })
        .collect();
    // Inserted one by one (a collected map is sized for 20 at once: 64 slots).
    let mut m = Map::new();
    for k in &keys {
        m.insert(k.clone(), 0i64);
    }
    let raw = raw_map(&m);
    assert_eq!((raw.slot_count(), raw.fib_shift(), raw.size), (32, 59, 20));
    raw.check_dense();
    for key in &keys {
        let home = raw.home(key.as_raw());
        let meta = raw.meta(home);
        assert!(
            meta != 0xFF && meta & 0x80 == 0,
            "home of {key:?} is a chain head"
        );
    }
    // The iteration list starts and ends at the first and last inserted keys.
    assert!(any_equal(&raw.key(raw.head()), keys[0].as_raw()));
    assert!(any_equal(&raw.key(raw.tail()), keys[19].as_raw()));
    // SAFETY: the object header is at offset 0.
    let type_index = unsafe { raw.obj.add(8).cast::<i32>().read() };
    assert_eq!(type_index, 72);
    let d: Dict = keys.iter().cloned().map(|k| (k, 0i64)).collect();
    // SAFETY: as above.
    assert_eq!(unsafe { raw_dict(&d).obj.add(8).cast::<i32>().read() }, 76);
}

#[test]
fn insertion_order_overwrite_and_erase() {
    let order = [17i64, 3, 99, -4, 0, 56, 8, 1000, 7, 33, 21, 5];
    for len in [3usize, 4, 5, order.len()] {
        let mut m = Map::new();
        for &k in &order[..len] {
            assert!(m.insert(k, k * 2).is_none());
        }
        assert_eq!(ints(m.keys()), &order[..len]);
        // Overwriting keeps the position and returns the old value.
        let old = m.insert(order[1], -1i64).unwrap();
        assert_eq!(old.cast::<i64>().unwrap(), order[1] * 2);
        assert_eq!(ints(m.keys()), &order[..len]);
        assert_eq!(m.get(&order[1]).unwrap().cast::<i64>().unwrap(), -1);
        // Erase, then iterate.
        assert_eq!(
            m.remove(&order[0]).unwrap().cast::<i64>().unwrap(),
            order[0] * 2
        );
        assert!(m.remove(&order[0]).is_none());
        let mut expected: Vec<i64> = order[1..len].to_vec();
        assert_eq!(ints(m.keys()), expected);
        if len > 4 {
            m.remove(&order[len - 1]);
            expected.pop();
            m.remove(&order[2]);
            expected.remove(1);
            assert_eq!(ints(m.keys()), expected);
            raw_map(&m).check_dense();
        }
        assert_eq!(m.len(), expected.len());
        // Re-inserting a removed key appends it.
        m.insert(order[0], 0i64);
        expected.push(order[0]);
        assert_eq!(ints(m.keys()), expected);
    }
}

#[test]
fn lookups_accept_many_key_forms() {
    let mut m = Map::new();
    m.insert("short", 1i64);
    m.insert("a much longer key", 2i64);
    m.insert(7i32, 3i64);
    let heap = Any::from("a much longer key");
    assert_eq!(m.get("short").unwrap().cast::<i64>().unwrap(), 1);
    assert_eq!(m.get(&"short").unwrap().cast::<i64>().unwrap(), 1);
    assert_eq!(
        m.get(&String::new("short")).unwrap().cast::<i64>().unwrap(),
        1
    );
    assert_eq!(m.get(&heap).unwrap().cast::<i64>().unwrap(), 2);
    assert_eq!(m.get(&heap.as_view()).unwrap().cast::<i64>().unwrap(), 2);
    assert_eq!(m.get(&7i64).unwrap().cast::<i64>().unwrap(), 3);
    assert!(m.get(&7.0f64).is_none());
    assert!(m.get(&true).is_none());
    assert!(m.contains_key("short") && !m.contains_key("missing"));
}

#[test]
fn map_is_copy_on_write() {
    let mut a: Map = (0..10i64).map(|i| (i, i)).collect();
    let b = a.clone();
    assert!(a.as_object().ptr_eq(b.as_object()));
    a.insert(100i64, 100i64);
    assert!(!a.as_object().ptr_eq(b.as_object()));
    assert_eq!(b.len(), 10);
    assert!(b.get(&100i64).is_none());
    assert_eq!(a.len(), 11);
    raw_map(&a).check_dense();
    raw_map(&b).check_dense();

    // Removing a missing key never copies.
    let c = a.clone();
    assert!(a.remove(&12345i64).is_none());
    assert!(a.as_object().ptr_eq(c.as_object()));
    a.remove(&3i64);
    assert!(!a.as_object().ptr_eq(c.as_object()));
    assert!(c.contains_key(&3i64) && !a.contains_key(&3i64));

    // Small maps too.
    let mut s: Map = [("x", 1i64)].into_iter().collect();
    let t = s.clone();
    s.insert("y", 2i64);
    assert_eq!((s.len(), t.len()), (2, 1));
    // A unique map mutates in place.
    let ptr = s.as_object().as_raw();
    s.insert("z", 3i64);
    s.remove("x");
    assert_eq!(s.as_object().as_raw(), ptr);
}

#[test]
fn dict_shares_mutation() {
    let d = Dict::new();
    let e = d.clone();
    let ptr = d.as_object().as_raw();
    for i in 0..50i64 {
        e.insert(i, i * i);
    }
    assert_eq!(d.len(), 50);
    assert_eq!(d.as_object().as_raw(), ptr, "a dict grows in place");
    assert_eq!(d.get(&7i64).unwrap().cast::<i64>().unwrap(), 49);
    raw_dict(&d).check_dense();
    d.remove(&7i64);
    assert!(!e.contains_key(&7i64));
    e.clear();
    assert!(d.is_empty());
    assert!(d.iter().next().is_none());
    d.insert("again", 1i64);
    assert_eq!(e.len(), 1);
    raw_dict(&d).check_dense();
}

#[test]
fn mutating_a_dict_while_iterating_is_safe() {
    let d: Dict = (0..6i64).map(|i| (i, i)).collect();
    let mut seen = 0;
    for (k, _) in d.iter() {
        seen += 1;
        // Grows (rehashes) and erases behind the iterator.
        for j in 0..40i64 {
            d.insert(1000 + j + k.cast::<i64>().unwrap() * 100, j);
        }
        d.remove(&k);
        if seen > 1000 {
            break;
        }
    }
    assert!(seen >= 1);
    raw_dict(&d).check_dense();
}

#[test]
fn equality_debug_and_conversions() {
    let a: Map = [(1i64, "one"), (2, "two"), (3, "three")]
        .into_iter()
        .collect();
    let b: Map = [(3i64, "three"), (1, "one"), (2, "two")]
        .into_iter()
        .collect();
    let c: Map = [(3i64, "three"), (1, "one"), (2, "TWO")]
        .into_iter()
        .collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, Map::new());
    assert_eq!(format!("{a:?}"), r#"{1: "one", 2: "two", 3: "three"}"#);

    // Map <-> Any, Dict accepted as a Map by copying and the other way round.
    let any: Any = a.clone().into();
    assert_eq!(any.type_index(), 72);
    let back: Map = any.cast().unwrap();
    assert!(back.as_object().ptr_eq(a.as_object()));
    let as_dict: Dict = any.cast().unwrap();
    assert_eq!(as_dict.as_object().type_index(), 76);
    assert_eq!(as_dict.len(), 3);
    as_dict.insert(4i64, "four");
    assert_eq!(a.len(), 3);
    let dict_any: Any = as_dict.clone().into();
    let as_map: Map = dict_any.cast().unwrap();
    assert_eq!(as_map.as_object().type_index(), 72);
    assert_eq!(ints(as_map.keys()), [1, 2, 3, 4]);
    assert!(Any::from(1i64).cast::<Map>().is_err());
    let err = Any::from(1i64).cast::<Dict>().unwrap_err();
    assert!(err.message().contains("ffi.Dict"), "{err}");
}

#[test]
fn large_maps_stay_consistent() {
    let mut m = Map::new();
    for i in 0..10_000i64 {
        m.insert(i * 7919, i);
    }
    assert_eq!(m.len(), 10_000);
    for i in (0..10_000i64).step_by(2) {
        assert_eq!(m.remove(&(i * 7919)).unwrap().cast::<i64>().unwrap(), i);
    }
    raw_map(&m).check_dense();
    assert_eq!(
        ints(m.values()),
        (0..10_000).filter(|i| i % 2 == 1).collect::<Vec<_>>()
    );
    for i in 0..10_000i64 {
        assert_eq!(m.contains_key(&(i * 7919)), i % 2 == 1);
    }
}

/// A deterministic pseudo-random stream (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

#[test]
fn random_churn_keeps_chains_and_order() {
    let d = Dict::new();
    let mut model: Vec<(i64, i64)> = Vec::new();
    let mut rng = Lcg(42);
    for step in 0..20_000i64 {
        let key = rng.next(3000) as i64;
        if rng.next(3) < 2 {
            d.insert(key, step);
            match model.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = step,
                None => model.push((key, step)),
            }
        } else {
            let removed = d.remove(&key).map(|v| v.cast::<i64>().unwrap());
            let pos = model.iter().position(|(k, _)| *k == key);
            assert_eq!(removed, pos.map(|p| model.remove(p).1));
        }
        if step % 2500 == 0 && !raw_dict(&d).is_small() {
            raw_dict(&d).check_dense();
        }
    }
    raw_dict(&d).check_dense();
    let got: Vec<(i64, i64)> = d
        .iter()
        .map(|(k, v)| (k.cast().unwrap(), v.cast().unwrap()))
        .collect();
    assert_eq!(got, model);
}

#[test]
fn reference_counts_return_after_drop() {
    let key = Any::from("a heap string key");
    let value = Any::from("a heap string value");
    let start = (strong_count(&key), strong_count(&value));
    {
        let mut m = Map::new();
        let d = Dict::new();
        for i in 0..30i64 {
            m.insert(i, value.clone());
            d.insert(i, value.clone());
        }
        m.insert(key.clone(), value.clone());
        d.insert(key.clone(), value.clone());
        let snapshot = m.clone();
        m.insert(key.clone(), 1i64);
        m.remove(&5i64);
        d.remove(&key);
        d.insert(key.clone(), value.clone());
        let copy: Dict = Any::from(snapshot.clone()).cast().unwrap();
        assert!(strong_count(&value) > start.1);
        d.clear();
        drop((snapshot, copy));
        let small: Map = [(key.clone(), value.clone())].into_iter().collect();
        drop(small);
    }
    assert_eq!((strong_count(&key), strong_count(&value)), start);
}

// ---------------------------------------------------------------------------------------------
// Global functions
// ---------------------------------------------------------------------------------------------

pub(crate) fn global(name: &str) -> Function {
    Function::get_global(name).unwrap_or_else(|| panic!("{name} is registered"))
}

#[test]
fn ffi_map_globals() {
    let m = global("ffi.Map")
        .call((1i64, "a", "b", 2i64, 1i64, "c"))
        .unwrap();
    assert_eq!(m.type_index(), 72);
    assert_eq!(
        global("ffi.MapSize")
            .call((m.clone(),))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        2
    );
    let first = global("ffi.MapGetItem").call((m.clone(), 1i64)).unwrap();
    assert_eq!(first.cast::<std::string::String>().unwrap(), "c");
    assert_eq!(
        global("ffi.MapCount")
            .call((m.clone(), "b"))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        1
    );
    assert_eq!(
        global("ffi.MapCount")
            .call((m.clone(), "z"))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        0
    );

    let err = global("ffi.MapGetItem")
        .call((m.clone(), "missing key"))
        .unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("\"missing key\""), "{err}");

    let err = global("ffi.Map").call((1i64, 2i64, 3i64)).unwrap_err();
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains('3'), "{err}");

    let invalid = global("ffi.GetInvalidObject").call(()).unwrap();
    let missing = global("ffi.MapGetItemOrMissing")
        .call((m.clone(), 99i64))
        .unwrap();
    assert_eq!(missing.as_object_ptr(), invalid.as_object_ptr());
    let present = global("ffi.MapGetItemOrMissing")
        .call((m.clone(), "b"))
        .unwrap();
    assert_eq!(present.cast::<i64>().unwrap(), 2);

    // Iteration functor: g(0) key, g(1) value, g(2) advance.
    let g: Function = global("ffi.MapForwardIterFunctor")
        .call((m.clone(),))
        .unwrap()
        .cast()
        .unwrap();
    let mut items = Vec::new();
    loop {
        let k = g.call((0i64,)).unwrap();
        let v = g.call((1i64,)).unwrap();
        items.push(format!("{k:?}={v:?}"));
        if !g.call((2i64,)).unwrap().cast::<bool>().unwrap() {
            break;
        }
    }
    assert_eq!(items, [r#"1="c""#, r#""b"=2"#]);
    assert_eq!(g.call((0i64,)).unwrap_err().kind(), "IndexError");

    // A Dict is accepted where a Map is expected.
    let d: Any = Dict::from_iter([(1i64, 2i64)]).into();
    assert_eq!(
        global("ffi.MapSize")
            .call((d,))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        1
    );
}

#[test]
fn ffi_dict_globals() {
    let d = global("ffi.Dict").call(("k", 1i64)).unwrap();
    assert_eq!(d.type_index(), 76);
    let dict: Dict = d.cast().unwrap();
    global("ffi.DictSetItem")
        .call((d.clone(), "long key number two", 2i64))
        .unwrap();
    for i in 0..10i64 {
        global("ffi.DictSetItem").call((d.clone(), i, i)).unwrap();
    }
    assert_eq!(dict.len(), 12, "mutation through the global is shared");
    assert_eq!(
        global("ffi.DictSize")
            .call((d.clone(),))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        12
    );
    let v = global("ffi.DictGetItem")
        .call((d.clone(), "long key number two"))
        .unwrap();
    assert_eq!(v.cast::<i64>().unwrap(), 2);
    assert_eq!(
        global("ffi.DictCount")
            .call((d.clone(), 3i64))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        1
    );
    global("ffi.DictErase").call((d.clone(), 3i64)).unwrap();
    global("ffi.DictErase").call((d.clone(), 12345i64)).unwrap();
    assert_eq!(
        global("ffi.DictCount")
            .call((d.clone(), 3i64))
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        0
    );
    let err = global("ffi.DictGetItem")
        .call((d.clone(), 3i64))
        .unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains('3'), "{err}");
    let invalid = global("ffi.GetInvalidObject").call(()).unwrap();
    let missing = global("ffi.DictGetItemOrMissing")
        .call((d.clone(), 3i64))
        .unwrap();
    assert_eq!(missing.as_object_ptr(), invalid.as_object_ptr());

    let g: Function = global("ffi.DictForwardIterFunctor")
        .call((d.clone(),))
        .unwrap()
        .cast()
        .unwrap();
    let mut keys = vec![g.call((0i64,)).unwrap()];
    while g.call((2i64,)).unwrap().cast::<bool>().unwrap() {
        keys.push(g.call((0i64,)).unwrap());
    }
    assert_eq!(keys, dict.keys().collect::<Vec<_>>());
    assert_eq!(keys.len(), 11);

    global("ffi.DictClear").call((d.clone(),)).unwrap();
    assert!(dict.is_empty());
    assert_eq!(
        global("ffi.Dict").call((1i64,)).unwrap_err().kind(),
        "ValueError"
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, i64),
    Remove(u8),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0u8..40, any::<i64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        1 => (0u8..40).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 0..200)
}

fn int_key(k: u8) -> Any {
    Any::from(i64::from(k))
}

fn str_key(k: u8) -> Any {
    // Even keys are small strings, odd ones heap strings.
    if k.is_multiple_of(2) {
        Any::from(format!("k{k}"))
    } else {
        Any::from(format!("heap string key {k}"))
    }
}

/// Applies `ops` to a map, a dict and a `Vec` model, checking them against each other.
fn run_model(ops: &[Op], key: fn(u8) -> Any) -> std::result::Result<(), TestCaseError> {
    let mut map = Map::new();
    let dict = Dict::new();
    let mut model: Vec<(u8, i64)> = Vec::new();
    let mut snapshot: Option<(Map, Vec<(u8, i64)>)> = None;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Insert(k, v) => {
                let old = model
                    .iter_mut()
                    .find(|(mk, _)| *mk == k)
                    .map(|e| std::mem::replace(&mut e.1, v));
                if old.is_none() {
                    model.push((k, v));
                }
                let from_map = map.insert(key(k), v).map(|a| a.cast::<i64>().unwrap());
                let from_dict = dict.insert(key(k), v).map(|a| a.cast::<i64>().unwrap());
                prop_assert_eq!(from_map, old);
                prop_assert_eq!(from_dict, old);
            }
            Op::Remove(k) => {
                let old = model
                    .iter()
                    .position(|(mk, _)| *mk == k)
                    .map(|p| model.remove(p).1);
                prop_assert_eq!(map.remove(&key(k)).map(|a| a.cast::<i64>().unwrap()), old);
                prop_assert_eq!(dict.remove(&key(k)).map(|a| a.cast::<i64>().unwrap()), old);
            }
        }
        if step == ops.len() / 2 {
            snapshot = Some((map.clone(), model.clone()));
        }
        let expected: Vec<(Any, i64)> = model.iter().map(|&(k, v)| (key(k), v)).collect();
        let got_map: Vec<(Any, i64)> = map.iter().map(|(k, v)| (k, v.cast().unwrap())).collect();
        let got_dict: Vec<(Any, i64)> = dict.iter().map(|(k, v)| (k, v.cast().unwrap())).collect();
        prop_assert_eq!(&got_map, &expected);
        prop_assert_eq!(&got_dict, &expected);
        prop_assert_eq!(map.len(), model.len());
        prop_assert_eq!(dict.len(), model.len());
    }
    for k in 0..40u8 {
        let expected = model.iter().find(|(mk, _)| *mk == k).map(|e| e.1);
        prop_assert_eq!(map.get(&key(k)).map(|a| a.cast::<i64>().unwrap()), expected);
        prop_assert_eq!(
            dict.get(&key(k)).map(|a| a.cast::<i64>().unwrap()),
            expected
        );
    }
    if !raw_map(&map).is_small() {
        raw_map(&map).check_dense();
    }
    if !raw_dict(&dict).is_small() {
        raw_dict(&dict).check_dense();
    }
    // Copy-on-write: the snapshot still shows the state it was taken in.
    if let Some((snap, snap_model)) = snapshot {
        let got: Vec<(Any, i64)> = snap.iter().map(|(k, v)| (k, v.cast().unwrap())).collect();
        let expected: Vec<(Any, i64)> = snap_model.iter().map(|&(k, v)| (key(k), v)).collect();
        prop_assert_eq!(got, expected);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn int_keys_match_a_vec_model(ops in ops()) {
        run_model(&ops, int_key)?;
    }

    #[test]
    fn string_keys_match_a_vec_model(ops in ops()) {
        run_model(&ops, str_key)?;
    }

    #[test]
    fn map_equality_ignores_order(
        pairs in prop::collection::btree_map(any::<i32>(), any::<i64>(), 0..30),
        rotate in 0usize..30,
    ) {
        let mut entries: Vec<(i32, i64)> = pairs.into_iter().collect();
        let a: Map = entries.iter().copied().collect();
        if !entries.is_empty() {
            let r = rotate % entries.len();
            entries.rotate_left(r);
        }
        entries.reverse();
        let b: Map = entries.iter().copied().collect();
        prop_assert_eq!(&a, &b);
        if let Some(&(k, v)) = entries.first() {
            let mut c = b.clone();
            c.insert(k, v.wrapping_add(1));
            prop_assert_ne!(&a, &c);
            prop_assert_eq!(&a, &b);
            let mut d = b.clone();
            d.remove(&k);
            prop_assert_ne!(&a, &d);
        }
    }

    #[test]
    fn reference_counts_are_restored(ops in ops()) {
        let value = Any::from("a shared heap string value");
        let key = Any::from("a shared heap string key");
        let start = (strong_count(&value), strong_count(&key));
        {
            let mut map = Map::new();
            let dict = Dict::new();
            let mut clones = Vec::new();
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    Op::Insert(k, _) => {
                        let k: Any = if k == 0 { key.clone() } else { int_key(k) };
                        map.insert(k.clone(), value.clone());
                        dict.insert(value.clone(), k);
                    }
                    Op::Remove(k) => {
                        map.remove(&if k == 0 { key.clone() } else { int_key(k) });
                        dict.remove(&value);
                    }
                }
                if i % 17 == 0 {
                    clones.push(map.clone());
                }
            }
        }
        prop_assert_eq!((strong_count(&value), strong_count(&key)), start);
    }
}

#[test]
fn dropping_deeply_nested_maps_does_not_overflow_the_stack() {
    let mut nested = Any::from(Map::new());
    for i in 0..100_000i64 {
        let mut outer = Map::new();
        outer.insert(i, nested);
        nested = Any::from(outer);
    }
    drop(nested);
}

/// A BigInt value made by the C API from little-endian words.
fn big_int(words: &[i64]) -> tvm_ffi::Any {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let array = tvm_ffi::abi::TVMFFIByteArray::from_bytes(&bytes);
    let mut out = tvm_ffi::abi::TVMFFIAny::NONE;
    // SAFETY: `array` views `bytes` for the call; `out` receives an owned value.
    let rc = unsafe { tvm_ffi::abi::TVMFFIBigIntFromByteArray(&array, &mut out) };
    assert_eq!(rc, 0);
    // SAFETY: a successful call writes an owned value.
    unsafe { tvm_ffi::Any::from_raw(out) }
}

#[test]
fn keys_wider_than_64_bits_are_found_by_value() {
    // Touch the registry: the core's type attributes register with its functions.
    tvm_ffi::Function::get_global("ffi.Map").unwrap();
    let wide = big_int(&[1, 2]);
    let same = big_int(&[1, 2]);
    let other = big_int(&[1, 3]);
    assert_eq!(wide.type_index(), tvm_ffi::abi::kTVMFFIBigInt);
    assert_ne!(wide.as_object_ptr(), same.as_object_ptr());
    let map: Map = [(wide, tvm_ffi::Any::from(7i64))].into_iter().collect();
    assert_eq!(map.get(&same).unwrap().cast::<i64>().unwrap(), 7);
    assert!(map.get(&other).is_none());
}
