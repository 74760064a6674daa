//! Structural rewriting (`ffi.StructuralMap`, `ffi.StructuralMutate`,
//! `ffi.StructuralMutator`).
//!
//! A [`StructuralMutatorObj`] is the active context of one rewrite: its engine's dispatch, the
//! current definition region, and the variable remap that keeps every use of a rewritten
//! variable (or DAG node) pointing at the one replacement. Its layout is apache-tvm-ffi's
//! (header, vtable pointer, region kind), so C++ `__s_mutate__` hooks compiled against the
//! original headers call back into it.
//!
//! A mutation yields a replacement or "unchanged" (`None` in [`Mutation`], the
//! `kTVMFFIUnchanged` marker at the C boundary). Sources are never modified unless the caller
//! grants [`InplaceMode::Allow`] along the whole path from the root and the value is uniquely
//! owned; otherwise changed paths are copied and unchanged subtrees shared.
//!
//! Default mutation of a value uses its type's `__s_mutate__` hook (or, when in place is
//! allowed, `__s_maybe_inplace_mutate__`); without one, plain values are unchanged and objects
//! rewrite their reflected structural fields on a shallow copy (`__ffi_shallow_copy__`), made
//! only once a field changes. Free variables outside a definition are uses: they resolve
//! through the remap and are otherwise unchanged.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use super::SEqHashKind;
use super::snapshots::sequence_items;
use super::visit::{
    CallbackTable, DefRegionKind, RegionCell, arity, clamps_simple_definition,
    register_engine_type, structural_fields,
};
use crate::abi::{self, TVMFFIAny};
use crate::any::{Any, AnyView};
use crate::containers::array::ArrayObj;
use crate::containers::map::MapObj;
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{Object, ObjectCore, ObjectRef};
use crate::reflection;
use crate::type_attr::TypeAttr;
use crate::{Array, Dict, List, Map, MapRead, types};

/// The result of mutating a value: `None` when it is unchanged, else its replacement.
pub type Mutation = Result<Option<Any>>;

/// Whether a mutation may modify uniquely owned values in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum InplaceMode {
    /// Copy on write: the source is preserved.
    Disallow = 0,
    /// In place where the value is uniquely owned (the whole path from the root must be).
    Allow = 1,
}

/// The C signature of the mutator's dispatch entries and of native `__s_mutate__` hooks.
pub type NativeMutateHook =
    unsafe extern "C" fn(mutator: *mut StructuralMutatorObj, value: TVMFFIAny) -> TVMFFIAny;

/// The vtable of a mutator, laid out as apache-tvm-ffi's `StructuralMutatorVTable`.
#[repr(C)]
pub struct MutatorVTable {
    /// Mutates without touching the source.
    pub mutate: NativeMutateHook,
    /// Mutates, in place where the value is uniquely owned.
    pub maybe_inplace_mutate: NativeMutateHook,
    /// Looks up the replacement of a variable (None on a miss).
    pub var_remap_get: NativeMutateHook,
    /// Records the replacement of a variable.
    pub var_remap_set: unsafe extern "C" fn(
        mutator: *mut StructuralMutatorObj,
        var: TVMFFIAny,
        mapped: TVMFFIAny,
    ) -> TVMFFIAny,
}

/// What a rewriting engine does with each value it is asked to mutate.
trait MutateEngine: Send + Sync {
    fn mutate(
        &self,
        mutator: &StructuralMutatorObj,
        value: AnyView<'_>,
        mode: InplaceMode,
    ) -> Mutation;
}

/// A recorded replacement: the variable (held, so its address stays its own) and what it
/// became (`None`: unchanged).
type RemapEntry = (Any, Option<Any>);

/// The active context of one structural rewrite (`ffi.StructuralMutator`).
#[repr(C)]
pub struct StructuralMutatorObj {
    base: Object,
    vtable: *const MutatorVTable,
    region: RegionCell,
    remap: Mutex<HashMap<usize, RemapEntry>>,
    engine: Box<dyn MutateEngine>,
}

// SAFETY: the vtable is a static table of functions; the region is atomic, the remap behind a
// mutex; engines are `Send + Sync`.
unsafe impl Send for StructuralMutatorObj {}
// SAFETY: as above.
unsafe impl Sync for StructuralMutatorObj {}

