//! The `containers` target: an op-code interpreter over the fuzz bytes that drives `Dict`, `Map`
//! (copy-on-write, with snapshots), `List` and `Array` next to a model built on `Vec`, checking
//! every answer against the model.

use tvm_ffi::abi;
use tvm_ffi::string::bytes_of_any;
use tvm_ffi::{Any, Array, Bytes, Dict, List, Map, MapRead};

use crate::input::Input;

/// A value as the model sees it. Keys are the scalar variants.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    None,
    Int(i64),
    Bool(bool),
    /// A float by its bits (tables compare floats bit for bit).
    Float(u64),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    Array(Vec<Val>),
    Map(Vec<(Val, Val)>),
    /// The interpreter's own list (compared by identity).
    TheList,
}

/// Float keys whose bits matter: signed zeros, NaN, infinities.
const FLOATS: [f64; 6] = [0.0, -0.0, f64::NAN, 1.5, f64::INFINITY, -1.0];

fn gen_text(input: &mut Input<'_>) -> Vec<u8> {
    // A tiny alphabet makes equal keys likely; lengths cross the 7-byte inline limit.
    let len = input.below(12);
    (0..len).map(|_| b"ab\0\xff"[input.below(4)]).collect()
}

fn gen_key(input: &mut Input<'_>) -> Val {
    match input.u8() % 10 {
        0..=3 => Val::Int(input.range_i64(-12, 12)),
        4 | 5 => Val::Str(gen_text(input)),
        6 => Val::Bytes(gen_text(input)),
        7 => Val::Float(FLOATS[input.below(FLOATS.len())].to_bits()),
        8 => Val::Int(input.i64_mostly(-1, 1)),
        _ => {
            if input.bool() {
                Val::Bool(input.bool())
            } else {
                Val::None
            }
        }
    }
}

/// A value; `TheList` only where `allow_list` (a list never holds itself, so no cycle leaks).
fn gen_value(input: &mut Input<'_>, depth: u32, allow_list: bool) -> Val {
    match input.u8() % 8 {
        0 if depth < 2 => {
            let n = input.below(5);
            Val::Array((0..n).map(|_| gen_value(input, depth + 1, false)).collect())
        }
        1 if depth < 2 => {
            let mut pairs: Vec<(Val, Val)> = Vec::new();
            for _ in 0..input.below(7) {
                let k = gen_key(input);
                let v = gen_value(input, depth + 1, false);
                model_insert(&mut pairs, k, v);
            }
            Val::Map(pairs)
        }
        2 if allow_list => Val::TheList,
        _ => gen_key(input),
    }
}

fn to_any(v: &Val, list: &List) -> Any {
    match v {
        Val::None => Any::none(),
        Val::Int(i) => Any::from(*i),
        Val::Bool(b) => Any::from(*b),
        Val::Float(bits) => Any::from(f64::from_bits(*bits)),
        Val::Str(s) => tvm_ffi::String::from_bytes(s).into_any(),
        Val::Bytes(s) => Bytes::from_bytes(s).into_any(),
        Val::Array(items) => Any::from(Array::from_vec(
            items.iter().map(|v| to_any(v, list)).collect(),
        )),
        Val::Map(pairs) => Any::from(
            pairs
                .iter()
                .map(|(k, v)| (to_any(k, list), to_any(v, list)))
                .collect::<Map>(),
        ),
        Val::TheList => Any::from(list.clone()),
    }
}

fn matches(a: &Any, v: &Val, list: &List) -> bool {
    let ti = a.type_index();
    match v {
        Val::None => a.is_none(),
        Val::Int(i) => ti == abi::kTVMFFIInt && a.cast::<i64>().ok() == Some(*i),
        Val::Bool(b) => ti == abi::kTVMFFIBool && a.cast::<bool>().ok() == Some(*b),
        Val::Float(bits) => {
            ti == abi::kTVMFFIFloat && a.cast::<f64>().ok().map(f64::to_bits) == Some(*bits)
        }
        Val::Str(s) => {
            matches!(ti, abi::kTVMFFISmallStr | abi::kTVMFFIStr) && bytes_of_any(a) == Some(s)
        }
        Val::Bytes(s) => {
            matches!(ti, abi::kTVMFFISmallBytes | abi::kTVMFFIBytes) && bytes_of_any(a) == Some(s)
        }
        Val::Array(items) => {
            ti == abi::kTVMFFIArray
                && a.try_as::<Array>().is_some_and(|arr| {
                    arr.len() == items.len()
                        && arr.iter().zip(items).all(|(x, y)| matches(x, y, list))
                })
        }
        Val::Map(pairs) => {
            ti == abi::kTVMFFIMap
                && a.try_as::<Map>()
                    .is_some_and(|m| map_matches(m.iter(), m.len(), pairs, list))
        }
        Val::TheList => {
            ti == abi::kTVMFFIList
                && a.try_as::<List>()
                    .is_some_and(|l| l.as_object().as_raw() == list.as_object().as_raw())
        }
    }
}

