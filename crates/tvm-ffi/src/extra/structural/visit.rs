//! Structural traversal (`ffi.StructuralWalk`, `ffi.StructuralVisit`, `ffi.StructuralVisitor`,
//! `ffi.VisitInterrupt`).
//!
//! A [`StructuralVisitorObj`] is the active context of one traversal: it carries the dispatch
//! of the traversal engine and the current definition region (whether the values reached are
//! uses of variables, or definitions by pattern or simple definitions). Its layout is the
//! original runtime's (header, vtable pointer, region kind), so C++ `__s_visit__` hooks compiled
//! against apache-tvm-ffi headers call back into it.
//!
//! The default descent of a value ([`StructuralVisitorObj::default_visit`]) uses its type's
//! `__s_visit__` hook (a native function pointer or an `ffi.Function`); without one, plain
//! values have no children and objects visit their reflected fields, skipping those flagged
//! `SEqHashIgnore` and entering a definition region for fields flagged `SEqHashDef` (pattern)
//! or `SEqHashDefSimple`. Arrays and lists visit their items, maps and dicts their values (keys
//! are anchors, not children).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use super::snapshots::{map_values, sequence_items};
use crate::abi::{self, TVMFFIAny};
use crate::any::{Any, AnyView};
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{Object, ObjectCore, ObjectRef};
use crate::reflection::{self, FieldRef};
use crate::type_attr::TypeAttr;
use crate::{Array, define_object, types};

define_object! {
    /// The signal that stops a structural traversal, with an optional payload.
    pub struct VisitInterruptObj : "ffi.VisitInterrupt" extends Object {
        /// The payload handed back to whoever started the traversal.
        pub value: Any,
    }
}

/// A reference to a [`VisitInterruptObj`].
#[derive(Clone)]
pub struct VisitInterrupt(ObjectRef<VisitInterruptObj>);

impl VisitInterrupt {
    /// An interrupt carrying `value`.
    pub fn new(value: Any) -> VisitInterrupt {
        VisitInterrupt(ObjectRef::new(VisitInterruptObj {
            base: Object::header(),
            value,
        }))
    }

    /// The payload.
    pub fn value(&self) -> &Any {
        &self.0.value
    }
}

impl std::fmt::Debug for VisitInterrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("VisitInterrupt").field(self.value()).finish()
    }
}

impl From<VisitInterrupt> for Any {
    fn from(interrupt: VisitInterrupt) -> Any {
        Any::from(interrupt.0)
    }
}

impl crate::any::TryFromAnyView for VisitInterrupt {
    const TYPE_NAME: &'static str = "ffi.VisitInterrupt";
    fn try_from_view(view: &AnyView<'_>) -> Option<Self> {
        ObjectRef::<VisitInterruptObj>::try_from_view(view).map(VisitInterrupt)
    }
}

/// What a visit step ends with: go on (`None`) or stop with an interrupt.
pub type VisitOutcome = Result<Option<VisitInterrupt>>;

/// The definition region a traversal is in (`TVMFFIDefRegionKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DefRegionKind {
    /// Not in a definition: variables reached are uses.
    None = 0,
    /// A pattern definition: every variable reached binds; regions entered inside it have no
    /// effect.
    Pattern = 1,
    /// A simple definition: the variable itself binds; its own fields are uses.
    Simple = 2,
}

impl DefRegionKind {
    /// The kind with the ABI value `value`, or a `ValueError` naming it.
    pub fn from_i32(value: i32) -> Result<DefRegionKind> {
        match value {
            0 => Ok(DefRegionKind::None),
            1 => Ok(DefRegionKind::Pattern),
            2 => Ok(DefRegionKind::Simple),
            _ => Err(Error::new(
                ErrorKind::ValueError,
                format!("{value} is not a DefRegionKind (0: none, 1: pattern, 2: simple)"),
            )),
        }
    }