// SAFETY: repr(C) with the header first; the index is the one the runtime assigned to the key.
unsafe impl ObjectCore for StructuralMutatorObj {
    const TYPE_KEY: &'static str = "ffi.StructuralMutator";
    fn type_index() -> i32 {
        static INDEX: OnceLock<i32> = OnceLock::new();
        *INDEX.get_or_init(register_engine_type::<StructuralMutatorObj>)
    }
}

static MUTATOR_VTABLE: MutatorVTable = MutatorVTable {
    mutate: dispatch_mutate,
    maybe_inplace_mutate: dispatch_maybe_inplace_mutate,
    var_remap_get: dispatch_var_remap_get,
    var_remap_set: dispatch_var_remap_set,
};

/// The unchanged marker (`kTVMFFIUnchanged`).
const UNCHANGED: TVMFFIAny = TVMFFIAny {
    type_index: abi::kTVMFFIUnchanged,
    small_str_len: 0,
    payload: abi::TVMFFIAnyPayload { v_int64: 0 },
};

/// A mutation as it crosses the C boundary.
fn encode_mutation(mutation: Mutation) -> TVMFFIAny {
    match mutation {
        Ok(None) => UNCHANGED,
        Ok(Some(value)) => value.into_raw(),
        Err(error) => Any::from(error).into_raw(),
    }
}

/// Decodes what a hook or vtable entry returned (an owning value).
fn decode_mutation(raw: TVMFFIAny) -> Mutation {
    if raw.type_index == abi::kTVMFFIUnchanged {
        return Ok(None);
    }
    // SAFETY: hooks and vtable entries return one owning value.
    let value = unsafe { Any::from_raw(raw) };
    if value.type_index() == abi::kTVMFFIError {
        return Err(value.cast::<Error>()?);
    }
    Ok(Some(value))
}

/// Runs a vtable entry's or hook's body on the mutator and value it was called with; a vtable
/// entry (`records`) names its value in the visit context of an error.
fn entry(
    name: &'static str,
    records: bool,
    mutator: *mut StructuralMutatorObj,
    value: TVMFFIAny,
    body: impl FnOnce(&StructuralMutatorObj, AnyView<'_>) -> Mutation,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary(name, || {
        // SAFETY: entries are reached through a live mutator, which passes itself; the value
        // is borrowed for the call.
        let (mutator, value) = unsafe { (&*mutator, AnyView::from_raw(value)) };
        let mutation = crate::stack::ensure_room("the structure to rewrite")
            .and_then(|()| body(mutator, value));
        encode_mutation(mutation.map_err(|error| match records {
            true => super::visit_error::record(error, value),
            false => error,
        }))
    })
}

unsafe extern "C" fn dispatch_mutate(m: *mut StructuralMutatorObj, v: TVMFFIAny) -> TVMFFIAny {
    entry("StructuralMutator.mutate", true, m, v, |m, v| {
        m.engine.mutate(m, v, InplaceMode::Disallow)
    })
}

unsafe extern "C" fn dispatch_maybe_inplace_mutate(
    m: *mut StructuralMutatorObj,
    v: TVMFFIAny,
) -> TVMFFIAny {
    entry(
        "StructuralMutator.maybe_inplace_mutate",
        true,
        m,
        v,
        |m, v| m.engine.mutate(m, v, InplaceMode::Allow),
    )
}

unsafe extern "C" fn dispatch_var_remap_get(
    m: *mut StructuralMutatorObj,
    var: TVMFFIAny,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary("StructuralMutator.var_remap_get", || {
        // SAFETY: as in `entry`.
        let (m, var) = unsafe { (&*m, AnyView::from_raw(var)) };
        match m.var_remap_get(var) {
            Ok(None) => TVMFFIAny::NONE,
            Ok(Some(mapped)) => encode_mutation(Ok(mapped)),
            Err(error) => Any::from(error).into_raw(),
        }
    })
}

unsafe extern "C" fn dispatch_var_remap_set(
    m: *mut StructuralMutatorObj,
    var: TVMFFIAny,
    mapped: TVMFFIAny,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary("StructuralMutator.var_remap_set", || {
        // SAFETY: as in `entry`; the mapped value is borrowed for the call.
        let (m, var, mapped) = unsafe { (&*m, AnyView::from_raw(var), AnyView::from_raw(mapped)) };
        let mapped = if mapped.type_index() == abi::kTVMFFIUnchanged {
            None
        } else {
            Some(mapped.to_owned())
        };
        match m.var_remap_set(var, mapped) {
            Ok(()) => TVMFFIAny::NONE,
            Err(error) => Any::from(error).into_raw(),
        }
    })
}

