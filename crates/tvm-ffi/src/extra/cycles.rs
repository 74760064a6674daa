//! Reference cycles: objects are reference counted with no cycle collector (as in Apache TVM
//! FFI), so a `List` or `Dict` that contains itself, directly or through other containers and
//! reflected object fields, is never freed. [`break_cycles`] finds the cycles reachable from a
//! value (strongly connected components, by Tarjan's algorithm without recursion) and breaks
//! each one, so that its values are freed once the last outside reference goes.

use std::collections::{HashMap, HashSet};

use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::map::MapRead;
use crate::error::Result;
use crate::reflection::{self, FieldRef};
use crate::{Array, Dict, List, Map};

/// Breaks every reference cycle reachable from `root`: each `List` and `Dict` on a cycle is
/// emptied, and on a cycle with neither, the object fields that refer back into the cycle are
/// set to `None`. Values on no cycle are left as they are. Returns how many values it changed
/// (0: nothing reachable from `root` was on a cycle).
///
/// The walk reads each container and object once (time linear in what is reachable); a value
/// another thread changes during the walk may keep a cycle that this call did not see.
pub fn break_cycles(root: AnyView<'_>) -> Result<usize> {
    if root.as_object_ptr().is_none() {
        return Ok(0);
    }
    let mut graph = Graph::default();
    graph.walk(root.to_owned())?;
    let mut changed = 0;
    for component in std::mem::take(&mut graph.cycles) {
        changed += graph.break_component(&component)?;
    }
    Ok(changed)
}

/// The strong references `value` holds to objects: a container's items (a map's keys and
/// values), an object's readable reflected fields.
fn children(value: &Any) -> Result<Vec<Any>> {
    let mut out = Vec::new();
    let mut keep = |v: Any| {
        if v.is_object() {
            out.push(v);
        }
    };
    match value.type_index() {
        abi::kTVMFFIStr
        | abi::kTVMFFIBytes
        | abi::kTVMFFIShape
        | abi::kTVMFFITensor
        | abi::kTVMFFIBigInt
        | abi::kTVMFFIFunction => {}
        abi::kTVMFFIArray => value.cast::<Array>()?.iter().cloned().for_each(keep),
        abi::kTVMFFIList => value.cast::<List>()?.to_vec().into_iter().for_each(keep),
        abi::kTVMFFIMap => {
            for (k, v) in value.cast::<Map>()?.iter() {
                keep(k);
                keep(v);
            }
        }
        abi::kTVMFFIDict => {
            for (k, v) in value.cast::<Dict>()?.iter() {
                keep(k);
                keep(v);
            }
        }
        t => {
            for field in reflection::fields_of(t).filter(FieldRef::is_readable) {
                keep(field.get(value.as_view())?);
            }
        }
    }
    Ok(out)
}

/// One object on the walk's path: its node and the children still to visit.
struct Frame {
    node: usize,
    children: std::vec::IntoIter<Any>,
}

/// The state of Tarjan's algorithm over the objects reachable from the root.
#[derive(Default)]
struct Graph {
    /// The objects, by node number (the order of discovery).
    values: Vec<Any>,
    /// Node numbers by object address.
    ids: HashMap<usize, usize>,
    /// The smallest node number reachable from each node through nodes still on `stack`.
    low: Vec<usize>,
    /// Whether each node has an edge to itself.
    self_edge: Vec<bool>,
    /// Whether each node is on `stack` (its component is not finished).
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    /// The finished components that are cycles: more than one node, or one with an edge to
    /// itself.
    cycles: Vec<Vec<usize>>,
}

impl Graph {
    fn address(value: &Any) -> usize {
        value.as_object_ptr().map_or(0, |p| p as usize)
    }

    fn discover(&mut self, value: Any, path: &mut Vec<Frame>) -> Result<()> {
        let node = self.values.len();
        let children = children(&value)?;
        self.ids.insert(Self::address(&value), node);
        self.values.push(value);
        self.low.push(node);
        self.self_edge.push(false);
        self.on_stack.push(true);
        self.stack.push(node);
        path.push(Frame {
            node,
            children: children.into_iter(),
        });
        Ok(())
    }

    fn walk(&mut self, root: Any) -> Result<()> {
        let mut path = Vec::new();
        self.discover(root, &mut path)?;
        while let Some(frame) = path.last_mut() {
            let node = frame.node;
            if let Some(child) = frame.children.next() {
                match self.ids.get(&Self::address(&child)) {
                    None => self.discover(child, &mut path)?,
                    Some(&seen) => {
                        self.self_edge[node] |= seen == node;
                        if self.on_stack[seen] {
                            self.low[node] = self.low[node].min(seen);
                        }
                    }
                }
                continue;
            }
            path.pop();
            if let Some(parent) = path.last() {
                self.low[parent.node] = self.low[parent.node].min(self.low[node]);
            }
            if self.low[node] == node {
                self.finish_component(node);
            }
        }
        Ok(())
    }

    /// Pops the component whose first node is `first` off the stack; keeps it if a cycle.
    fn finish_component(&mut self, first: usize) {
        let at = self
            .stack
            .iter()
            .rposition(|&n| n == first)
            .expect("a component's first node is on the stack");
        let component = self.stack.split_off(at);
        for &n in &component {
            self.on_stack[n] = false;
        }
        if component.len() > 1 || self.self_edge[first] {
            self.cycles.push(component);
        }
    }

    /// Breaks one cycle: empties its lists and dicts, or else resets the fields of its objects
    /// that refer into it. Returns how many values changed.
    fn break_component(&self, component: &[usize]) -> Result<usize> {
        let mut changed = 0;
        for &n in component {
            let value = &self.values[n];
            match value.type_index() {
                abi::kTVMFFIList => value.cast::<List>()?.clear(),
                abi::kTVMFFIDict => value.cast::<Dict>()?.clear(),
                _ => continue,
            }
            changed += 1;
        }
        if changed > 0 {
            return Ok(changed);
        }
        let members: HashSet<usize> = component
            .iter()
            .map(|&n| Self::address(&self.values[n]))
            .collect();
        for &n in component {
            let value = &self.values[n];
            let mut reset = false;
            for field in reflection::fields_of(value.type_index()) {
                if !field.is_readable() || !field.is_settable() {
                    continue;
                }
                let held = field.get(value.as_view())?;
                if held.is_object() && members.contains(&Self::address(&held)) {
                    field.set(value.as_view(), Any::none().as_view())?;
                    reset = true;
                }
            }
            changed += usize::from(reset);
        }
        Ok(changed)
    }
}
