//! Python's `repr` and `==` of the built-in containers over shared sub-graphs: one outermost
//! call on a thread remembers the shared containers and objects it has printed, and the pairs
//! of containers it has found equal, so that a graph whose nodes are shared many times (node
//! `i` holding node `i - 1` twice) costs time linear in its distinct nodes, not in its
//! unfolded size.
//!
//! A shared value met again prints its text again when that is at most
//! [`tvm_ffi::extra::repr::REPEAT_LIMIT`] bytes long (so small values print as they always did), and
//! otherwise as `<same as PATH>`, the path (`<root>[0]['k']`) where it was printed first.

use std::cell::RefCell;
use std::collections::HashMap;

use pyo3::prelude::*;
use tvm_ffi::Any;
use tvm_ffi::extra::structural::may_be_shared;

use crate::convert::any_to_py;

/// The state of this thread's outermost container `repr`.
#[derive(Default)]
struct ReprWalk {
    /// What shared values printed so far print as again, by address (held alive).
    printed: HashMap<usize, (Any, String)>,
    /// The path from the outermost container to the item being printed.
    steps: Vec<String>,
}

/// Pairs of runtime containers found equal in this thread's outermost `==`, by address, held
/// alive so that their addresses name them alone.
type EqualPairs = HashMap<(usize, usize), (Any, Any)>;

thread_local! {
    static REPR_WALK: RefCell<Option<ReprWalk>> = const { RefCell::new(None) };
    static EQ_WALK: RefCell<Option<EqualPairs>> = const { RefCell::new(None) };
}

/// Puts back the walk state a scope found (`None`: it started the walk, which ends with it).
struct Restore<T: 'static> {
    key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    saved: Option<Option<T>>,
}

impl<T> Drop for Restore<T> {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            self.key.with_borrow_mut(|state| *state = saved);
        }
    }
}

/// Runs `body` inside this thread's walk kept in `key`, starting one if none is running.
fn in_walk<T: Default, R>(
    key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    body: impl FnOnce() -> R,
) -> R {
    let started = key.with_borrow_mut(|state| {
        let fresh = state.is_none();
        if fresh {
            *state = Some(T::default());
        }
        fresh
    });
    let _end = Restore {
        key,
        saved: started.then_some(None),
    };
    body()
}

/// Runs `body` outside this thread's walk kept in `key` (which resumes after).
fn outside_walk<T, R>(
    key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
    body: impl FnOnce() -> R,
) -> R {
    let saved = key.with_borrow_mut(Option::take);
    let _resume = Restore {
        key,
        saved: Some(saved),
    };
    body()
}

/// The `repr` of a sequence's items as `[a, b]`, within this thread's repr walk.
pub(crate) fn sequence_repr(py: Python<'_>, items: &[Any]) -> PyResult<String> {
    in_walk(&REPR_WALK, || {
        let mut parts = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            parts.push(item_repr(py, item, || format!("[{i}]"))?);
        }
        Ok(format!("[{}]", parts.join(", ")))
    })
}

/// The `repr` of a mapping's entries as `{k: v}`, within this thread's repr walk.
pub(crate) fn mapping_repr(py: Python<'_>, entries: Vec<(Any, Any)>) -> PyResult<String> {
    in_walk(&REPR_WALK, || {
        let mut parts = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let key = any_to_py(py, k)?.bind(py).repr()?.to_string();
            let value = item_repr(py, &v, || format!("[{key}]"))?;
            parts.push(format!("{key}: {value}"));
        }
        Ok(format!("{{{}}}", parts.join(", ")))
    })
}

/// The `repr` of one item, whose step from its container `step` makes; a shared object met
/// again prints as it was remembered.
fn item_repr(py: Python<'_>, item: &Any, step: impl FnOnce() -> String) -> PyResult<String> {
    let shared = may_be_shared(item.as_view());
    let address = item.as_object_ptr().map_or(0, |ptr| ptr as usize);
    if shared {
        let again = REPR_WALK.with_borrow(|walk| {
            walk.as_ref()
                .and_then(|w| w.printed.get(&address).map(|(_, text)| text.clone()))
        });
        if let Some(text) = again {
            return Ok(text);
        }
    }
    let is_container = matches!(
        item.type_index(),
        tvm_ffi::abi::kTVMFFIArray
            | tvm_ffi::abi::kTVMFFIList
            | tvm_ffi::abi::kTVMFFIMap
            | tvm_ffi::abi::kTVMFFIDict
    );
    let step = step();
    with_walk(|walk| walk.steps.push(step));
    let value = any_to_py(py, item.clone());
    // Containers print within this walk; other values (objects, whose `repr` may be Python
    // code printing containers of its own) print on their own.
    let text = value.and_then(|value| {
        let value = value.bind(py);
        match is_container {
            true => value.repr(),
            false => outside_walk(&REPR_WALK, || value.repr()),
        }
        .map(|text| text.to_string())
    });
    with_walk(|walk| {
        if let Ok(text) = &text
            && shared
        {
            let again = if text.len() <= tvm_ffi::extra::repr::REPEAT_LIMIT {
                text.clone()
            } else {
                format!("<same as <root>{}>", walk.steps.concat())
            };
            walk.printed.insert(address, (item.clone(), again));
        }
        walk.steps.pop();
    });
    text
}

/// Runs `f` on this thread's repr walk (always running inside `in_walk`).
fn with_walk<R: Default>(f: impl FnOnce(&mut ReprWalk) -> R) -> R {
    REPR_WALK.with_borrow_mut(|walk| walk.as_mut().map(f).unwrap_or_default())
}

/// Whether `mine` equals `theirs` as `body` finds, remembering pairs of shared containers found
/// equal in this thread's outermost `==`. `theirs` is `None` unless it is a runtime container.
pub(crate) fn remembered_eq(
    mine: &Any,
    theirs: Option<Any>,
    body: impl FnOnce() -> PyResult<bool>,
) -> PyResult<bool> {
    let key = theirs.as_ref().and_then(|theirs| {
        (may_be_shared(mine.as_view()) || may_be_shared(theirs.as_view())).then(|| {
            let address = |v: &Any| v.as_object_ptr().map_or(0, |ptr| ptr as usize);
            (address(mine), address(theirs))
        })
    });
    in_walk(&EQ_WALK, || {
        let known = key.is_some_and(|key| {
            EQ_WALK.with_borrow(|memo| memo.as_ref().is_some_and(|m| m.contains_key(&key)))
        });
        if known {
            return Ok(true);
        }
        let equal = body()?;
        if let (true, Some(key), Some(theirs)) = (equal, key, theirs) {
            EQ_WALK.with_borrow_mut(|memo| {
                if let Some(memo) = memo {
                    memo.insert(key, (mine.clone(), theirs));
                }
            });
        }
        Ok(equal)
    })
}