static S_MUTATE: TypeAttr = TypeAttr::new("__s_mutate__");
static S_MAYBE_INPLACE_MUTATE: TypeAttr = TypeAttr::new("__s_maybe_inplace_mutate__");
static SHALLOW_COPY: TypeAttr = TypeAttr::new("__ffi_shallow_copy__");

/// Whether `a` and `b` are the same value (the same object, or equal plain values).
fn same_as(a: AnyView<'_>, b: AnyView<'_>) -> bool {
    let (a, b) = (a.as_raw(), b.as_raw());
    // SAFETY: every payload is 8 initialized bytes.
    let (pa, pb) = unsafe { (a.payload.v_uint64, b.payload.v_uint64) };
    a.type_index == b.type_index && a.small_str_len == b.small_str_len && pa == pb
}

/// Whether `value` is an object held by exactly one reference.
fn uniquely_owned(value: AnyView<'_>) -> bool {
    value
        .as_object::<Object>()
        .is_some_and(|obj| obj.strong_count() == 1)
}

impl StructuralMutatorObj {
    fn new_ref(engine: Box<dyn MutateEngine>) -> ObjectRef<StructuralMutatorObj> {
        ObjectRef::new(StructuralMutatorObj {
            base: Object::header(),
            vtable: &MUTATOR_VTABLE,
            region: RegionCell::new(),
            remap: Mutex::new(HashMap::new()),
            engine,
        })
    }

    fn as_mut_ptr(&self) -> *mut StructuralMutatorObj {
        std::ptr::from_ref(self).cast_mut()
    }

