//! Structural equality (`ffi.StructuralEqual`) and its first mismatch
//! (`ffi.GetFirstStructuralMismatch`).

use std::collections::HashMap;

use super::{
    FactCache, SEqHashKind, canonical_index, content, enter_level, may_be_shared, tensor_bytes,
};
use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::array::ArrayObj;
use crate::containers::map::MapRead;
use crate::error::{Error, ErrorKind, Result};
use crate::extra::access_path::{AccessKind, AccessPath, AccessStep};
use crate::function::Function;
use crate::{Dict, List, Map, Shape, Tensor};

/// Whether `lhs` and `rhs` are structurally equal (see the [module](super) documentation).
pub fn structural_equal(
    lhs: AnyView<'_>,
    rhs: AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<bool> {
    Equal::new(map_free_vars, skip_tensor_content, false).run(lhs, rhs)
}

/// The paths to the first place where `lhs` and `rhs` differ structurally, or `None` if they
/// are equal.
pub fn first_structural_mismatch(
    lhs: AnyView<'_>,
    rhs: AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<Option<(AccessPath, AccessPath)>> {
    let mut equal = Equal::new(map_free_vars, skip_tensor_content, true);
    if equal.run(lhs, rhs)? {
        return Ok(None);
    }
    Ok(Some(equal.mismatch.unwrap_or_else(|| {
        (AccessPath::root(), AccessPath::root())
    })))
}

/// One step of the path being compared (the same on both sides).
enum Step {
    Attr(&'static str),
    Index(i64),
    Key(Any),
}

struct Equal {
    map_free_vars: bool,
    skip_tensor_content: bool,
    /// Pairings of variables and DAG nodes, by object address, both ways.
    lhs_to_rhs: HashMap<usize, usize>,
    rhs_to_lhs: HashMap<usize, usize>,
    /// Pairs of shared objects found equal so far, by address and definition region, holding
    /// both objects alive for the walk so that their addresses name them alone.
    equal_pairs: HashMap<(usize, usize, bool), (Any, Any)>,
    facts: FactCache,
    /// Whether the values compared now are in a definition region.
    in_def: bool,
    depth: usize,
    /// Whether to record where the first mismatch is.
    trace: bool,
    steps: Vec<Step>,
    mismatch: Option<(AccessPath, AccessPath)>,
}

impl Equal {
    fn new(map_free_vars: bool, skip_tensor_content: bool, trace: bool) -> Equal {
        Equal {
            map_free_vars,
            skip_tensor_content,
            lhs_to_rhs: HashMap::new(),
            rhs_to_lhs: HashMap::new(),
            equal_pairs: HashMap::new(),
            facts: FactCache::default(),
            in_def: false,
            depth: 0,
            trace,
            steps: Vec::new(),
            mismatch: None,
        }
    }

    fn run(&mut self, lhs: AnyView<'_>, rhs: AnyView<'_>) -> Result<bool> {
        self.eq(lhs, rhs)
    }

    /// The path of the current position.
    fn path(&self) -> AccessPath {
        let mut path = AccessPath::root();
        for step in &self.steps {
            path = match step {
                Step::Attr(name) => path.attr(name),
                Step::Index(i) => path.array_item(*i),
                Step::Key(k) => path.map_item(k.clone()),
            };
        }
        path
    }

    /// Records a mismatch here (plus a last step per side), keeping the first one; `false`.
    fn fail(&mut self, last: Option<(AccessStep, AccessStep)>) -> bool {
        if self.trace && self.mismatch.is_none() {
            let here = self.path();
            self.mismatch = Some(match last {
                Some((l, r)) => (here.extend(l), here.extend(r)),
                None => (here.clone(), here),
            });
        }
        false
    }

    fn with_step(&mut self, step: Step, f: impl FnOnce(&mut Self) -> Result<bool>) -> Result<bool> {
        if self.trace {
            self.steps.push(step);
            let result = f(self);
            self.steps.pop();
            result
        } else {
            f(self)
        }
    }

    fn eq(&mut self, lhs: AnyView<'_>, rhs: AnyView<'_>) -> Result<bool> {
        let (a, b) = (lhs.as_raw(), rhs.as_raw());
        // SAFETY: every payload is 8 initialized bytes; `v_uint64` reads them all.
        let same_bits =
            a.type_index == b.type_index && unsafe { a.payload.v_uint64 == b.payload.v_uint64 };
        if same_bits {
            // Identical plain values, or the same built-in object (no variables inside can be
            // paired differently while nothing is paired yet).
            let builtin_object =
                (abi::kTVMFFIStaticObjectBegin..abi::kTVMFFIDynObjectBegin).contains(&a.type_index);
            if a.type_index < abi::kTVMFFISmallStr || (builtin_object && self.lhs_to_rhs.is_empty())
            {
                return Ok(true);
            }
        }
        let (lt, rt) = (
            canonical_index(lhs.type_index()),
            canonical_index(rhs.type_index()),
        );
        if lt != rt {
            return Ok(self.fail(None));
        }
        let equal = match lt {
            abi::kTVMFFIFloat => {
                // SAFETY: float values keep their value in `v_float64`.
                let (x, y) = unsafe { (a.payload.v_float64, b.payload.v_float64) };
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }
            abi::kTVMFFIStr | abi::kTVMFFIBytes => content(&lhs) == content(&rhs),
            t if t >= abi::kTVMFFIStaticObjectBegin => return self.eq_nested(lhs, rhs),
            // SAFETY: plain values keep all their state in the 8 payload bytes.
            _ => unsafe { lhs.as_raw().payload.v_uint64 == rhs.as_raw().payload.v_uint64 },
        };
        Ok(equal || self.fail(None))
    }

    /// Compares two objects, one level deeper.
    fn eq_nested(&mut self, lhs: AnyView<'_>, rhs: AnyView<'_>) -> Result<bool> {
        self.remembered(lhs, rhs, |walk| {
            walk.depth += 1;
            enter_level(walk.depth)?;
            let result = walk.eq_object(lhs, rhs);
            walk.depth -= 1;
            result
        })
    }

    /// Compares two arrays (`a` and `b`, the objects of `lhs` and `rhs`) one level deeper.
    fn eq_nested_arrays(
        &mut self,
        (lhs, a): (AnyView<'_>, &ArrayObj),
        (rhs, b): (AnyView<'_>, &ArrayObj),
    ) -> Result<bool> {
        if std::ptr::eq(a, b) && self.lhs_to_rhs.is_empty() {
            return Ok(true);
        }
        self.remembered(lhs, rhs, |walk| {
            walk.depth += 1;
            enter_level(walk.depth)?;
            let result = walk.eq_seq(a.as_slice(), b.as_slice());
            walk.depth -= 1;
            result
        })
    }

    /// Whether the objects `lhs` and `rhs` are equal, as `f` finds, remembering equal pairs of
    /// shared objects so that graphs whose nodes are met many times are compared about once per
    /// pair of nodes. An unequal pair ends the walk, so only equal ones are met again.
    fn remembered(
        &mut self,
        lhs: AnyView<'_>,
        rhs: AnyView<'_>,
        f: impl FnOnce(&mut Self) -> Result<bool>,
    ) -> Result<bool> {
        if !(may_be_shared(lhs) || may_be_shared(rhs)) {
            return f(self);
        }
        let address = |v: AnyView<'_>| v.as_object_ptr().expect("an object") as usize;
        let key = (address(lhs), address(rhs), self.in_def);
        if self.equal_pairs.contains_key(&key) {
            return Ok(true);
        }
        let equal = f(self)?;
        if equal {
            self.equal_pairs
                .insert(key, (lhs.to_owned(), rhs.to_owned()));
        }
        Ok(equal)
    }

    /// Compares two objects of the same type.
    fn eq_object(&mut self, lhs: AnyView<'_>, rhs: AnyView<'_>) -> Result<bool> {
        // Arrays first, the most common objects of a graph.
        if let (Some(a), Some(b)) = (lhs.as_object::<ArrayObj>(), rhs.as_object::<ArrayObj>()) {
            if std::ptr::eq(a, b) && self.lhs_to_rhs.is_empty() {
                return Ok(true);
            }
            return self.eq_seq(a.as_slice(), b.as_slice());
        }
        let (lp, rp) = (
            lhs.as_object_ptr().expect("object") as usize,
            rhs.as_object_ptr().expect("object") as usize,
        );
        match lhs.type_index() {
            abi::kTVMFFIList => {
                if lp == rp && self.lhs_to_rhs.is_empty() {
                    return Ok(true);
                }
                let (a, b): (List, List) = (lhs.cast()?, rhs.cast()?);
                self.eq_seq(&a.to_vec(), &b.to_vec())
            }
            abi::kTVMFFIMap => {
                let (a, b): (Map, Map) = (lhs.cast()?, rhs.cast()?);
                self.eq_map(&a, &b)
            }
            abi::kTVMFFIDict => {
                let (a, b): (Dict, Dict) = (lhs.cast()?, rhs.cast()?);
                self.eq_map(&a, &b)
            }
            abi::kTVMFFIShape => {
                let (a, b): (Shape, Shape) = (lhs.cast()?, rhs.cast()?);
                Ok(a.as_slice() == b.as_slice() || self.fail(None))
            }
            abi::kTVMFFITensor => {
                let (a, b): (Tensor, Tensor) = (lhs.cast()?, rhs.cast()?);
                let equal = lp == rp || self.eq_tensor(&a, &b)?;
                Ok(equal || self.fail(None))
            }
            abi::kTVMFFIBigInt => {
                let equal = crate::extra::bigint_text::to_decimal(lhs)
                    == crate::extra::bigint_text::to_decimal(rhs);
                Ok(equal || self.fail(None))
            }
            t if t != rhs.type_index() => Ok(self.fail(None)),
            t if crate::extra::enums::is_enum_type(t) => Ok(lp == rp || self.fail(None)),
            t => self.eq_reflected(t, lhs, rhs, lp, rp),
        }
    }

    fn eq_tensor(&mut self, a: &Tensor, b: &Tensor) -> Result<bool> {
        if a.dtype() != b.dtype() || a.shape() != b.shape() || a.device() != b.device() {
            return Ok(false);
        }
        if self.skip_tensor_content {
            return Ok(true);
        }
        match (tensor_bytes(a), tensor_bytes(b)) {
            (Some(x), Some(y)) => Ok(x == y),
            _ => Err(Error::new(
                ErrorKind::ValueError,
                format!(
                    "cannot compare the content of tensors on {} (only contiguous host tensors); \
                     pass skip_tensor_content=True",
                    a.device()
                ),
            )),
        }
    }

    fn eq_seq(&mut self, a: &[Any], b: &[Any]) -> Result<bool> {
        let common = a.len().min(b.len());
        for (i, (x, y)) in a[..common].iter().zip(&b[..common]).enumerate() {
            let (rx, ry) = (x.as_raw(), y.as_raw());
            let same_type = rx.type_index == ry.type_index;
            if same_type {
                // SAFETY: every payload is 8 initialized bytes; `v_uint64` reads them all.
                let same_bits = unsafe { rx.payload.v_uint64 == ry.payload.v_uint64 };
                // Identical plain values need no call (the common case of leaves), nor do
                // strings of the same content.
                if rx.type_index < abi::kTVMFFISmallStr {
                    if same_bits {
                        continue;
                    }
                } else if rx.type_index == abi::kTVMFFIStr
                    && (same_bits || content(&x.as_view()) == content(&y.as_view()))
                {
                    continue;
                } else if !self.trace
                    && let (Some(a), Some(b)) =
                        (x.as_object::<ArrayObj>(), y.as_object::<ArrayObj>())
                {
                    // Nested arrays, the inner nodes of most graphs, without the dispatch.
                    if self.eq_nested_arrays((x.as_view(), a), (y.as_view(), b))? {
                        continue;
                    }
                    return Ok(false);
                }
            }
            // Two objects of one type (not strings or bytes, compared by content) skip the
            // checks of plain values.
            let both_objects = same_type
                && rx.type_index >= abi::kTVMFFIStaticObjectBegin
                && !matches!(rx.type_index, abi::kTVMFFIStr | abi::kTVMFFIBytes);
            let (vx, vy) = (x.as_view(), y.as_view());
            let equal = self.with_step(Step::Index(i as i64), |s| match both_objects {
                true => s.eq_nested(vx, vy),
                false => s.eq(vx, vy),
            })?;
            if !equal {
                return Ok(false);
            }
        }
        if a.len() != b.len() {
            let i = a.len().min(b.len()) as i64;
            let (l, r) = if a.len() > b.len() {
                (AccessKind::ArrayItem, AccessKind::ArrayItemMissing)
            } else {
                (AccessKind::ArrayItemMissing, AccessKind::ArrayItem)
            };
            return Ok(self.fail(Some((AccessStep::new(l, i), AccessStep::new(r, i)))));
        }
        Ok(true)
    }

    /// The key of the other side that `key` pairs with (itself unless it is a paired object).
    fn translate(map: &HashMap<usize, usize>, key: &Any) -> Any {
        if let Some(ptr) = key.as_object_ptr()
            && let Some(&other) = map.get(&(ptr as usize))
        {
            // SAFETY: paired objects are alive: both graphs are borrowed for the whole walk.
            return Any::from(unsafe {
                crate::ObjectRef::<crate::Object>::from_borrowed(other as *mut _)
            });
        }
        key.clone()
    }

    fn eq_map<M: MapRead>(&mut self, a: &M, b: &M) -> Result<bool> {
        for (k, v) in a.iter() {
            let rk = Self::translate(&self.lhs_to_rhs, &k);
            let Some(rv) = b.get(&rk) else {
                let steps = (
                    AccessStep::new(AccessKind::MapItem, k.clone()),
                    AccessStep::new(AccessKind::MapItemMissing, k),
                );
                return Ok(self.fail(Some(steps)));
            };
            if !self.with_step(Step::Key(k), |s| s.eq(v.as_view(), rv.as_view()))? {
                return Ok(false);
            }
        }
        if b.len() != a.len() {
            for k in b.keys() {
                let lk = Self::translate(&self.rhs_to_lhs, &k);
                if !a.contains_key(&lk) {
                    let steps = (
                        AccessStep::new(AccessKind::MapItemMissing, k.clone()),
                        AccessStep::new(AccessKind::MapItem, k),
                    );
                    return Ok(self.fail(Some(steps)));
                }
            }
            return Ok(self.fail(None));
        }
        Ok(true)
    }

    /// Pairs `lp` with `rp`, or checks an existing pairing; whether they may pair.
    fn pair(&mut self, lp: usize, rp: usize) -> Option<bool> {
        match (self.lhs_to_rhs.get(&lp), self.rhs_to_lhs.get(&rp)) {
            (Some(&r), _) => Some(r == rp),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }

    fn record(&mut self, lp: usize, rp: usize) {
        self.lhs_to_rhs.insert(lp, rp);
        self.rhs_to_lhs.insert(rp, lp);
    }

    fn eq_reflected(
        &mut self,
        type_index: i32,
        lhs: AnyView<'_>,
        rhs: AnyView<'_>,
        lp: usize,
        rp: usize,
    ) -> Result<bool> {
        let facts = self.facts.get(type_index)?;
        match facts.kind {
            SEqHashKind::Unsupported => unreachable!("kind_of rejects it"),
            SEqHashKind::UniqueInstance => return Ok(lp == rp || self.fail(None)),
            SEqHashKind::FreeVar => {
                let equal = match self.pair(lp, rp) {
                    Some(paired) => paired,
                    None if self.in_def || self.map_free_vars => {
                        self.record(lp, rp);
                        true
                    }
                    None => lp == rp,
                };
                return Ok(equal || self.fail(None));
            }
            SEqHashKind::DagNode => {
                if let Some(paired) = self.pair(lp, rp) {
                    return Ok(paired || self.fail(None));
                }
            }
            SEqHashKind::ConstTreeNode | SEqHashKind::TreeNode => {
                if lp == rp && self.lhs_to_rhs.is_empty() {
                    return Ok(true);
                }
            }
        }
        let equal = if let Some(hook) = &facts.s_equal {
            self.call_hook(hook, lhs, rhs)?
        } else {
            let mut equal = true;
            for sfield in &facts.fields {
                let (a, b) = (sfield.field.get(lhs)?, sfield.field.get(rhs)?);
                let saved = self.in_def;
                self.in_def = saved || sfield.defines;
                let result = self.with_step(Step::Attr(sfield.field.name()), |s| {
                    s.eq(a.as_view(), b.as_view())
                });
                self.in_def = saved;
                if !result? {
                    equal = false;
                    break;
                }
            }
            equal
        };
        if equal && facts.kind == SEqHashKind::DagNode {
            self.record(lp, rp);
        }
        Ok(equal)
    }

    /// Runs a type's `__s_equal__(lhs, rhs, eq_cb)`, where `eq_cb(a, b, def_region_kind,
    /// field_name)` compares sub-values with this walk's state.
    fn call_hook(&mut self, hook: &Function, lhs: AnyView<'_>, rhs: AnyView<'_>) -> Result<bool> {
        let this = HookSlot::new(self as *mut Equal as usize);
        let slot = this.clone();
        let callback = Function::from_typed(
            "__s_equal__.eq_cb",
            move |a: Any, b: Any, def_region: i64, field: Any| -> Result<bool> {
                let ptr = slot.get()?;
                // SAFETY: the slot holds the walk's address only while the hook runs, during
                // which the walk itself is not used except through this callback, on the
                // calling thread.
                let walk = unsafe { &mut *(ptr as *mut Equal) };
                let saved = walk.in_def;
                walk.in_def = saved || def_region != 0;
                let step = match field.cast::<std::string::String>() {
                    Ok(name) => Step::Key(Any::from(name)),
                    Err(_) => Step::Key(field),
                };
                let result = walk.with_step(step, |s| s.eq(a.as_view(), b.as_view()));
                walk.in_def = saved;
                result
            },
        );
        let result = hook.call_packed(&[lhs, rhs, Any::from(callback).as_view()]);
        this.clear();
        result?.cast::<bool>()
    }
}

/// The address of a walk, lent to a hook's callback while the hook runs and withdrawn after.
#[derive(Clone)]
pub(crate) struct HookSlot(
    std::sync::Arc<std::sync::Mutex<Option<(usize, std::thread::ThreadId)>>>,
);

impl HookSlot {
    pub(crate) fn new(addr: usize) -> HookSlot {
        HookSlot(std::sync::Arc::new(std::sync::Mutex::new(Some((
            addr,
            std::thread::current().id(),
        )))))
    }

    /// The walk's address, or a `RuntimeError` once the hook has returned or from another
    /// thread.
    pub(crate) fn get(&self) -> Result<usize> {
        match *self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((addr, thread)) if thread == std::thread::current().id() => Ok(addr),
            _ => Err(Error::new(
                ErrorKind::RuntimeError,
                "a structural callback was called after its hook returned, or from another thread",
            )),
        }
    }

    pub(crate) fn clear(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}