    /// The region a field with `flags` opens (`None` for an ordinary field).
    pub(crate) fn of_field(flags: i64) -> Option<DefRegionKind> {
        if flags & abi::kTVMFFIFieldFlagBitMaskSEqHashDefSimple != 0 {
            Some(DefRegionKind::Simple)
        } else if flags & abi::kTVMFFIFieldFlagBitMaskSEqHashDef != 0 {
            Some(DefRegionKind::Pattern)
        } else {
            None
        }
    }
}

/// A definition region, shared by visitors and mutators: set for the span of a callback, and
/// ignored inside a pattern region (the pattern propagates).
#[repr(transparent)]
pub(crate) struct RegionCell(AtomicI32);

impl RegionCell {
    pub(crate) const fn new() -> RegionCell {
        RegionCell(AtomicI32::new(0))
    }

    pub(crate) fn get(&self) -> DefRegionKind {
        DefRegionKind::from_i32(self.0.load(Ordering::Relaxed)).unwrap_or(DefRegionKind::None)
    }

    /// Runs `f` with `kind` active, then restores the previous kind (also on error).
    pub(crate) fn with<R>(&self, kind: DefRegionKind, f: impl FnOnce() -> R) -> R {
        let old = self.0.load(Ordering::Relaxed);
        if old == DefRegionKind::Pattern as i32 {
            return f();
        }
        struct Restore<'a>(&'a AtomicI32, i32);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.store(self.1, Ordering::Relaxed);
            }
        }
        self.0.store(kind as i32, Ordering::Relaxed);
        let _restore = Restore(&self.0, old);
        f()
    }
}

/// The vtable of a visitor, laid out as apache-tvm-ffi's `StructuralVisitorVTable`.
#[repr(C)]
pub struct VisitorVTable {
    /// Visits a value: returns None, a `VisitInterrupt` or an `Error`.
    pub visit: NativeVisitHook,
}

/// The C signature of the visitor's dispatch and of native `__s_visit__` hooks.
pub type NativeVisitHook =
    unsafe extern "C" fn(visitor: *mut StructuralVisitorObj, value: TVMFFIAny) -> TVMFFIAny;

/// What a traversal engine does with each value it is asked to visit.
pub(crate) trait VisitEngine: Send + Sync {
    fn visit(&self, visitor: &StructuralVisitorObj, value: AnyView<'_>) -> VisitOutcome;
}

/// The active context of one structural traversal (`ffi.StructuralVisitor`).
#[repr(C)]
pub struct StructuralVisitorObj {
    base: Object,
    vtable: *const VisitorVTable,
    region: RegionCell,
    engine: Box<dyn VisitEngine>,
}

// SAFETY: the vtable is a static table of functions; the region is atomic; engines are
// `Send + Sync`.
unsafe impl Send for StructuralVisitorObj {}
// SAFETY: as above.
unsafe impl Sync for StructuralVisitorObj {}

// SAFETY: repr(C) with the header first; the index is the one the runtime assigned to the key.
unsafe impl ObjectCore for StructuralVisitorObj {
    const TYPE_KEY: &'static str = "ffi.StructuralVisitor";
    fn type_index() -> i32 {
        static INDEX: OnceLock<i32> = OnceLock::new();
        *INDEX.get_or_init(register_engine_type::<StructuralVisitorObj>)
    }
}

/// Registers an engine type (visitor or mutator) under `ffi.Object` with its size.
pub(crate) fn register_engine_type<T: ObjectCore>() -> i32 {
    let index = types::register_type(T::TYPE_KEY, abi::kTVMFFIObject, 0, true)
        .unwrap_or_else(|e| panic!("cannot register type `{}`: {e}", T::TYPE_KEY));
    // A repeat registration (another copy of this library) keeps the first.
    let _ = reflection::register_metadata(index, std::mem::size_of::<T>());
    index
}

static VISITOR_VTABLE: VisitorVTable = VisitorVTable {
    visit: dispatch_visit,
};

/// The vtable entry of every visitor made here: runs its engine.
unsafe extern "C" fn dispatch_visit(
    visitor: *mut StructuralVisitorObj,
    value: TVMFFIAny,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary("StructuralVisitor.visit", || {
        // SAFETY: the vtable is only reachable through a live visitor, which passes itself;
        // the value is borrowed for the call.
        let (visitor, value) = unsafe { (&*visitor, AnyView::from_raw(value)) };
        let outcome = crate::stack::ensure_room("the structure to traverse")
            .and_then(|()| visitor.engine.visit(visitor, value));
        encode_visit(outcome.map_err(|error| super::visit_error::record(error, value)))
    })
}

/// A visit outcome as it crosses the C boundary: None, an interrupt or an `Error`.
fn encode_visit(outcome: VisitOutcome) -> TVMFFIAny {
    match outcome {
        Ok(None) => TVMFFIAny::NONE,
        Ok(Some(interrupt)) => Any::from(interrupt).into_raw(),
        Err(error) => Any::from(error).into_raw(),
    }
}

/// A failed hook or vtable entry returns its error as the outcome (the ABI of structural
/// hooks: an `ffi.Error` value instead of a status code).
impl crate::boundary::FailureValue for TVMFFIAny {
    fn failure() -> TVMFFIAny {
        Any::from(Error::new(
            ErrorKind::InternalError,
            "structural traversal failed",
        ))
        .into_raw()
    }