    fn as_view(&self) -> AnyView<'_> {
        // SAFETY: `self` is a live object for the borrow.
        unsafe { AnyView::from_object_ptr(self.as_mut_ptr().cast()) }
    }

    /// Mutates `value` through this mutator's dispatch; with [`InplaceMode::Allow`] (granted
    /// along the whole path from the root) a uniquely owned value may change in place.
    pub fn mutate(&self, value: AnyView<'_>, mode: InplaceMode) -> Mutation {
        // Uniqueness is read before any callback takes a reference of its own.
        let dispatch = if mode == InplaceMode::Allow && uniquely_owned(value) {
            // SAFETY: reading a function pointer of the static vtable.
            unsafe { (*self.vtable).maybe_inplace_mutate }
        } else {
            // SAFETY: as above.
            unsafe { (*self.vtable).mutate }
        };
        // SAFETY: the entry takes this live mutator and a borrowed value, and returns an owning
        // outcome.
        decode_mutation(unsafe { dispatch(self.as_mut_ptr(), *value.as_raw()) })
    }

    /// Mutates `value` by its type's default (see the module documentation), bypassing the
    /// engine's callbacks for `value` itself. `mode` is the permission already established for
    /// `value`; it is not checked again.
    pub fn default_mutate(&self, value: AnyView<'_>, mode: InplaceMode) -> Mutation {
        if mode == InplaceMode::Allow
            && let Some(hook) = S_MAYBE_INPLACE_MUTATE.get_raw(value.type_index())
        {
            return self.call_hook(hook, value, "__s_maybe_inplace_mutate__");
        }
        if let Some(hook) = S_MUTATE.get_raw(value.type_index()) {
            return self.call_hook(hook, value, "__s_mutate__");
        }
        if value.type_index() < abi::kTVMFFIStaticObjectBegin {
            return Ok(None);
        }
        self.mutate_object(value)
    }

    fn call_hook(&self, hook: TVMFFIAny, value: AnyView<'_>, name: &str) -> Mutation {
        if hook.type_index == abi::kTVMFFIOpaquePtr {
            // SAFETY: an opaque-pointer entry of these columns is a native hook with the
            // signature apache-tvm-ffi's headers give it.
            let hook: NativeMutateHook = unsafe { std::mem::transmute(hook.payload.v_ptr) };
            // SAFETY: the hook takes this live mutator and a borrowed value.
            return decode_mutation(unsafe { hook(self.as_mut_ptr(), *value.as_raw()) });
        }
        // SAFETY: column entries live for the process.
        let hook = unsafe { AnyView::from_raw(hook) };
        let function: Function = hook.cast().map_err(|_| {
            Error::new(
                ErrorKind::TypeError,
                format!(
                    "{name} of `{}` must be a native hook or an ffi.Function, got `{}`",
                    value.type_key(),
                    hook.type_name()
                ),
            )
        })?;
        let result = function.call_packed(&[self.as_view(), value])?;
        Ok((result.type_index() != abi::kTVMFFIUnchanged).then_some(result))
    }

    /// Default mutation of an object without hooks: the variable remap for variables and DAG
    /// nodes, then its reflected fields.
    fn mutate_object(&self, value: AnyView<'_>) -> Mutation {
        let type_index = value.type_index();
        let kind = super::kind_of(type_index).unwrap_or(SEqHashKind::Unsupported);
        let is_var = kind == SEqHashKind::FreeVar;
        let is_dag = kind == SEqHashKind::DagNode;
        if (is_var || is_dag)
            && let Some((_, mapped)) = self.remap_entry(value)
        {
            return Ok(mapped);
        }
        // A variable outside a definition is a use; its definition (if any) was unchanged.
        if is_var && self.def_region_kind() == DefRegionKind::None {
            return Ok(None);
        }
        let result = self.mutate_fields(value)?;
        // An unchanged simple definition records nothing: its uses resolve to the variable.
        let records = is_dag
            || (is_var && (self.def_region_kind() == DefRegionKind::Pattern || result.is_some()));
        if records {
            self.var_remap_set(value, result.clone())?;
        }
        Ok(result)
    }

    /// Rewrites the reflected structural fields of the object in `value` on a shallow copy,
    /// made when the first field changes (children are never mutated in place).
    fn mutate_fields(&self, value: AnyView<'_>) -> Mutation {
        let type_index = value.type_index();
        let walk = || -> Mutation {
            let mut copy: Option<Any> = None;
            for field in structural_fields(type_index) {
                let child = field.get(value)?;
                let mutated = match DefRegionKind::of_field(field.flags()) {
                    Some(kind) => self.with_def_region_kind(kind, || {
                        self.mutate(child.as_view(), InplaceMode::Disallow)
                    }),
                    None => self.mutate(child.as_view(), InplaceMode::Disallow),
                }?;
                let Some(mutated) = mutated else { continue };
                if same_as(mutated.as_view(), child.as_view()) {
                    continue;
                }
                if !field.is_settable() {
                    return Err(Error::new(
                        ErrorKind::TypeError,
                        format!(
                            "Cannot structurally mutate field `{}` of type `{}` because it does \
                             not define a setter",
                            field.name(),
                            value.type_key()
                        ),
                    ));
                }
                let target = match &mut copy {
                    Some(copy) => copy,
                    None => copy.insert(shallow_copy(value)?),
                };
                field.set(target.as_view(), mutated.as_view())?;
            }
            Ok(copy)
        };
        if clamps_simple_definition(self.def_region_kind(), type_index) {
            self.with_def_region_kind(DefRegionKind::None, walk)
        } else {
            walk()
        }
    }

    fn remap_entry(&self, var: AnyView<'_>) -> Option<RemapEntry> {
        let key = var.as_object_ptr()? as usize;
        let remap = self.remap.lock().unwrap_or_else(|e| e.into_inner());
        remap.get(&key).cloned()
    }

    /// The replacement recorded for the variable `var`: `None` on a miss, `Some(None)` when it
    /// was recorded unchanged. A `TypeError` if `var` is not an object.
    pub fn var_remap_get(&self, var: AnyView<'_>) -> Result<Option<Option<Any>>> {
        remap_key(var)?;
        Ok(self.remap_entry(var).map(|(_, mapped)| mapped))
    }

    /// Records the replacement of the variable `var` (`None`: unchanged); a `TypeError` if
    /// `var` is not an object.
    pub fn var_remap_set(&self, var: AnyView<'_>, mapped: Option<Any>) -> Result<()> {
        let key = remap_key(var)?;
        let mut remap = self.remap.lock().unwrap_or_else(|e| e.into_inner());
        remap.insert(key, (var.to_owned(), mapped));
        Ok(())
    }

    /// The definition region the rewrite is in.
    pub fn def_region_kind(&self) -> DefRegionKind {
        self.region.get()
    }

    /// Runs `f` with the definition region `kind` (no effect inside a pattern region).
    pub fn with_def_region_kind<R>(&self, kind: DefRegionKind, f: impl FnOnce() -> R) -> R {
        self.region.with(kind, f)
    }
}

