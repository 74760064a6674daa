//! Access paths (`ffi.reflection.AccessPath`, `ffi.reflection.AccessStep`): where a value sits
//! inside a structure, as a chain of steps from the root (`<root>.f[2]["k"]`). Structural
//! equality reports its first mismatch as a pair of them.

use std::fmt::Write as _;

use crate::any::{Any, AnyView};
use crate::error::{Error, ErrorKind, Result};
use crate::function::Function;
use crate::object::{Object, ObjectCore, ObjectRef};
use crate::{Array, define_object, reflection};

/// What a step of a path selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i64)]
pub enum AccessKind {
    /// A field, by name.
    Attr = 0,
    /// An item of a sequence, by index.
    ArrayItem = 1,
    /// An item of a mapping, by key.
    MapItem = 2,
    /// A field that the other side has and this one lacks.
    AttrMissing = 3,
    /// An index past the end of this sequence (the other side has the item).
    ArrayItemMissing = 4,
    /// A key this mapping lacks (the other side has it).
    MapItemMissing = 5,
}

impl AccessKind {
    /// The kind of code `code`, or a `ValueError` naming it.
    pub fn from_code(code: i64) -> Result<AccessKind> {
        Ok(match code {
            0 => AccessKind::Attr,
            1 => AccessKind::ArrayItem,
            2 => AccessKind::MapItem,
            3 => AccessKind::AttrMissing,
            4 => AccessKind::ArrayItemMissing,
            5 => AccessKind::MapItemMissing,
            other => {
                return Err(Error::new(
                    ErrorKind::ValueError,
                    format!("invalid access kind {other} (expected 0 to 5)"),
                ));
            }
        })
    }
}

define_object! {
    /// One step of an access path: its kind (an [`AccessKind`] code) and key (a field name,
    /// an index or a map key).
    pub struct AccessStepObj : "ffi.reflection.AccessStep" extends Object {
        /// The [`AccessKind`] code.
        pub kind: i64,
        /// The field name, index or map key.
        pub key: Any,
    }
}

define_object! {
    /// A node of an access path: the path of its parent plus one step (the root has neither).
    pub struct AccessPathObj : "ffi.reflection.AccessPath" extends Object {
        /// The path without the last step (`None` at the root).
        pub parent: Option<ObjectRef<AccessPathObj>>,
        /// The last step (`None` at the root).
        pub step: Option<ObjectRef<AccessStepObj>>,
        /// The number of steps.
        pub depth: i64,
    }
}

/// An access path (shared, immutable).
#[derive(Clone)]
pub struct AccessPath(ObjectRef<AccessPathObj>);

/// One step of an access path.
#[derive(Clone)]
pub struct AccessStep(ObjectRef<AccessStepObj>);

impl AccessStep {
    /// A step of `kind` with `key`.
    pub fn new(kind: AccessKind, key: impl Into<Any>) -> AccessStep {
        AccessStep(ObjectRef::new(AccessStepObj {
            base: Object::header(),
            kind: kind as i64,
            key: key.into(),
        }))
    }

    /// The kind of the step.
    pub fn kind(&self) -> AccessKind {
        AccessKind::from_code(self.0.kind).unwrap_or(AccessKind::Attr)
    }

    /// The key of the step.
    pub fn key(&self) -> &Any {
        &self.0.key
    }

    /// The step's object.
    pub fn as_object(&self) -> &ObjectRef<AccessStepObj> {
        &self.0
    }

    /// Whether both steps select the same thing (same kind and equal key).
    pub fn same_step(&self, other: &AccessStep) -> bool {
        self.0.kind == other.0.kind
            && crate::containers::hash::any_equal(self.0.key.as_raw(), other.0.key.as_raw())
    }

    fn write(&self, out: &mut String) -> Result<()> {
        let key = || crate::extra::repr::repr(self.0.key.as_view());
        match self.kind() {
            AccessKind::Attr => {
                let name = self.0.key.cast::<std::string::String>()?;
                let _ = write!(out, ".{name}");
            }
            AccessKind::ArrayItem | AccessKind::MapItem => {
                let _ = write!(out, "[{}]", key()?);
            }
            AccessKind::AttrMissing | AccessKind::ArrayItemMissing | AccessKind::MapItemMissing => {
                let _ = write!(out, "[<missing:{}>]", key()?);
            }
        }
        Ok(())
    }
}