    fn report(error: Error) -> TVMFFIAny {
        Any::from(error).into_raw()
    }
}

/// Decodes what a visit hook or vtable entry returned (an owning value).
fn decode_visit(raw: TVMFFIAny) -> VisitOutcome {
    // SAFETY: hooks and vtable entries return one owning value.
    let value = unsafe { Any::from_raw(raw) };
    interrupt_or_none(value, "a structural visit")
}

/// `None`, an interrupt, or (for an `ffi.Error`) the error, from what `who` returned.
fn interrupt_or_none(value: Any, who: &str) -> VisitOutcome {
    match value.type_index() {
        abi::kTVMFFINone => Ok(None),
        abi::kTVMFFIError => Err(value.cast::<Error>()?),
        _ => match value.try_as::<VisitInterrupt>() {
            Some(interrupt) => Ok(Some(interrupt)),
            None => Err(Error::new(
                ErrorKind::TypeError,
                format!(
                    "{who} must return None or a VisitInterrupt, got a value of type `{}`",
                    value.as_view().type_name()
                ),
            )),
        },
    }
}

static S_VISIT: TypeAttr = TypeAttr::new("__s_visit__");

impl StructuralVisitorObj {
    fn new_ref(engine: Box<dyn VisitEngine>) -> ObjectRef<StructuralVisitorObj> {
        ObjectRef::new(StructuralVisitorObj {
            base: Object::header(),
            vtable: &VISITOR_VTABLE,
            region: RegionCell::new(),
            engine,
        })
    }

    fn as_mut_ptr(&self) -> *mut StructuralVisitorObj {
        std::ptr::from_ref(self).cast_mut()
    }

    /// Visits `value` through this visitor's dispatch (its engine's callbacks, or a C++
    /// subclass's vtable).
    pub fn visit(&self, value: AnyView<'_>) -> VisitOutcome {
        // SAFETY: the vtable of a live visitor is a static table whose entry takes the visitor
        // and a borrowed value and returns an owning outcome.
        decode_visit(unsafe { ((*self.vtable).visit)(self.as_mut_ptr(), *value.as_raw()) })
    }