/// The remap key of `var` (its address), or the `TypeError` of a plain value.
fn remap_key(var: AnyView<'_>) -> Result<usize> {
    var.as_object_ptr().map(|p| p as usize).ok_or_else(|| {
        Error::new(
            ErrorKind::TypeError,
            format!(
                "Variable-remap key must be an object-backed value, got a value of type `{}`",
                var.type_name()
            ),
        )
    })
}

/// A distinct copy of the object in `value` by its type's `__ffi_shallow_copy__`.
fn shallow_copy(value: AnyView<'_>) -> Result<Any> {
    let type_index = value.type_index();
    let copier: Function = SHALLOW_COPY
        .get(type_index)
        .and_then(|f| f.cast().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::TypeError,
                format!(
                    "Cannot structurally mutate a `{}`: the type has no __ffi_shallow_copy__",
                    types::type_key_of(type_index)
                ),
            )
        })?;
    let copy = copier.call_packed(&[value])?;
    if copy.type_index() != type_index || same_as(copy.as_view(), value) {
        return Err(Error::new(
            ErrorKind::TypeError,
            format!(
                "__ffi_shallow_copy__ of `{}` must return a distinct object of the same type",
                types::type_key_of(type_index)
            ),
        ));
    }
    Ok(copy)
}

/// `ffi.StructuralMap`: callbacks `(value)` or `(value, region kind)` return replacements,
/// before (`Pre`) or after (`Post`) the default descent: `mutate(x) = post(D(pre(x)))`.
struct MapEngine {
    callbacks: CallbackTable,
    with_region: CallbackTable,
    pre_order: bool,
}

impl MapEngine {
    /// The matching callback's replacement of `value`, if one matches.
    fn apply(&self, mutator: &StructuralMutatorObj, value: AnyView<'_>) -> Result<Option<Any>> {
        let t = value.type_index();
        if let Some((f, _)) = self.callbacks.find(t) {
            return f.call_packed(&[value]).map(Some);
        }
        if let Some((f, _)) = self.with_region.find(t) {
            let kind = Any::from(mutator.def_region_kind() as i64);
            return f.call_packed(&[value, kind.as_view()]).map(Some);
        }
        Ok(None)
    }
}

impl MutateEngine for MapEngine {
    fn mutate(&self, m: &StructuralMutatorObj, value: AnyView<'_>, mode: InplaceMode) -> Mutation {
        if !self.pre_order {
            let descended = m.default_mutate(value, mode)?;
            let current = descended.as_ref().map_or(value, Any::as_view);
            return Ok(self.apply(m, current)?.or(descended));
        }
        let Some(replacement) = self.apply(m, value)? else {
            return m.default_mutate(value, mode);
        };
        // The replacement is itself mapped; in place only where it is the value itself or a
        // fresh, uniquely owned object.
        let mode = if mode == InplaceMode::Allow
            && (same_as(replacement.as_view(), value) || uniquely_owned(replacement.as_view()))
        {
            InplaceMode::Allow
        } else {
            InplaceMode::Disallow
        };
        Ok(Some(
            m.default_mutate(replacement.as_view(), mode)?
                .unwrap_or(replacement),
        ))
    }
}

/// `ffi.StructuralMutate`: a matched callback `(value, mutator[, inplace mode])` owns the
/// rewrite of its value; unmatched values take their default mutation.
struct CallbackMutateEngine {
    callbacks: CallbackTable,
}

impl MutateEngine for CallbackMutateEngine {
    fn mutate(&self, m: &StructuralMutatorObj, value: AnyView<'_>, mode: InplaceMode) -> Mutation {
        match self.callbacks.find(value.type_index()) {
            Some((f, takes_mode)) => {
                let result = if takes_mode {
                    let mode = Any::from(mode as i64);
                    f.call_packed(&[value, m.as_view(), mode.as_view()])?
                } else {
                    f.call_packed(&[value, m.as_view()])?
                };
                Ok(Some(result))
            }
            None => m.default_mutate(value, mode),
        }
    }
}