/// Whether a table's entries, in iteration order, are the model's.
fn map_matches(
    iter: impl Iterator<Item = (Any, Any)>,
    len: usize,
    pairs: &[(Val, Val)],
    list: &List,
) -> bool {
    let entries: Vec<(Any, Any)> = iter.collect();
    len == pairs.len()
        && entries.len() == pairs.len()
        && entries
            .iter()
            .zip(pairs)
            .all(|((k, v), (mk, mv))| matches(k, mk, list) && matches(v, mv, list))
}

/// Sets `k` in an insertion-ordered model; an existing key keeps its place. The old value.
fn model_insert(pairs: &mut Vec<(Val, Val)>, k: Val, v: Val) -> Option<Val> {
    match pairs.iter_mut().find(|(key, _)| *key == k) {
        Some((_, slot)) => Some(std::mem::replace(slot, v)),
        None => {
            pairs.push((k, v));
            None
        }
    }
}

fn model_remove(pairs: &mut Vec<(Val, Val)>, k: &Val) -> Option<Val> {
    let at = pairs.iter().position(|(key, _)| key == k)?;
    Some(pairs.remove(at).1)
}

fn model_get<'a>(pairs: &'a [(Val, Val)], k: &Val) -> Option<&'a Val> {
    pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v)
}

/// A possibly negative index resolved against `len`, as the containers document.
fn resolve(index: i64, len: usize) -> Option<usize> {
    let resolved = if index < 0 {
        index.checked_add(len as i64)?
    } else {
        index
    };
    (resolved >= 0 && (resolved as usize) < len).then_some(resolved as usize)
}

struct State {
    list: List,
    list_alias: List,
    list_model: Vec<Val>,
    dict: Dict,
    dict_alias: Dict,
    dict_model: Vec<(Val, Val)>,
    map: Map,
    map_model: Vec<(Val, Val)>,
    snapshots: Vec<(Map, Vec<(Val, Val)>)>,
}

#[track_caller]
fn check_opt(got: Option<Any>, want: Option<&Val>, list: &List, what: &str) {
    match (&got, want) {
        (None, None) => {}
        (Some(a), Some(v)) => assert!(matches(a, v, list), "{what}: got {a:?}, want {v:?}"),
        _ => panic!("{what}: got {got:?}, want {want:?}"),
    }
}

impl State {
    fn new() -> State {
        let list = List::new();
        let dict = Dict::new();
        State {
            list_alias: list.clone(),
            list,
            list_model: Vec::new(),
            dict_alias: dict.clone(),
            dict,
            dict_model: Vec::new(),
            map: Map::new(),
            map_model: Vec::new(),
            snapshots: Vec::new(),
        }
    }

    fn check_all(&self) {
        let list = &self.list;
        assert!(
            map_matches(self.dict.iter(), self.dict.len(), &self.dict_model, list),
            "dict differs from its model: {:?} vs {:?}",
            self.dict,
            self.dict_model
        );
        assert!(
            map_matches(
                self.dict_alias.iter(),
                self.dict_alias.len(),
                &self.dict_model,
                list
            ),
            "a dict alias differs"
        );
        assert!(
            map_matches(self.map.iter(), self.map.len(), &self.map_model, list),
            "map differs from its model: {:?} vs {:?}",
            self.map,
            self.map_model
        );
        for (snapshot, model) in &self.snapshots {
            assert!(
                map_matches(snapshot.iter(), snapshot.len(), model, list),
                "a map snapshot changed: {snapshot:?} vs {model:?}"
            );
        }
        self.check_list();
    }

    fn check_list(&self) {
        for l in [&self.list, &self.list_alias] {
            let items = l.to_vec();
            assert_eq!(items.len(), self.list_model.len(), "list length");
            assert_eq!(l.len(), self.list_model.len(), "list length");
            for (a, v) in items.iter().zip(&self.list_model) {
                assert!(matches(a, v, &self.list), "list item {a:?} vs {v:?}");
            }
        }
    }