    /// Visits the children of `value` by its type's default descent (see the module
    /// documentation), bypassing the engine's callbacks for `value` itself.
    pub fn default_visit(&self, value: AnyView<'_>) -> VisitOutcome {
        match S_VISIT.get_raw(value.type_index()) {
            Some(hook) if hook.type_index == abi::kTVMFFIOpaquePtr => {
                // SAFETY: an opaque-pointer `__s_visit__` entry is a native hook with the
                // signature apache-tvm-ffi's headers give it.
                let hook: NativeVisitHook = unsafe { std::mem::transmute(hook.payload.v_ptr) };
                // SAFETY: the hook takes this live visitor and a borrowed value.
                decode_visit(unsafe { hook(self.as_mut_ptr(), *value.as_raw()) })
            }
            Some(hook) => {
                // SAFETY: column entries live for the process.
                let hook = unsafe { AnyView::from_raw(hook) };
                let function: Function = hook.cast().map_err(|_| {
                    Error::new(
                        ErrorKind::TypeError,
                        format!(
                            "__s_visit__ of `{}` must be a native hook or an ffi.Function, got \
                             `{}`",
                            value.type_key(),
                            hook.type_name()
                        ),
                    )
                })?;
                let result = function.call_packed(&[self.as_view(), value])?;
                interrupt_or_none(result, "an __s_visit__ hook")
            }
            None if value.type_index() < abi::kTVMFFIStaticObjectBegin => Ok(None),
            None => self.visit_fields(value),
        }
    }

    /// Visits the reflected structural fields of the object in `value`.
    fn visit_fields(&self, value: AnyView<'_>) -> VisitOutcome {
        let type_index = value.type_index();
        let walk = || -> VisitOutcome {
            for field in structural_fields(type_index) {
                let child = field.get(value)?;
                let outcome = match DefRegionKind::of_field(field.flags()) {
                    Some(kind) => self.with_def_region_kind(kind, || self.visit(child.as_view())),
                    None => self.visit(child.as_view()),
                }?;
                if outcome.is_some() {
                    return Ok(outcome);
                }
            }
            Ok(None)
        };
        if clamps_simple_definition(self.def_region_kind(), type_index) {
            self.with_def_region_kind(DefRegionKind::None, walk)
        } else {
            walk()
        }
    }

    /// The definition region the traversal is in.
    pub fn def_region_kind(&self) -> DefRegionKind {
        self.region.get()
    }

    /// Runs `f` with the definition region `kind` (no effect inside a pattern region).
    pub fn with_def_region_kind<R>(&self, kind: DefRegionKind, f: impl FnOnce() -> R) -> R {
        self.region.with(kind, f)
    }

    fn as_view(&self) -> AnyView<'_> {
        // SAFETY: `self` is a live object for the borrow.
        unsafe { AnyView::from_object_ptr(self.as_mut_ptr().cast()) }
    }
}

/// The reflected fields structural traversal descends into (readable, not `SEqHashIgnore`).
pub(crate) fn structural_fields(type_index: i32) -> impl Iterator<Item = FieldRef> {
    reflection::fields_of(type_index)
        .filter(|f| f.flags() & abi::kTVMFFIFieldFlagBitMaskSEqHashIgnore == 0)
        .filter(FieldRef::is_readable)
}

/// Whether the fields of a free variable reached in a simple definition are uses: the
/// definition binds the variable alone.
pub(crate) fn clamps_simple_definition(region: DefRegionKind, type_index: i32) -> bool {
    region == DefRegionKind::Simple
        && super::kind_of(type_index).ok() == Some(super::SEqHashKind::FreeVar)
}

/// Callback entries `(type index, function)` of the dynamic engines, matched in order.
pub(crate) struct CallbackTable(Vec<(i32, Function, bool)>);

impl CallbackTable {
    /// Reads `[[type_index, callback(, flag)], ...]` as the Python side passes it; the flag
    /// (third item, optional) is kept per entry.
    pub(crate) fn parse(entries: AnyView<'_>, what: &str) -> Result<CallbackTable> {
        let bad = |detail: std::string::String| {
            Error::new(
                ErrorKind::TypeError,
                format!("{what} entries must be (type_index, callback) tuples: {detail}"),
            )
        };
        if entries.is_none() {
            return Ok(CallbackTable(Vec::new()));
        }
        let entries: Array = entries
            .cast()
            .map_err(|_| bad(format!("got a value of type `{}`", entries.type_name())))?;
        let mut table = Vec::with_capacity(entries.len());
        for entry in entries.iter() {
            let entry: Array = entry.cast().map_err(|_| {
                bad(format!(
                    "got an entry of type `{}`",
                    entry.as_view().type_name()
                ))
            })?;
            let items = entry.as_slice();
            if !(2..=3).contains(&items.len()) {
                return Err(bad(format!("got an entry of {} items", items.len())));
            }
            let type_index: i64 = items[0].cast()?;
            let type_index = i32::try_from(type_index)
                .map_err(|_| bad(format!("type index {type_index} is out of range")))?;
            let callback: Function = items[1].cast()?;
            let flag = match items.get(2) {
                Some(flag) => flag.cast::<bool>()?,
                None => false,
            };
            table.push((type_index, callback, flag));
        }
        Ok(CallbackTable(table))
    }

