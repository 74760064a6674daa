//! Where a structural traversal failed (`ffi.VisitErrorContext`,
//! `ffi.VisitErrorContext.FindAccessPaths`).
//!
//! An error leaving a traversal step records the object that step was on: the first such step
//! attaches a [`VisitErrorContextObj`] as the error's extra context (unless it carries another
//! one), and each enclosing step appends its object. The breadcrumbs
//! run innermost first; [`find_access_paths`] turns them back into access paths from a root.

use crate::abi;
use crate::any::{Any, AnyView};
use crate::error::{Error, Result};
use crate::extra::access_path::{AccessKind, AccessPath, AccessStep};
use crate::object::{Object, ObjectRef};
use crate::{Array, Dict, List, Map, MapRead, define_object, reflection};

define_object! {
    /// The objects an error passed through on its way out of a structural traversal.
    pub struct VisitErrorContextObj : "ffi.VisitErrorContext" extends Object {
        /// The objects, innermost first.
        pub reverse_visit_pattern: List,
        /// The extra context the error carried before, if any.
        pub prev_error_context: Any,
    }
}

/// `error` with `node` (an object; plain values are not recorded) added to its visit context.
/// An error that already carries another extra context (such as the foreign exception it stands
/// for, which a language binding raises again) keeps it and records nothing.
pub(crate) fn record(error: Error, node: AnyView<'_>) -> Error {
    if node.as_object_ptr().is_none() {
        return error;
    }
    match error.extra_context() {
        None => {}
        Some(context) => {
            if let Some(context) = context.as_object::<VisitErrorContextObj>() {
                context.reverse_visit_pattern.push(node.to_owned());
            }
            return error;
        }
    }
    let trail = List::new();
    trail.push(node.to_owned());
    let context = ObjectRef::new(VisitErrorContextObj {
        base: Object::header(),
        reverse_visit_pattern: trail,
        prev_error_context: Any::none(),
    });
    error.with_replaced_extra_context(Any::from(context))
}

/// The access paths from `root` along which the breadcrumbs of `context` lie (outermost
/// recorded object first, each next one a descendant; containers count as objects). With
/// `allow_prefix_match`, a path that matches only the outer part of the trail is reported at
/// the deepest object it reached.
pub fn find_access_paths(
    root: AnyView<'_>,
    context: &VisitErrorContextObj,
    allow_prefix_match: bool,
) -> Result<Vec<AccessPath>> {
    // Consecutive repeats of one object (a step recording what an inner step already did)
    // are one breadcrumb.
    let mut trail: Vec<Any> = Vec::new();
    for node in context.reverse_visit_pattern.to_vec() {
        if node.is_object() && trail.last().is_none_or(|last| !same_object(last, &node)) {
            trail.push(node);
        }
    }
    trail.reverse();
    let mut finder = Finder {
        trail,
        allow_prefix_match,
        matched: 0,
        steps: Vec::new(),
        found: Vec::new(),
    };
    finder.visit(root)?;
    Ok(finder.found)
}

fn same_object(a: &Any, b: &Any) -> bool {
    a.as_object_ptr() == b.as_object_ptr()
}

struct Finder {
    trail: Vec<Any>,
    allow_prefix_match: bool,
    matched: usize,
    steps: Vec<AccessStep>,
    found: Vec<AccessPath>,
}

impl Finder {
    fn path(&self) -> AccessPath {
        self.steps
            .iter()
            .fold(AccessPath::root(), |path, step| path.extend(step.clone()))
    }

    /// Visits `value`: an object matches the next breadcrumb by identity, then its children
    /// (container items and values, reflected fields) are searched for the rest.
    fn visit(&mut self, value: AnyView<'_>) -> Result<()> {
        crate::stack::ensure_room("the structure to search")?;
        if value.as_object_ptr().is_none() {
            return Ok(());
        }
        let matches = self
            .trail
            .get(self.matched)
            .is_some_and(|next| next.as_object_ptr() == value.as_object_ptr());
        if matches {
            self.matched += 1;
            if self.matched == self.trail.len() {
                self.found.push(self.path());
                self.matched -= 1;
                return Ok(());
            }
        }
        let found_before = self.found.len();
        let result = self.visit_children(value);
        // A partial match whose subtree matched no further is reported where it ends.
        if result.is_ok()
            && self.allow_prefix_match
            && self.matched > 0
            && !self.steps.is_empty()
            && self.found.len() == found_before
        {
            self.found.push(self.path());
        }
        if matches {
            self.matched -= 1;
        }
        result
    }

    fn visit_children(&mut self, value: AnyView<'_>) -> Result<()> {
        match value.type_index() {
            abi::kTVMFFIArray | abi::kTVMFFIList => {
                let items = super::snapshots::sequence_items(value);
                for (i, item) in items.iter().enumerate() {
                    self.descend(
                        AccessStep::new(AccessKind::ArrayItem, i as i64),
                        item.as_view(),
                    )?;
                }
            }
            abi::kTVMFFIMap | abi::kTVMFFIDict => {
                let entries: Vec<(Any, Any)> = if value.type_index() == abi::kTVMFFIMap {
                    value.cast::<Map>()?.iter().collect()
                } else {
                    value.cast::<Dict>()?.iter().collect()
                };
                for (key, item) in entries {
                    self.descend(AccessStep::new(AccessKind::MapItem, key), item.as_view())?;
                }
            }
            type_index => {
                for field in reflection::fields_of(type_index).filter(|f| f.is_readable()) {
                    let child = field.get(value)?;
                    self.descend(
                        AccessStep::new(AccessKind::Attr, field.name()),
                        child.as_view(),
                    )?;
                }
            }
        }
        Ok(())
    }

    fn descend(&mut self, step: AccessStep, child: AnyView<'_>) -> Result<()> {
        self.steps.push(step);
        let result = self.visit(child);
        self.steps.pop();
        result
    }
}

/// Registers the context type.
pub(crate) fn register() {
    use crate::ObjectCore;
    let _ = VisitErrorContextObj::type_index();
}

/// `ffi.VisitErrorContext.FindAccessPaths`: `(root, context, allow_prefix_match)`.
pub(crate) fn find_access_paths_function() -> crate::Function {
    crate::Function::from_typed(
        "ffi.VisitErrorContext.FindAccessPaths",
        |root: Any, context: ObjectRef<VisitErrorContextObj>, allow_prefix_match: bool| {
            let paths = find_access_paths(root.as_view(), &context, allow_prefix_match)?;
            Ok::<_, Error>(Array::from_vec(paths.into_iter().map(Any::from).collect()))
        },
    )
}