/// Rewrites `root` with callbacks that return replacements (see [`MapEngine`]); `order` 0
/// calls them before the default descent, 1 after. `root` is owned: when it is the only
/// reference, uniquely owned paths change in place.
pub fn structural_map(
    root: Any,
    callbacks: AnyView<'_>,
    with_region: AnyView<'_>,
    order: i64,
) -> Result<Any> {
    let pre_order = match order {
        0 => true,
        1 => false,
        _ => {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!("{order} is not a WalkOrder (0: pre-order, 1: post-order)"),
            ));
        }
    };
    let engine = MapEngine {
        callbacks: CallbackTable::parse(callbacks, "structural_map callback")?,
        with_region: CallbackTable::parse(with_region, "structural_map callback")?,
        pre_order,
    };
    let mutator = StructuralMutatorObj::new_ref(Box::new(engine));
    let mapped = mutator.mutate(root.as_view(), InplaceMode::Allow)?;
    Ok(mapped.unwrap_or(root))
}

/// Rewrites `root` with callbacks `(value, mutator[, inplace mode])` that own the rewrite of
/// the values they match (entries flagged true get the mode). `root` is owned as in
/// [`structural_map`].
pub fn structural_mutate(root: Any, callbacks: AnyView<'_>) -> Result<Any> {
    let engine = CallbackMutateEngine {
        callbacks: CallbackTable::parse(callbacks, "structural_mutate callback")?,
    };
    let mutator = StructuralMutatorObj::new_ref(Box::new(engine));
    let mapped = mutator.mutate(root.as_view(), InplaceMode::Allow)?;
    Ok(mapped.unwrap_or(root))
}

/// The items of a sequence after mutating each, or `None` if none changed; with `in_place`,
/// `replace` writes each changed item back instead.
fn mutate_items(
    m: &StructuralMutatorObj,
    items: &[Any],
    mode: InplaceMode,
    mut replace: Option<&mut dyn FnMut(usize, Any)>,
) -> Result<Option<Vec<Any>>> {
    let mut out: Option<Vec<Any>> = None;
    for (i, item) in items.iter().enumerate() {
        let mutated = m.mutate(item.as_view(), mode)?;
        let Some(mutated) = mutated.filter(|v| !same_as(v.as_view(), item.as_view())) else {
            if let Some(out) = &mut out {
                out.push(item.clone());
            }
            continue;
        };
        if let Some(replace) = &mut replace {
            replace(i, mutated);
            continue;
        }
        out.get_or_insert_with(|| items[..i].to_vec()).push(mutated);
    }
    Ok(out)
}