    /// The first entry whose type matches a value of `type_index`.
    pub(crate) fn find(&self, type_index: i32) -> Option<(&Function, bool)> {
        self.0
            .iter()
            .find(|(target, _, _)| type_index_matches(type_index, *target))
            .map(|(_, f, flag)| (f, *flag))
    }
}

/// Whether a value of type `actual` matches a callback registered for `target`: the same
/// index, any value for `-1` (`Any`), the inline forms of strings and bytes, every object for
/// `ffi.Object`, and subtypes of an object type.
pub fn type_index_matches(actual: i32, target: i32) -> bool {
    actual == target
        || target == -1
        || (target == abi::kTVMFFIStr && actual == abi::kTVMFFISmallStr)
        || (target == abi::kTVMFFIBytes && actual == abi::kTVMFFISmallBytes)
        || (target == abi::kTVMFFIObject && actual >= abi::kTVMFFIStaticObjectBegin)
        || (actual >= abi::kTVMFFIStaticObjectBegin
            && target >= abi::kTVMFFIStaticObjectBegin
            && types::is_instance_of(actual, target))
}

/// Callback order of a walk: before or after the children.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WalkOrder {
    Pre,
    Post,
}

/// `ffi.StructuralWalk`: callbacks `(value)` or `(value, region kind)` at every occurrence.
struct WalkEngine {
    callbacks: CallbackTable,
    with_region: CallbackTable,
    order: WalkOrder,
}

/// What a walk callback asked for.
enum WalkStep {
    Advance,
    Skip,
    Stop(VisitInterrupt),
}

impl WalkEngine {
    fn run_callback(&self, visitor: &StructuralVisitorObj, value: AnyView<'_>) -> Result<WalkStep> {
        let t = value.type_index();
        let result = if let Some((f, _)) = self.callbacks.find(t) {
            f.call_packed(&[value])?
        } else if let Some((f, _)) = self.with_region.find(t) {
            let kind = Any::from(visitor.def_region_kind() as i64);
            f.call_packed(&[value, kind.as_view()])?
        } else {
            return Ok(WalkStep::Advance);
        };
        match result.type_index() {
            abi::kTVMFFINone => Ok(WalkStep::Advance),
            abi::kTVMFFIInt | abi::kTVMFFIBool => match result.cast::<i64>()? {
                0 => Ok(WalkStep::Advance),
                1 => Ok(WalkStep::Skip),
                other => Err(Error::new(
                    ErrorKind::ValueError,
                    format!("{other} is not a WalkResult (0: advance, 1: skip)"),
                )),
            },
            _ => match result.try_as::<VisitInterrupt>() {
                Some(interrupt) => Ok(WalkStep::Stop(interrupt)),
                None => Err(Error::new(
                    ErrorKind::TypeError,
                    format!(
                        "a structural walk callback must return None, a WalkResult or a \
                         VisitInterrupt, got a value of type `{}`",
                        result.as_view().type_name()
                    ),
                )),
            },
        }
    }
}

impl VisitEngine for WalkEngine {
    fn visit(&self, visitor: &StructuralVisitorObj, value: AnyView<'_>) -> VisitOutcome {
        if value.is_none() {
            return Ok(None);
        }
        if self.order == WalkOrder::Pre {
            match self.run_callback(visitor, value)? {
                WalkStep::Advance => {}
                WalkStep::Skip => return Ok(None),
                WalkStep::Stop(interrupt) => return Ok(Some(interrupt)),
            }
        }
        if let Some(interrupt) = visitor.default_visit(value)? {
            return Ok(Some(interrupt));
        }
        if self.order == WalkOrder::Post
            && let WalkStep::Stop(interrupt) = self.run_callback(visitor, value)?
        {
            return Ok(Some(interrupt));
        }
        Ok(None)
    }
}