impl AccessPath {
    /// The empty path.
    pub fn root() -> AccessPath {
        AccessPath(ObjectRef::new(AccessPathObj {
            base: Object::header(),
            parent: None,
            step: None,
            depth: 0,
        }))
    }

    /// This path extended by `step`.
    pub fn extend(&self, step: AccessStep) -> AccessPath {
        AccessPath(ObjectRef::new(AccessPathObj {
            base: Object::header(),
            parent: Some(self.0.clone()),
            step: Some(step.0),
            depth: self.0.depth + 1,
        }))
    }

    /// This path extended by field `name`.
    pub fn attr(&self, name: &str) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::Attr, name))
    }

    /// This path extended by a field `name` this side lacks.
    pub fn attr_missing(&self, name: &str) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::AttrMissing, name))
    }

    /// This path extended by item `index` of a sequence.
    pub fn array_item(&self, index: i64) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::ArrayItem, index))
    }

    /// This path extended by an item `index` this sequence lacks.
    pub fn array_item_missing(&self, index: i64) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::ArrayItemMissing, index))
    }

    /// This path extended by the item of `key` in a mapping.
    pub fn map_item(&self, key: impl Into<Any>) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::MapItem, key))
    }

    /// This path extended by a `key` this mapping lacks.
    pub fn map_item_missing(&self, key: impl Into<Any>) -> AccessPath {
        self.extend(AccessStep::new(AccessKind::MapItemMissing, key))
    }

    /// The path without its last step (`None` at the root).
    pub fn parent(&self) -> Option<AccessPath> {
        self.0.parent.clone().map(AccessPath)
    }

    /// The last step (`None` at the root).
    pub fn step(&self) -> Option<AccessStep> {
        self.0.step.clone().map(AccessStep)
    }

    /// The number of steps.
    pub fn depth(&self) -> usize {
        usize::try_from(self.0.depth).unwrap_or(0)
    }

    /// The steps from the root.
    pub fn to_steps(&self) -> Vec<AccessStep> {
        let mut steps = Vec::with_capacity(self.depth());
        let mut node = Some(self.0.clone());
        while let Some(path) = node {
            if let Some(step) = &path.step {
                steps.push(AccessStep(step.clone()));
            }
            node = path.parent.clone();
        }
        steps.reverse();
        steps
    }

    /// Whether this path's steps begin `other`'s (every path is a prefix of itself).
    pub fn is_prefix_of(&self, other: &AccessPath) -> bool {
        let (depth, other_depth) = (self.depth(), other.depth());
        if depth > other_depth {
            return false;
        }
        let mut other = other.clone();
        for _ in depth..other_depth {
            match other.parent() {
                Some(parent) => other = parent,
                None => return false,
            }
        }
        self.path_equal(&other)
    }

    /// Whether both paths have the same steps.
    pub fn path_equal(&self, other: &AccessPath) -> bool {
        if self.depth() != other.depth() {
            return false;
        }
        let (mut a, mut b) = (self.clone(), other.clone());
        loop {
            if a.0.ptr_eq(&b.0) {
                return true;
            }
            match (a.step(), b.step()) {
                (Some(x), Some(y)) if x.same_step(&y) => {}
                (None, None) => return true,
                _ => return false,
            }
            match (a.parent(), b.parent()) {
                (Some(x), Some(y)) => (a, b) = (x, y),
                (None, None) => return true,
                _ => return false,
            }
        }
    }

    /// The path's object.
    pub fn as_object(&self) -> &ObjectRef<AccessPathObj> {
        &self.0
    }

    /// The text of the path, `<root>` followed by its steps (`.f`, `[2]`, `["k"]`,
    /// `[<missing:3>]`).
    pub fn to_text(&self) -> Result<String> {
        let mut out = String::from("<root>");
        for step in self.to_steps() {
            step.write(&mut out)?;
        }
        Ok(out)
    }
}

