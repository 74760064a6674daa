//! Recursive comparison of values (`ffi.RecursiveEq`, `ffi.RecursiveHash` and the orderings
//! `ffi.RecursiveLt/Le/Gt/Ge`), what Python's `==`, `hash()` and `<` mean for containers and
//! reflected objects: values of different types are unequal (and cannot be ordered), containers
//! compare item by item (sequences in order, maps by key), objects through their
//! `__ffi_eq__(a, b, fn_eq)`/`__ffi_hash__(v, fn_hash)`/`__ffi_compare__(a, b, fn_cmp)`
//! attributes, whose callbacks compare sub-values within the same walk, or else field by field
//! (skipping fields flagged `CompareOff`, and for hashing also `HashOff`); objects without
//! reflected fields are all equal. None orders first; NaN, unequal maps and values of different
//! types cannot be ordered. Cycles are handled: a pair of objects met again while being tested
//! for equality is taken as equal, and while being ordered is a `ValueError`.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::hash::{hash_bytes, hash_combine};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::extra::structural::{canonical_index, may_be_shared};
use crate::function::Function;
use crate::reflection;
use crate::type_attr::TypeAttr;
use crate::{Dict, List, Map, Shape};

static EQ_HOOK: TypeAttr = TypeAttr::new("__ffi_eq__");
static HASH_HOOK: TypeAttr = TypeAttr::new("__ffi_hash__");
static COMPARE_HOOK: TypeAttr = TypeAttr::new("__ffi_compare__");

/// Whether `a` and `b` are recursively equal.
pub fn recursive_eq(a: AnyView<'_>, b: AnyView<'_>) -> Result<bool> {
    Compare::default().eq(a, b)
}

/// The three-way recursive order of `a` and `b`; a `TypeError` for values of different types
/// or maps.
pub fn recursive_cmp(a: AnyView<'_>, b: AnyView<'_>) -> Result<Ordering> {
    Compare::default().cmp(a, b)
}

/// The recursive hash of `value`, consistent with [`recursive_eq`].
pub fn recursive_hash(value: AnyView<'_>) -> Result<u64> {
    Compare::default().hash(value)
}

/// One comparison's state, shared with the callbacks handed to a type's hooks so that
/// sub-values compared through them see the same cycle set and depth.
#[derive(Clone, Default)]
struct Compare {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Object pairs (or single objects, for hashing) being compared now.
    active: HashSet<(usize, usize)>,
    depth: usize,
    /// Pairs of shared objects found equal so far, by address, held alive for the walk so
    /// that their addresses name them alone: shared sub-graphs are compared once per pair.
    equal_pairs: HashMap<(usize, usize), (Any, Any)>,
    /// Hashes of shared objects, by address, likewise.
    hashes: HashMap<usize, (Any, u64)>,
    /// Whether the hash being computed met a cycle (and so depends on where it was entered).
    cut: bool,
}

fn strings<'a>(v: &'a AnyView<'_>) -> Option<&'a [u8]> {
    crate::string::bytes_of_view(v)
}

/// The items of a sequence: borrowed from an array, copied from a list (which may change while
/// it is compared) or a shape.
fn seq_of<'a>(v: &AnyView<'a>) -> Result<Option<std::borrow::Cow<'a, [Any]>>> {
    use std::borrow::Cow;
    Ok(match v.type_index() {
        abi::kTVMFFIArray => Some(Cow::Borrowed(
            v.as_object::<crate::containers::array::ArrayObj>()
                .expect("an array")
                .as_slice(),
        )),
        abi::kTVMFFIList => Some(Cow::Owned(v.cast::<List>()?.to_vec())),
        abi::kTVMFFIShape => Some(Cow::Owned(
            v.cast::<Shape>()?
                .as_slice()
                .iter()
                .map(|d| Any::from(*d))
                .collect(),
        )),
        _ => None,
    })
}

/// The reflected fields of type `t` that recursive comparison looks at.
fn compared_fields(t: i32) -> impl Iterator<Item = reflection::FieldRef> {
    reflection::fields_of(t)
        .filter(|f| f.is_readable() && f.flags() & abi::kTVMFFIFieldFlagBitMaskCompareOff == 0)
}

fn type_name(v: &AnyView<'_>) -> String {
    v.type_key()
}