/// `ffi.StructuralVisit`: a matched callback `(value, visitor)` owns the descent into its value.
struct CallbackVisitEngine {
    callbacks: CallbackTable,
}

impl VisitEngine for CallbackVisitEngine {
    fn visit(&self, visitor: &StructuralVisitorObj, value: AnyView<'_>) -> VisitOutcome {
        match self.callbacks.find(value.type_index()) {
            Some((f, _)) => {
                let result = f.call_packed(&[value, visitor.as_view()])?;
                interrupt_or_none(result, "a structural visit callback")
            }
            None => visitor.default_visit(value),
        }
    }
}

/// Walks `root` calling the first matching callback at every occurrence of a value: entries of
/// `callbacks` get `(value)`, entries of `with_region` `(value, region kind)`; `order` 0 calls
/// them before the children (a callback may then return `WalkResult.SKIP`), 1 after. Returns
/// the interrupt a callback returned, if any.
pub fn structural_walk(
    root: AnyView<'_>,
    callbacks: AnyView<'_>,
    with_region: AnyView<'_>,
    order: i64,
) -> VisitOutcome {
    let order = match order {
        0 => WalkOrder::Pre,
        1 => WalkOrder::Post,
        _ => {
            return Err(Error::new(
                ErrorKind::ValueError,
                format!("{order} is not a WalkOrder (0: pre-order, 1: post-order)"),
            ));
        }
    };
    let engine = WalkEngine {
        callbacks: CallbackTable::parse(callbacks, "structural_walk callback")?,
        with_region: CallbackTable::parse(with_region, "structural_walk callback")?,
        order,
    };
    StructuralVisitorObj::new_ref(Box::new(engine)).visit(root)
}

/// Visits `root` with callbacks `(value, visitor)` that own the descent into the values they
/// match; unmatched values take their default descent.
pub fn structural_visit(root: AnyView<'_>, callbacks: AnyView<'_>) -> VisitOutcome {
    let engine = CallbackVisitEngine {
        callbacks: CallbackTable::parse(callbacks, "structural_visit callback")?,
    };
    StructuralVisitorObj::new_ref(Box::new(engine)).visit(root)
}

/// Native `__s_visit__` hook of arrays and lists: their items.
unsafe extern "C" fn visit_sequence(
    visitor: *mut StructuralVisitorObj,
    value: TVMFFIAny,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary("__s_visit__ of a sequence", || {
        // SAFETY: the engine passes a live visitor and a borrowed array or list.
        let (visitor, value) = unsafe { (&*visitor, AnyView::from_raw(value)) };
        encode_visit(visit_all(visitor, sequence_items(value).iter()))
    })
}

/// Native `__s_visit__` hook of maps and dicts: their values (keys are anchors).
unsafe extern "C" fn visit_map_values(
    visitor: *mut StructuralVisitorObj,
    value: TVMFFIAny,
) -> TVMFFIAny {
    crate::boundary::ffi_boundary("__s_visit__ of a map", || {
        // SAFETY: the engine passes a live visitor and a borrowed map or dict.
        let (visitor, value) = unsafe { (&*visitor, AnyView::from_raw(value)) };
        encode_visit(visit_all(visitor, map_values(value).iter()))
    })
}

fn visit_all<'a>(
    visitor: &StructuralVisitorObj,
    values: impl Iterator<Item = &'a Any>,
) -> VisitOutcome {
    for value in values {
        if let Some(interrupt) = visitor.visit(value.as_view())? {
            return Ok(Some(interrupt));
        }
    }
    Ok(None)
}