impl From<AccessPath> for Any {
    fn from(path: AccessPath) -> Any {
        Any::from(path.0)
    }
}

impl crate::any::TryFromAnyView for AccessPath {
    const TYPE_NAME: &'static str = "ffi.reflection.AccessPath";
    fn try_from_view(view: &AnyView<'_>) -> Option<Self> {
        ObjectRef::<AccessPathObj>::try_from_view(view).map(AccessPath)
    }
}

impl std::fmt::Debug for AccessPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            &self
                .to_text()
                .unwrap_or_else(|e| format!("<bad path: {e}>")),
        )
    }
}

/// Registers the methods and repr of the path types (as apache-tvm-ffi names them).
pub(crate) fn register() -> Result<()> {
    let index = AccessPathObj::type_index();
    let _ = AccessStepObj::type_index();
    type P = AccessPath;
    let methods: Vec<(&str, Function, bool)> = vec![
        ("_root", Function::from_typed("_root", P::root), true),
        (
            "_extend",
            Function::from_typed("_extend", |p: P, s: ObjectRef<AccessStepObj>| {
                p.extend(AccessStep(s))
            }),
            false,
        ),
        (
            "_attr",
            Function::from_typed("_attr", |p: P, n: std::string::String| p.attr(&n)),
            false,
        ),
        (
            "_attr_missing",
            Function::from_typed("_attr_missing", |p: P, n: std::string::String| {
                p.attr_missing(&n)
            }),
            false,
        ),
        (
            "_array_item",
            Function::from_typed("_array_item", |p: P, i: i64| p.array_item(i)),
            false,
        ),
        (
            "_array_item_missing",
            Function::from_typed("_array_item_missing", |p: P, i: i64| {
                p.array_item_missing(i)
            }),
            false,
        ),
        (
            "_map_item",
            Function::from_typed("_map_item", |p: P, k: Any| p.map_item(k)),
            false,
        ),
        (
            "_map_item_missing",
            Function::from_typed("_map_item_missing", |p: P, k: Any| p.map_item_missing(k)),
            false,
        ),
        (
            "_is_prefix_of",
            Function::from_typed("_is_prefix_of", |p: P, q: P| p.is_prefix_of(&q)),
            false,
        ),
        (
            "_to_steps",
            Function::from_typed("_to_steps", |p: P| {
                p.to_steps()
                    .into_iter()
                    .map(|s| Any::from(s.0))
                    .collect::<Array>()
            }),
            false,
        ),
        (
            "_path_equal",
            Function::from_typed("_path_equal", |p: P, q: P| p.path_equal(&q)),
            false,
        ),
    ];
    for (name, function, is_static) in methods {
        reflection::register_method(index, name, &function, is_static)?;
    }
    let repr = Function::from_typed("__ffi_repr__", |p: P, _fn_repr: Any| p.to_text());
    reflection::register_type_attr(index, "__ffi_repr__", &Any::from(repr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_compare_and_prefix() {
        let root = AccessPath::root();
        let p = root.attr("f").array_item(2).map_item("k");
        assert_eq!(p.to_text().unwrap(), r#"<root>.f[2]["k"]"#);
        assert_eq!(p.depth(), 3);
        assert!(root.is_prefix_of(&p));
        assert!(p.is_prefix_of(&p));
        assert!(!p.is_prefix_of(&root));
        assert!(root.attr("f").is_prefix_of(&p));
        assert!(!root.attr("g").is_prefix_of(&p));
        assert!(p.path_equal(&AccessPath::root().attr("f").array_item(2).map_item("k")));
        let missing = root.array_item_missing(3).map_item_missing(1);
        assert_eq!(
            missing.to_text().unwrap(),
            "<root>[<missing:3>][<missing:1>]"
        );
        let steps = p.to_steps();
        assert_eq!(steps[1].kind(), AccessKind::ArrayItem);
        assert_eq!(steps[1].key().cast::<i64>().unwrap(), 2);
    }
}