/// Whether a cycle can pass through objects of this type: immutable arrays, maps, strings and
/// shapes can only be part of one through a mutable object, which is tracked instead.
fn may_cycle(type_index: i32) -> bool {
    !matches!(
        type_index,
        abi::kTVMFFIArray
            | abi::kTVMFFIMap
            | abi::kTVMFFIShape
            | abi::kTVMFFIStr
            | abi::kTVMFFIBytes
    )
}

impl Compare {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Runs `body` on the object pair `key` one level deeper, unless the pair is already being
    /// compared (a cycle), in which case the answer is `on_cycle`'s.
    fn nested<R>(
        &self,
        key: (usize, usize),
        tracked: bool,
        on_cycle: impl FnOnce() -> Result<R>,
        body: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        crate::stack::ensure_room("the value to compare")?;
        let entered = self.with(|s| {
            if tracked && !s.active.insert(key) {
                return Ok(false);
            }
            if s.depth >= crate::stack::MAX_NESTING {
                if tracked {
                    s.active.remove(&key);
                }
                return Err(crate::stack::too_deep("the value to compare"));
            }
            s.depth += 1;
            Ok(true)
        })?;
        if !entered {
            return on_cycle();
        }
        let result = body();
        self.with(|s| {
            s.depth -= 1;
            if tracked {
                s.active.remove(&key);
            }
        });
        result
    }

    /// The callback a hook gets for comparing sub-values for equality.
    fn eq_callback(&self) -> Function {
        let this = self.clone();
        Function::from_typed("fn_eq", move |a: Any, b: Any| {
            this.eq(a.as_view(), b.as_view())
        })
    }

    /// The callback a hook gets for ordering sub-values (-1, 0 or 1).
    fn cmp_callback(&self) -> Function {
        let this = self.clone();
        Function::from_typed("fn_cmp", move |a: Any, b: Any| -> Result<i64> {
            Ok(this.cmp(a.as_view(), b.as_view())? as i64)
        })
    }

    /// The callback a hook gets for hashing sub-values.
    fn hash_callback(&self) -> Function {
        let this = self.clone();
        Function::from_typed("fn_hash", move |v: Any| -> Result<i64> {
            Ok(this.hash(v.as_view())? as i64)
        })
    }

    fn eq(&self, a: AnyView<'_>, b: AnyView<'_>) -> Result<bool> {
        let (ta, tb) = (
            canonical_index(a.type_index()),
            canonical_index(b.type_index()),
        );
        if ta != tb {
            return Ok(false);
        }
        if ta == abi::kTVMFFIFloat {
            let (x, y) = (a.cast::<f64>()?, b.cast::<f64>()?);
            return Ok(x == y || (x.is_nan() && y.is_nan()));
        }
        if let (Some(x), Some(y)) = (strings(&a), strings(&b)) {
            return Ok(x == y);
        }
        let (Some(pa), Some(pb)) = (a.as_object_ptr(), b.as_object_ptr()) else {
            // SAFETY: plain values keep all their state in the 8 payload bytes.
            return Ok(unsafe { a.as_raw().payload.v_uint64 == b.as_raw().payload.v_uint64 });
        };
        if pa == pb {
            return Ok(true);
        }
        let pair = (pa as usize, pb as usize);
        let shared = may_be_shared(a) || may_be_shared(b);
        if shared && self.with(|s| s.equal_pairs.contains_key(&pair)) {
            return Ok(true);
        }
        // A pair met again while compared counts as equal; an unequal pair anywhere makes the
        // whole answer false, so a pair found equal is equal wherever it is met again.
        let equal = self.nested(
            pair,
            may_cycle(a.type_index()),
            || Ok(true),
            || self.eq_objects(a, b),
        )?;
        if equal && shared {
            let keep = (a.to_owned(), b.to_owned());
            self.with(|s| s.equal_pairs.insert(pair, keep));
        }
        Ok(equal)
    }