/// Registers the types and the container hooks.
pub(crate) fn register() -> Result<()> {
    super::visit_error::register();
    let _ = VisitInterruptObj::type_index();
    let _ = StructuralVisitorObj::type_index();
    let sequence = Any::from(visit_sequence as NativeVisitHook as *mut std::ffi::c_void);
    let map = Any::from(visit_map_values as NativeVisitHook as *mut std::ffi::c_void);
    for (index, hook) in [
        (abi::kTVMFFIArray, &sequence),
        (abi::kTVMFFIList, &sequence),
        (abi::kTVMFFIMap, &map),
        (abi::kTVMFFIDict, &map),
    ] {
        reflection::register_type_attr(index, "__s_visit__", hook)?;
    }
    Ok(())
}

/// The visitor in a packed argument (a `TypeError` for anything else).
fn visitor_arg(value: &AnyView<'_>) -> Result<ObjectRef<StructuralVisitorObj>> {
    value.cast::<ObjectRef<StructuralVisitorObj>>()
}

/// The `ffi.*` functions of structural traversal.
pub(crate) fn functions() -> Vec<(&'static str, Function)> {
    let outcome_any = |outcome: VisitOutcome| outcome.map(|o| o.map_or(Any::none(), Any::from));
    vec![
        (
            "ffi.VisitInterrupt",
            Function::from_typed("ffi.VisitInterrupt", |value: Any| {
                Ok::<_, Error>(VisitInterrupt::new(value))
            }),
        ),
        (
            "ffi.StructuralVisitorVisit",
            Function::from_packed(move |args| {
                let [visitor, value] = args else {
                    return Err(arity("ffi.StructuralVisitorVisit", 2, args.len()));
                };
                outcome_any(visitor_arg(visitor)?.visit(*value))
            }),
        ),
        (
            "ffi.StructuralVisitorDefaultVisit",
            Function::from_packed(move |args| {
                let [visitor, value] = args else {
                    return Err(arity("ffi.StructuralVisitorDefaultVisit", 2, args.len()));
                };
                outcome_any(visitor_arg(visitor)?.default_visit(*value))
            }),
        ),
        (
            "ffi.StructuralVisitorDefRegionKind",
            Function::from_packed(|args| {
                let [visitor] = args else {
                    return Err(arity("ffi.StructuralVisitorDefRegionKind", 1, args.len()));
                };
                Ok(Any::from(visitor_arg(visitor)?.def_region_kind() as i64))
            }),
        ),
        (
            "ffi.StructuralVisitorWithDefRegionKind",
            Function::from_packed(|args| {
                let [visitor, kind, callback] = args else {
                    return Err(arity(
                        "ffi.StructuralVisitorWithDefRegionKind",
                        3,
                        args.len(),
                    ));
                };
                let kind = DefRegionKind::from_i32(kind.cast::<i32>()?)?;
                let callback: Function = callback.cast()?;
                visitor_arg(visitor)?.with_def_region_kind(kind, || callback.call_packed(&[]))
            }),
        ),
        (
            "ffi.StructuralWalk",
            Function::from_packed(move |args| {
                let [root, callbacks, with_region, order] = args else {
                    return Err(arity("ffi.StructuralWalk", 4, args.len()));
                };
                outcome_any(structural_walk(
                    *root,
                    *callbacks,
                    *with_region,
                    order.cast()?,
                ))
            }),
        ),
        (
            "ffi.StructuralVisit",
            Function::from_packed(move |args| {
                let [root, callbacks] = args else {
                    return Err(arity("ffi.StructuralVisit", 2, args.len()));
                };
                outcome_any(structural_visit(*root, *callbacks))
            }),
        ),
        (
            "ffi.VisitErrorContext.FindAccessPaths",
            super::visit_error::find_access_paths_function(),
        ),
    ]
}

/// The `TypeError` of a call with the wrong number of arguments.
pub(crate) fn arity(name: &str, expected: usize, got: usize) -> Error {
    Error::new(
        ErrorKind::TypeError,
        format!("{name} expects {expected} arguments, but {got} were given"),
    )
}
