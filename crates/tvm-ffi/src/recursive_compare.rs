//! Recursive comparison of values (`ffi.RecursiveEq`, `ffi.RecursiveHash` and the orderings
//! `ffi.RecursiveLt/Le/Gt/Ge`), what Python's `==`, `hash()` and `<` mean for containers and
//! reflected objects: values of different types are unequal (and cannot be ordered), containers
//! compare item by item (sequences in order, maps by key), objects through their
//! `__ffi_eq__`/`__ffi_hash__`/`__ffi_compare__` attributes or else field by field (skipping
//! fields flagged `CompareOff` or `HashOff`). Cycles are handled: a pair of objects met again
//! while being compared is taken as equal.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::hash::{hash_bytes, hash_combine};
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::reflection;
use crate::structural::canonical_index;
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

#[derive(Default)]
struct Compare {
    /// Object pairs (or single objects, for hashing) being compared now.
    active: HashSet<(usize, usize)>,
    depth: usize,
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
    fn enter(&mut self) -> Result<()> {
        crate::stack::check("recursive comparison")?;
        self.depth += 1;
        if self.depth > 10_000 {
            return Err(Error::new(
                ErrorKind::ValueError,
                "value nested too deeply to compare",
            ));
        }
        Ok(())
    }

    fn eq(&mut self, a: AnyView<'_>, b: AnyView<'_>) -> Result<bool> {
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
        let tracked = may_cycle(a.type_index());
        if tracked && !self.active.insert(pair) {
            return Ok(true);
        }
        self.enter()?;
        let result = self.eq_objects(a, b);
        self.depth -= 1;
        if tracked {
            self.active.remove(&pair);
        }
        result
    }

    fn eq_objects(&mut self, a: AnyView<'_>, b: AnyView<'_>) -> Result<bool> {
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
                return Ok(crate::bigint_text::to_decimal(a) == crate::bigint_text::to_decimal(b));
            }
            _ => {}
        }
        let t = a.type_index();
        if let Some(hook) = EQ_HOOK.get(t) {
            return hook
                .cast::<Function>()?
                .call_packed(&[a, b])?
                .cast::<bool>();
        }
        let mut any_field = false;
        for field in reflection::fields_of(t).filter(|f| f.is_readable()) {
            if field.flags() & abi::kTVMFFIFieldFlagBitMaskCompareOff != 0 {
                continue;
            }
            any_field = true;
            if !self.eq(field.get(a)?.as_view(), field.get(b)?.as_view())? {
                return Ok(false);
            }
        }
        // Objects without comparable fields (functions, modules) are equal only to themselves.
        Ok(any_field || reflection::fields_of(t).next().is_some())
    }

    fn eq_map<M: MapRead>(&mut self, a: &M, b: &M) -> Result<bool> {
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

    fn cmp(&mut self, a: AnyView<'_>, b: AnyView<'_>) -> Result<Ordering> {
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
        if ta != tb {
            let seqs = |t: i32| matches!(t, abi::kTVMFFIArray | abi::kTVMFFIList);
            if !(seqs(ta) && seqs(tb)) {
                return Err(mismatch());
            }
        }
        match ta {
            abi::kTVMFFINone => return Ok(Ordering::Equal),
            abi::kTVMFFIInt => return Ok(a.cast::<i64>()?.cmp(&b.cast::<i64>()?)),
            abi::kTVMFFIBool => return Ok(a.cast::<bool>()?.cmp(&b.cast::<bool>()?)),
            abi::kTVMFFIFloat => {
                let (x, y) = (a.cast::<f64>()?, b.cast::<f64>()?);
                return Ok(x.partial_cmp(&y).unwrap_or(Ordering::Equal));
            }
            abi::kTVMFFIMap | abi::kTVMFFIDict => {
                return Err(Error::new(
                    ErrorKind::TypeError,
                    "Cannot order Map/Dict values",
                ));
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
        let tracked = may_cycle(a.type_index());
        if tracked && !self.active.insert(pair) {
            return Ok(Ordering::Equal);
        }
        self.enter()?;
        let result = self.cmp_objects(a, b);
        self.depth -= 1;
        if tracked {
            self.active.remove(&pair);
        }
        result
    }

    fn cmp_objects(&mut self, a: AnyView<'_>, b: AnyView<'_>) -> Result<Ordering> {
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
        if let Some(hook) = COMPARE_HOOK.get(t) {
            let order = hook
                .cast::<Function>()?
                .call_packed(&[a, b])?
                .cast::<i64>()?;
            return Ok(order.cmp(&0));
        }
        for field in reflection::fields_of(t).filter(|f| f.is_readable()) {
            if field.flags() & abi::kTVMFFIFieldFlagBitMaskCompareOff != 0 {
                continue;
            }
            let order = self.cmp(field.get(a)?.as_view(), field.get(b)?.as_view())?;
            if order != Ordering::Equal {
                return Ok(order);
            }
        }
        Ok(Ordering::Equal)
    }

    fn hash(&mut self, v: AnyView<'_>) -> Result<u64> {
        let t = canonical_index(v.type_index());
        if t == abi::kTVMFFIFloat {
            let x = v.cast::<f64>()?;
            let bits = if x.is_nan() {
                f64::NAN.to_bits()
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
        let key = (ptr as usize, 0);
        let tracked = may_cycle(v.type_index());
        if tracked && !self.active.insert(key) {
            return Ok(t as u64);
        }
        self.enter()?;
        let result = self.hash_object(v);
        self.depth -= 1;
        if tracked {
            self.active.remove(&key);
        }
        result
    }

    fn hash_object(&mut self, v: AnyView<'_>) -> Result<u64> {
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
            let text = crate::bigint_text::to_decimal(v).unwrap_or_default();
            return Ok(hash_combine(h, hash_bytes(text.as_bytes())));
        }
        if let Some(hook) = HASH_HOOK.get(t) {
            return Ok(hook.cast::<Function>()?.call_packed(&[v])?.cast::<i64>()? as u64);
        }
        let mut any_field = false;
        for field in reflection::fields_of(t).filter(|f| f.is_readable()) {
            if field.flags() & abi::kTVMFFIFieldFlagBitMaskHashOff != 0 {
                continue;
            }
            any_field = true;
            h = hash_combine(h, self.hash(field.get(v)?.as_view())?);
        }
        if !any_field && reflection::fields_of(t).next().is_none() {
            // Objects without fields are equal only to themselves: hash their identity.
            h = hash_combine(h, v.as_object_ptr().map_or(0, |p| p as u64));
        }
        Ok(h)
    }
}