    fn step(&mut self, input: &mut Input<'_>) {
        let list = self.list.clone();
        match input.u8() % 26 {
            0 | 1 => {
                let (k, v) = (gen_key(input), gen_value(input, 0, true));
                let d = if input.bool() {
                    &self.dict
                } else {
                    &self.dict_alias
                };
                let old = d.insert(to_any(&k, &list), to_any(&v, &list));
                let want = model_insert(&mut self.dict_model, k, v);
                check_opt(old, want.as_ref(), &list, "dict insert");
            }
            2 => {
                let k = gen_key(input);
                let old = self.dict.remove(&to_any(&k, &list));
                let want = model_remove(&mut self.dict_model, &k);
                check_opt(old, want.as_ref(), &list, "dict remove");
            }
            3 => {
                let k = gen_key(input);
                let key = to_any(&k, &list);
                let want = model_get(&self.dict_model, &k);
                check_opt(self.dict_alias.get(&key), want, &list, "dict get");
                assert_eq!(self.dict.contains_key(&key), want.is_some());
                if let Val::Str(s) = &k
                    && let Ok(text) = std::str::from_utf8(s)
                {
                    assert_eq!(self.dict.contains_key(text), want.is_some(), "str key");
                }
            }
            4 => {
                if input.u8().is_multiple_of(4) {
                    self.dict.clear();
                    self.dict_model.clear();
                }
                assert_eq!(self.dict_alias.is_empty(), self.dict_model.is_empty());
            }
            5 => {
                // Mutate while iterating: memory-safe; the result is checked afterwards.
                let stop = input.below(8);
                let (k, v) = (gen_key(input), gen_value(input, 0, false));
                let remove = input.bool();
                let mut yielded: Vec<Any> = Vec::new();
                for (i, (key, _)) in self.dict.iter().enumerate() {
                    // A change behind the iterator may end it early or skip entries, but never
                    // yields an entry again (the documented contract).
                    assert!(!yielded.contains(&key), "iteration yielded {key:?} twice");
                    yielded.push(key);
                    if i == stop {
                        if remove {
                            self.dict_alias.remove(&to_any(&k, &list));
                            model_remove(&mut self.dict_model, &k);
                        } else {
                            self.dict_alias.insert(to_any(&k, &list), to_any(&v, &list));
                            model_insert(&mut self.dict_model, k.clone(), v.clone());
                        }
                    }
                }
                self.check_all();
            }
            6 | 7 => {
                let (k, v) = (gen_key(input), gen_value(input, 0, true));
                let old = self.map.insert(to_any(&k, &list), to_any(&v, &list));
                let want = model_insert(&mut self.map_model, k, v);
                check_opt(old, want.as_ref(), &list, "map insert");
            }
            8 => {
                let k = gen_key(input);
                let old = self.map.remove(&to_any(&k, &list));
                let want = model_remove(&mut self.map_model, &k);
                check_opt(old, want.as_ref(), &list, "map remove");
            }
            9 => {
                let k = gen_key(input);
                let key = to_any(&k, &list);
                let want = model_get(&self.map_model, &k);
                check_opt(self.map.get(&key), want, &list, "map get");
                assert_eq!(self.map.contains_key(&key.as_view()), want.is_some());
            }
            10 => {
                // A snapshot shares the object until the next write (copy-on-write).
                let snapshot = (self.map.clone(), self.map_model.clone());
                if self.snapshots.len() < 4 {
                    self.snapshots.push(snapshot);
                } else {
                    let i = input.below(4);
                    self.snapshots[i] = snapshot;
                }
            }
            11 => {
                // Order-insensitive equality: a map rebuilt in reverse equals the one it was built from.
                let rebuilt: Map = self
                    .map
                    .iter()
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                assert!(
                    rebuilt == self.map,
                    "a map rebuilt in reverse order differs"
                );
                self.check_all();
            }
            12 => {
                // A map converted from the dict is a copy: later dict writes do not reach it.
                let copy: Map = Any::from(self.dict.clone())
                    .cast()
                    .expect("dict casts to map");
                let model = self.dict_model.clone();
                assert!(map_matches(copy.iter(), copy.len(), &model, &list));
                if self.snapshots.len() < 4 {
                    self.snapshots.push((copy, model));
                }
                let again: Dict = Any::from(self.dict.clone())
                    .cast()
                    .expect("dict casts back");
                assert_eq!(again.as_object().as_raw(), self.dict.as_object().as_raw());
            }
            13 | 14 => {
                let v = gen_value(input, 0, false);
                self.list_alias.push(to_any(&v, &list));
                self.list_model.push(v);
            }
            15 => {
                let index = input.i64_mostly(-6, 12);
                let v = gen_value(input, 0, false);
                let len = self.list_model.len();
                let at = if index == len as i64 {
                    Some(len)
                } else {
                    resolve(index, len)
                };
                let result = self.list.insert(index, to_any(&v, &list));
                match at {
                    Some(at) => {
                        result.expect("an in-range insert");
                        self.list_model.insert(at, v);
                    }
                    None => {
                        let err = result.expect_err("an out-of-range insert");
                        assert!(err.is_kind("IndexError"), "{err:?}");
                    }
                }
            }
            16 => {
                let index = input.i64_mostly(-6, 12);
                let result = self.list_alias.remove(index);
                match resolve(index, self.list_model.len()) {
                    Some(i) => {
                        let removed = self.list_model.remove(i);
                        assert!(matches(&result.expect("in range"), &removed, &list));
                    }
                    None => assert!(result.expect_err("out of range").is_kind("IndexError")),
                }
            }
            17 => {
                let index = input.i64_mostly(-6, 12);
                let v = gen_value(input, 0, false);
                let got = self.list.get(index);
                let set = self.list.set(index, to_any(&v, &list));
                match resolve(index, self.list_model.len()) {
                    Some(i) => {
                        assert!(matches(&got.expect("in range"), &self.list_model[i], &list));
                        set.expect("in range");
                        self.list_model[i] = v;
                    }
                    None => {
                        assert!(got.expect_err("out of range").is_kind("IndexError"));
                        assert!(set.expect_err("out of range").is_kind("IndexError"));
                    }
                }
            }
            18 => {
                let got = self.list.pop();
                match self.list_model.pop() {
                    Some(v) => assert!(matches(&got.expect("non-empty"), &v, &list)),
                    None => assert!(got.expect_err("empty").is_kind("IndexError")),
                }
            }
            19 => match input.u8() % 4 {
                0 => {
                    self.list_alias.clear();
                    self.list_model.clear();
                }
                _ => self.list.reserve(input.below(64)),
            },
            20 => {
                // An array snapshot of the list, indexed from both ends.
                let array = Array::from_vec(self.list.to_vec());
                assert_eq!(array.len(), self.list_model.len());
                let index = input.i64_mostly(-6, 12);
                match resolve(index, array.len()) {
                    Some(i) => {
                        assert!(matches(
                            array.at(index).expect("in range"),
                            &self.list_model[i],
                            &list
                        ));
                        assert!(array.get(i).is_some());
                    }
                    None => assert!(
                        array
                            .at(index)
                            .expect_err("out of range")
                            .is_kind("IndexError")
                    ),
                }
                // Element equality is the tables' (`any_equal`): nested objects by identity.
                let same: Array = self.list.to_vec().into_iter().collect();
                assert!(same == array, "arrays of the same elements compare equal");
                if self
                    .list_model
                    .iter()
                    .all(|v| !matches!(v, Val::Array(_) | Val::Map(_)))
                {
                    let rebuilt: Array = self.list_model.iter().map(|v| to_any(v, &list)).collect();
                    assert!(rebuilt == array, "arrays of equal scalars compare equal");
                }
                let through_any: Array = Any::from(array.clone()).cast().expect("array casts");
                assert!(through_any == array);
            }
            21 => {
                // A value round-trips through a container.
                let v = gen_value(input, 0, true);
                let holder = Array::from_vec(vec![to_any(&v, &list)]);
                assert!(matches(&holder.as_slice()[0], &v, &list), "{v:?}");
            }
            22 => {
                // Dict through Any keeps identity; a list through Any too.
                let any = Any::from(self.dict_alias.clone());
                assert_eq!(any.type_index(), abi::kTVMFFIDict);
                let l: List = Any::from(self.list.clone()).cast().expect("list casts");
                assert_eq!(l.as_object().as_raw(), self.list.as_object().as_raw());
            }
            23 => self.check_list(),
            _ => self.check_all(),
        }
    }
}

/// Containers: each byte picks an operation on `Dict`, `Map`, `List` or `Array` (insert,
/// remove, get, clear, iterate, mutate while iterating, copy-on-write snapshots, conversions,
/// nested values), which must agree with a model at every step and at the end.
pub fn containers(data: &[u8]) {
    let mut input = Input::new(data);
    let mut state = State::new();
    let mut steps = 0;
    while !input.is_empty() && steps < 2048 {
        state.step(&mut input);
        steps += 1;
    }
    state.check_all();
    // Nested values that hold the list are the only references to it besides ours.
    state.dict.clear();
    state.map = Map::new();
    state.snapshots.clear();
    assert_eq!(
        state.list.as_object().use_count(),
        2,
        "list references leaked"
    );
}