    fn eq_objects(&self, a: AnyView<'_>, b: AnyView<'_>) -> Result<bool> {
        if let (Some(x), Some(y)) = (seq_of(&a)?, seq_of(&b)?) {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (x, y) in x.iter().zip(y.iter()) {
                if !self.eq(x.as_view(), y.as_view())? {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        match a.type_index() {
            abi::kTVMFFIMap => return self.eq_map(&a.cast::<Map>()?, &b.cast::<Map>()?),
            abi::kTVMFFIDict => return self.eq_map(&a.cast::<Dict>()?, &b.cast::<Dict>()?),
            abi::kTVMFFIBigInt => {
                return Ok(crate::extra::bigint_text::to_decimal(a)
                    == crate::extra::bigint_text::to_decimal(b));
            }
            _ => {}
        }
        let t = a.type_index();
        if let Some(hook) = EQ_HOOK.get(t) {
            let callback = Any::from(self.eq_callback());
            return hook
                .cast::<Function>()?
                .call_packed(&[a, b, callback.as_view()])?
                .cast::<bool>();
        }
        // Only reflected fields count: objects without any (functions, tensors) are all equal.
        for field in compared_fields(t) {
            if !self.eq(field.get(a)?.as_view(), field.get(b)?.as_view())? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn eq_map<M: MapRead>(&self, a: &M, b: &M) -> Result<bool> {
        if a.len() != b.len() {
            return Ok(false);
        }
        for (k, v) in a.iter() {
            match b.get(&k) {
                Some(w) if self.eq(v.as_view(), w.as_view())? => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    fn cmp(&self, a: AnyView<'_>, b: AnyView<'_>) -> Result<Ordering> {
        let (ta, tb) = (
            canonical_index(a.type_index()),
            canonical_index(b.type_index()),
        );
        let mismatch = || {
            Error::new(
                ErrorKind::TypeError,
                format!(
                    "Cannot compare values of different types: {} vs {}",
                    type_name(&a),
                    type_name(&b)
                ),
            )
        };
        // None orders before every other value.
        let none = abi::kTVMFFINone;
        if ta == none || tb == none {
            return Ok((ta != none).cmp(&(tb != none)));
        }
        if ta != tb {
            return Err(mismatch());
        }
        match ta {
            abi::kTVMFFIInt => return Ok(a.cast::<i64>()?.cmp(&b.cast::<i64>()?)),
            abi::kTVMFFIBool => return Ok(a.cast::<bool>()?.cmp(&b.cast::<bool>()?)),
            abi::kTVMFFIFloat => {
                let (x, y) = (a.cast::<f64>()?, b.cast::<f64>()?);
                return x.partial_cmp(&y).ok_or_else(|| {
                    Error::new(ErrorKind::TypeError, "Cannot order NaN float values")
                });
            }
            _ => {}
        }
        if let (Some(x), Some(y)) = (strings(&a), strings(&b)) {
            return Ok(x.cmp(y));
        }
        let (Some(pa), Some(pb)) = (a.as_object_ptr(), b.as_object_ptr()) else {
            // SAFETY: plain values keep all their state in the 8 payload bytes.
            let (x, y) = unsafe { (a.as_raw().payload.v_uint64, b.as_raw().payload.v_uint64) };
            return Ok(x.cmp(&y));
        };
        if pa == pb {
            return Ok(Ordering::Equal);
        }
        let pair = (pa as usize, pb as usize);
        let cyclic = || {
            Err(Error::new(
                ErrorKind::ValueError,
                "Cannot order values with a cyclic reference",
            ))
        };
        self.nested(pair, may_cycle(a.type_index()), cyclic, || {
            self.cmp_objects(a, b)
        })
    }

    fn cmp_objects(&self, a: AnyView<'_>, b: AnyView<'_>) -> Result<Ordering> {
        if let (Some(x), Some(y)) = (seq_of(&a)?, seq_of(&b)?) {
            for (x, y) in x.iter().zip(y.iter()) {
                let order = self.cmp(x.as_view(), y.as_view())?;
                if order != Ordering::Equal {
                    return Ok(order);
                }
            }
            return Ok(x.len().cmp(&y.len()));
        }
        let t = a.type_index();
        match t {
            abi::kTVMFFIMap => return self.cmp_map(&a.cast::<Map>()?, &b.cast::<Map>()?, &a),
            abi::kTVMFFIDict => return self.cmp_map(&a.cast::<Dict>()?, &b.cast::<Dict>()?, &a),
            _ => {}
        }
        if let Some(hook) = COMPARE_HOOK.get(t) {
            let callback = Any::from(self.cmp_callback());
            let order = hook
                .cast::<Function>()?
                .call_packed(&[a, b, callback.as_view()])?
                .cast::<i64>()?;
            return Ok(order.cmp(&0));
        }
        for field in compared_fields(t) {
            let order = self.cmp(field.get(a)?.as_view(), field.get(b)?.as_view())?;
            if order != Ordering::Equal {
                return Ok(order);
            }
        }
        Ok(Ordering::Equal)
    }

    /// Maps have no order: equal maps (values compared in this ordering walk) compare equal,
    /// others cannot be ordered.
    fn cmp_map<M: MapRead>(&self, a: &M, b: &M, value: &AnyView<'_>) -> Result<Ordering> {
        let unordered = || {
            Error::new(
                ErrorKind::TypeError,
                format!("Cannot order unequal {} values", type_name(value)),
            )
        };
        if a.len() != b.len() {
            return Err(unordered());
        }
        for (k, v) in a.iter() {
            let Some(w) = b.get(&k) else {
                return Err(unordered());
            };
            if self.cmp(v.as_view(), w.as_view())? != Ordering::Equal {
                return Err(unordered());
            }
        }
        Ok(Ordering::Equal)
    }

    fn hash(&self, v: AnyView<'_>) -> Result<u64> {
        let t = canonical_index(v.type_index());
        if t == abi::kTVMFFIFloat {
            let x = v.cast::<f64>()?;
            // Equal floats hash equally: every NaN alike, and -0.0 as 0.0.
            let bits = if x.is_nan() {
                f64::NAN.to_bits()
            } else if x == 0.0 {
                0
            } else {
                x.to_bits()
            };
            return Ok(hash_combine(t as u64, bits));
        }
        if let Some(bytes) = strings(&v) {
            return Ok(hash_combine(t as u64, hash_bytes(bytes)));
        }
        let Some(ptr) = v.as_object_ptr() else {
            // SAFETY: plain values keep all their state in the 8 payload bytes.
            return Ok(hash_combine(t as u64, unsafe {
                v.as_raw().payload.v_uint64
            }));
        };
        let shared = may_be_shared(v);
        if shared && let Some(h) = self.with(|s| s.hashes.get(&(ptr as usize)).map(|e| e.1)) {
            return Ok(h);
        }
        let outer_cut = self.with(|s| std::mem::replace(&mut s.cut, false));
        let result = self.nested(
            (ptr as usize, 0),
            may_cycle(v.type_index()),
            || {
                self.with(|s| s.cut = true);
                Ok(t as u64)
            },
            || self.hash_object(v),
        );
        let keep = shared.then(|| v.to_owned());
        self.with(|s| {
            let cut = s.cut;
            s.cut = cut || outer_cut;
            // A hash that met a cycle depends on where the cycle was entered: not kept.
            if let (Ok(h), Some(keep)) = (&result, keep)
                && !cut
            {
                s.hashes.insert(ptr as usize, (keep, *h));
            }
        });
        result
    }

    fn hash_object(&self, v: AnyView<'_>) -> Result<u64> {
        let t = v.type_index();
        let mut h = t as u64;
        if let Some(items) = seq_of(&v)? {
            for item in items.iter() {
                h = hash_combine(h, self.hash(item.as_view())?);
            }
            return Ok(hash_combine(h, items.len() as u64));
        }
        let entries: Option<Vec<(Any, Any)>> = match t {
            abi::kTVMFFIMap => Some(v.cast::<Map>()?.iter().collect()),
            abi::kTVMFFIDict => Some(v.cast::<Dict>()?.iter().collect()),
            _ => None,
        };
        if let Some(entries) = entries {
            let mut sum = 0u64;
            for (k, val) in &entries {
                sum = sum.wrapping_add(hash_combine(
                    self.hash(k.as_view())?,
                    self.hash(val.as_view())?,
                ));
            }
            return Ok(hash_combine(hash_combine(h, entries.len() as u64), sum));
        }
        if t == abi::kTVMFFIBigInt {
            let text = crate::extra::bigint_text::to_decimal(v).unwrap_or_default();
            return Ok(hash_combine(h, hash_bytes(text.as_bytes())));
        }
        if let Some(hook) = HASH_HOOK.get(t) {
            let callback = Any::from(self.hash_callback());
            let h = hook
                .cast::<Function>()?
                .call_packed(&[v, callback.as_view()])?;
            return Ok(h.cast::<i64>()? as u64);
        }
        if EQ_HOOK.get(t).is_some() || COMPARE_HOOK.get(t).is_some() {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "RecursiveHash: type `{}` defines __ffi_eq__ or __ffi_compare__ but not \
                     __ffi_hash__, so its hash cannot agree with its equality",
                    type_name(&v)
                ),
            ));
        }
        // Fields left out of comparison are left out of the hash, so equal values hash alike.
        for field in compared_fields(t) {
            if field.flags() & abi::kTVMFFIFieldFlagBitMaskHashOff == 0 {
                h = hash_combine(h, self.hash(field.get(v)?.as_view())?);
            }
        }
        Ok(h)
    }
}