/// Runs a container hook body on the mutator and value it was called with.
fn hook(
    mutator: *mut StructuralMutatorObj,
    value: TVMFFIAny,
    body: impl FnOnce(&StructuralMutatorObj, AnyView<'_>) -> Mutation,
) -> TVMFFIAny {
    entry("a structural mutation hook", false, mutator, value, body)
}

/// `__s_mutate__` of arrays and lists: a new container if an item changed.
unsafe extern "C" fn mutate_sequence(m: *mut StructuralMutatorObj, v: TVMFFIAny) -> TVMFFIAny {
    hook(m, v, |m, value| {
        let items = sequence_items(value);
        let Some(items) = mutate_items(m, &items, InplaceMode::Disallow, None)? else {
            return Ok(None);
        };
        Ok(Some(if value.type_index() == abi::kTVMFFIArray {
            Array::from_vec(items).into()
        } else {
            let list = List::with_capacity(items.len());
            items.into_iter().for_each(|item| list.push(item));
            list.into()
        }))
    })
}

/// `__s_maybe_inplace_mutate__` of arrays and lists (uniquely owned): items change in place.
unsafe extern "C" fn mutate_sequence_in_place(
    m: *mut StructuralMutatorObj,
    v: TVMFFIAny,
) -> TVMFFIAny {
    hook(m, v, |m, value| {
        if let Some(array) = value.as_object::<ArrayObj>() {
            let len = array.as_slice().len();
            for i in 0..len {
                // Borrowed from the slot (a copy would make the item look shared): the array,
                // held only by the engine's caller, keeps it alive and unchanged meanwhile.
                let raw = *array.as_slice()[i].as_raw();
                // SAFETY: as just said; the view is not used after the slot is replaced.
                let item = unsafe { AnyView::from_raw(raw) };
                let mutated = m.mutate(item, InplaceMode::Allow)?;
                if let Some(mutated) = mutated.filter(|v| !same_as(v.as_view(), item)) {
                    // SAFETY: the engine grants in-place mutation only to a uniquely owned
                    // array (the caller's reference), and no borrow of its items is alive.
                    drop(unsafe { array.replace_unique(i, mutated) });
                }
            }
            return Ok(None);
        }
        let list: List = value.cast()?;
        let items = list.to_vec();
        let mut set_result = Ok(());
        let mut replace = |i: usize, item: Any| {
            if set_result.is_ok() {
                set_result = list.set(i as i64, item);
            }
        };
        mutate_items(m, &items, InplaceMode::Allow, Some(&mut replace))?;
        set_result.map(|()| None)
    })
}

/// `__s_mutate__` of maps and dicts: a new container if a value changed (keys are anchors and
/// stay as they are).
unsafe extern "C" fn mutate_map_values(m: *mut StructuralMutatorObj, v: TVMFFIAny) -> TVMFFIAny {
    hook(m, v, |m, value| {
        if value.type_index() == abi::kTVMFFIMap {
            let map: Map = value.cast()?;
            let (keys, values): (Vec<Any>, Vec<Any>) = map.iter().unzip();
            let Some(values) = mutate_items(m, &values, InplaceMode::Disallow, None)? else {
                return Ok(None);
            };
            let mut out = map.clone();
            for (key, value) in keys.into_iter().zip(values) {
                out.insert(key, value);
            }
            return Ok(Some(out.into()));
        }
        let dict: Dict = value.cast()?;
        let (keys, values): (Vec<Any>, Vec<Any>) = dict.iter().unzip();
        let Some(values) = mutate_items(m, &values, InplaceMode::Disallow, None)? else {
            return Ok(None);
        };
        let out = Dict::new();
        for (key, value) in keys.into_iter().zip(values) {
            out.insert(key, value);
        }
        Ok(Some(out.into()))
    })
}

/// `__s_maybe_inplace_mutate__` of maps (uniquely owned): values change in place, keys stay (as
/// apache-tvm-ffi does, so a rewrite of a map nothing else holds keeps its storage).
unsafe extern "C" fn mutate_map_in_place(m: *mut StructuralMutatorObj, v: TVMFFIAny) -> TVMFFIAny {
    hook(m, v, |m, value| {
        let map = value.as_object::<MapObj>().ok_or_else(|| {
            Error::new(
                ErrorKind::TypeError,
                "the in-place mutation hook of ffi.Map got another type",
            )
        })?;
        // SAFETY: the engine grants in-place mutation only to a uniquely owned map (the caller's
        // reference); the mutation of a value sees that value, never the map.
        unsafe {
            map.replace_values_unique(|item| {
                let mutated = m.mutate(item, InplaceMode::Allow)?;
                Ok(mutated.filter(|v| !same_as(v.as_view(), item)))
            })?;
        }
        Ok(None)
    })
}

/// `__s_maybe_inplace_mutate__` of dicts (uniquely owned): values change in place.
unsafe extern "C" fn mutate_dict_in_place(m: *mut StructuralMutatorObj, v: TVMFFIAny) -> TVMFFIAny {
    hook(m, v, |m, value| {
        let dict: Dict = value.cast()?;
        let (keys, values): (Vec<Any>, Vec<Any>) = dict.iter().unzip();
        let mut replace = |i: usize, item: Any| {
            dict.insert(keys[i].clone(), item);
        };
        mutate_items(m, &values, InplaceMode::Allow, Some(&mut replace))?;
        Ok(None)
    })
}

/// `__s_mutate__` of immutable leaves (strings, bytes, big integers): unchanged.
unsafe extern "C" fn mutate_immutable_leaf(
    _: *mut StructuralMutatorObj,
    _: TVMFFIAny,
) -> TVMFFIAny {
    UNCHANGED
}

/// Registers the mutator type and the container hooks.
pub(crate) fn register() -> Result<()> {
    let _ = StructuralMutatorObj::type_index();
    let native = |f: NativeMutateHook| Any::from(f as *mut c_void);
    let leaf = native(mutate_immutable_leaf);
    for index in [abi::kTVMFFIStr, abi::kTVMFFIBytes, abi::kTVMFFIBigInt] {
        reflection::register_type_attr(index, "__s_mutate__", &leaf)?;
        reflection::register_type_attr(index, "__s_maybe_inplace_mutate__", &leaf)?;
    }
    let (seq, seq_in_place) = (native(mutate_sequence), native(mutate_sequence_in_place));
    for index in [abi::kTVMFFIArray, abi::kTVMFFIList] {
        reflection::register_type_attr(index, "__s_mutate__", &seq)?;
        reflection::register_type_attr(index, "__s_maybe_inplace_mutate__", &seq_in_place)?;
    }
    let map = native(mutate_map_values);
    reflection::register_type_attr(abi::kTVMFFIMap, "__s_mutate__", &map)?;
    reflection::register_type_attr(abi::kTVMFFIDict, "__s_mutate__", &map)?;
    let map_in_place = native(mutate_map_in_place);
    reflection::register_type_attr(abi::kTVMFFIMap, "__s_maybe_inplace_mutate__", &map_in_place)?;
    let dict_in_place = native(mutate_dict_in_place);
    reflection::register_type_attr(
        abi::kTVMFFIDict,
        "__s_maybe_inplace_mutate__",
        &dict_in_place,
    )
}

/// The mutator in a packed argument (a `TypeError` for anything else).
fn mutator_arg(value: &AnyView<'_>) -> Result<ObjectRef<StructuralMutatorObj>> {
    value.cast::<ObjectRef<StructuralMutatorObj>>()
}

/// The `ffi.*` functions of structural rewriting.
pub(crate) fn functions() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.StructuralMutatorMutate",
            Function::from_packed(|args| {
                let [mutator, value] = args else {
                    return Err(arity("ffi.StructuralMutatorMutate", 2, args.len()));
                };
                let mutated = mutator_arg(mutator)?.mutate(*value, InplaceMode::Disallow)?;
                Ok(mutated.unwrap_or_else(|| value.to_owned()))
            }),
        ),
        (
            "ffi.StructuralMutatorDefaultMutate",
            Function::from_packed(|args| {
                let [mutator, value] = args else {
                    return Err(arity("ffi.StructuralMutatorDefaultMutate", 2, args.len()));
                };
                let mutated =
                    mutator_arg(mutator)?.default_mutate(*value, InplaceMode::Disallow)?;
                Ok(mutated.unwrap_or_else(|| value.to_owned()))
            }),
        ),
        (
            "ffi.StructuralMutatorVarRemapGet",
            Function::from_packed(|args| {
                let [mutator, var] = args else {
                    return Err(arity("ffi.StructuralMutatorVarRemapGet", 2, args.len()));
                };
                Ok(match mutator_arg(mutator)?.var_remap_get(*var)? {
                    None => Any::none(),
                    Some(None) => var.to_owned(),
                    Some(Some(mapped)) => mapped,
                })
            }),
        ),
        (
            "ffi.StructuralMutatorVarRemapSet",
            Function::from_packed(|args| {
                let [mutator, var, mapped] = args else {
                    return Err(arity("ffi.StructuralMutatorVarRemapSet", 3, args.len()));
                };
                let mapped = mapped.try_to_owned()?;
                mutator_arg(mutator)?.var_remap_set(*var, Some(mapped))?;
                Ok(Any::none())
            }),
        ),
        (
            "ffi.StructuralMutatorDefRegionKind",
            Function::from_packed(|args| {
                let [mutator] = args else {
                    return Err(arity("ffi.StructuralMutatorDefRegionKind", 1, args.len()));
                };
                Ok(Any::from(mutator_arg(mutator)?.def_region_kind() as i64))
            }),
        ),
        (
            "ffi.StructuralMutatorWithDefRegionKind",
            Function::from_packed(|args| {
                let [mutator, kind, callback] = args else {
                    return Err(arity(
                        "ffi.StructuralMutatorWithDefRegionKind",
                        3,
                        args.len(),
                    ));
                };
                let kind = DefRegionKind::from_i32(kind.cast::<i32>()?)?;
                let callback: Function = callback.cast()?;
                mutator_arg(mutator)?.with_def_region_kind(kind, || callback.call_packed(&[]))
            }),
        ),
        (
            "ffi.StructuralMap",
            Function::from_packed(|args| {
                let [root, callbacks, with_region, order] = args else {
                    return Err(arity("ffi.StructuralMap", 4, args.len()));
                };
                // Owning the root (an rvalue reference gives it up) makes the caller's
                // ownership visible to the uniqueness check.
                structural_map(
                    root.try_to_owned()?,
                    *callbacks,
                    *with_region,
                    order.cast()?,
                )
            }),
        ),
        (
            "ffi.StructuralMutate",
            Function::from_packed(|args| {
                let [root, callbacks] = args else {
                    return Err(arity("ffi.StructuralMutate", 2, args.len()));
                };
                structural_mutate(root.try_to_owned()?, *callbacks)
            }),
        ),
    ]
}
