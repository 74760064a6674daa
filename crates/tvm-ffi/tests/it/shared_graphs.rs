//! Graphs whose nodes are shared many times (node `i` holding node `i - 1` twice): structural
//! hashing and equality, first mismatches, recursive comparison and repr remember shared nodes,
//! so they take time linear in the distinct nodes, with the results of the unfolded tree.

use std::sync::mpsc;
use std::time::Duration;

use tvm_ffi::extra::recursive_compare::{recursive_eq, recursive_hash};
use tvm_ffi::extra::repr::{REPEAT_LIMIT, repr};
use tvm_ffi::extra::structural::{first_structural_mismatch, structural_equal, structural_hash};
use tvm_ffi::{Any, Array};

fn arr(items: Vec<Any>) -> Any {
    Array::from_vec(items).into()
}

/// Node `n` of a chain whose node 0 is `[leaf]` and node `i` is `[node i-1, node i-1]`.
fn chain(n: usize, leaf: Any) -> Any {
    let mut node = arr(vec![leaf]);
    for _ in 0..n {
        node = arr(vec![node.clone(), node]);
    }
    node
}

/// The same value as `chain(n, leaf)` unfolded into a tree: no array is shared (`leaf` is).
fn unfolded(n: usize, leaf: &Any) -> Any {
    match n {
        0 => arr(vec![leaf.clone()]),
        _ => arr(vec![unfolded(n - 1, leaf), unfolded(n - 1, leaf)]),
    }
}

/// Runs `f` on another thread, failing (rather than hanging) where it does not end in a minute,
/// as a walk of the 2^64 paths of a 64-node chain would not.
fn ends(f: impl FnOnce() + Send + 'static) {
    let (done, wait) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    wait.recv_timeout(Duration::from_secs(60))
        .expect("the walk of a shared graph did not end (or failed)");
}

fn hash(v: &Any, map_free_vars: bool) -> u64 {
    structural_hash(v.as_view(), map_free_vars, false).unwrap()
}

fn equal(a: &Any, b: &Any, map_free_vars: bool) -> bool {
    structural_equal(a.as_view(), b.as_view(), map_free_vars, false).unwrap()
}

#[test]
fn a_64_node_chain_is_hashed_compared_and_printed_at_once() {
    ends(|| {
        let (a, b, c) = (
            chain(64, 1.into()),
            chain(64, 1.into()),
            chain(64, 2.into()),
        );
        assert_eq!(hash(&a, false), hash(&b, false));
        assert_ne!(hash(&a, false), hash(&c, false));
        assert!(equal(&a, &b, false) && !equal(&a, &c, false));
        let (lhs, rhs) = first_structural_mismatch(a.as_view(), c.as_view(), false, false)
            .unwrap()
            .expect("a mismatch");
        let path = format!("<root>{}", "[0]".repeat(65));
        assert_eq!(repr(Any::from(lhs).as_view()).unwrap(), path);
        assert_eq!(repr(Any::from(rhs).as_view()).unwrap(), path);
        assert!(recursive_eq(a.as_view(), b.as_view()).unwrap());
        assert!(!recursive_eq(a.as_view(), c.as_view()).unwrap());
        let rhash = |v: &Any| recursive_hash(v.as_view()).unwrap();
        assert_eq!(rhash(&a), rhash(&b));
        let text = repr(a.as_view()).unwrap();
        assert!(
            text.len() < 64 * (REPEAT_LIMIT + 40),
            "{} bytes",
            text.len()
        );
        assert!(text.ends_with(", <same as <root>[0]>)"), "{text}");
    });
}

#[test]
fn shared_and_unfolded_graphs_hash_and_compare_alike() {
    for n in 0..7 {
        let leaf = Any::from("leaf");
        let (dag, tree) = (chain(n, leaf.clone()), unfolded(n, &leaf));
        assert_eq!(hash(&dag, false), hash(&tree, false), "n = {n}");
        assert!(
            equal(&dag, &tree, false) && equal(&tree, &dag, false),
            "n = {n}"
        );
        assert!(recursive_eq(dag.as_view(), tree.as_view()).unwrap());
        assert_eq!(
            recursive_hash(dag.as_view()).unwrap(),
            recursive_hash(tree.as_view()).unwrap()
        );
        let other = unfolded(n, &Any::from("other"));
        assert!(
            !equal(&dag, &other, false) && !recursive_eq(dag.as_view(), other.as_view()).unwrap()
        );
    }
    // Short shared values print as they always did: again, in full.
    let dag = chain(2, 1.into());
    assert_eq!(repr(dag.as_view()).unwrap(), "(((1,), (1,)), ((1,), (1,)))");
}

#[test]
fn shared_arrays_over_dag_nodes_and_variables_hash_as_unfolded() {
    use crate::structural::dag_binding_type;
    use crate::traversal::{make, var};
    let index = dag_binding_type();
    // The DAG node (and the variable) stay shared in both forms; only the arrays unfold.
    for leaf in [make(index, vec![Any::from(7)]), var("x", Any::none())] {
        for map_free_vars in [false, true] {
            for n in 0..6 {
                let (dag, tree) = (chain(n, leaf.clone()), unfolded(n, &leaf));
                assert_eq!(
                    hash(&dag, map_free_vars),
                    hash(&tree, map_free_vars),
                    "n = {n}"
                );
                assert!(equal(&dag, &tree, map_free_vars), "n = {n}");
            }
        }
        let leaf2 = leaf.clone();
        ends(move || {
            let (a, b) = (chain(64, leaf2.clone()), chain(64, leaf2));
            assert_eq!(hash(&a, true), hash(&b, true));
            assert!(equal(&a, &b, true));
        });
    }
}

#[test]
fn a_variable_defined_after_it_was_hashed_by_address_is_hashed_anew() {
    use crate::traversal::{func_type, make, var};
    // `[s, s, f, s]` with `s = [x]` and `f` defining `x`: `s` hashes `x` by address until `f`
    // defines it, then by its number, so it equals (and hashes as) `[s, s, g, t]` where `g`
    // defines `y` in place of `x` and `t = [y]`.
    let (x, y) = (var("x", Any::none()), var("y", Any::none()));
    let def = |v: &Any| make(func_type(), vec![v.clone(), Any::none(), Any::none()]);
    let s = arr(vec![x.clone()]);
    let t = arr(vec![y.clone()]);
    let lhs = arr(vec![s.clone(), s.clone(), def(&x), s.clone()]);
    let rhs = arr(vec![s.clone(), s, def(&y), t]);
    assert!(equal(&lhs, &rhs, false));
    assert_eq!(hash(&lhs, false), hash(&rhs, false));
}

#[test]
fn a_long_shared_value_prints_again_as_the_path_where_it_was_printed() {
    let big = arr((0..40).map(Any::from).collect());
    let mut map = tvm_ffi::Map::new();
    map.insert("a", arr(vec![big.clone()]));
    map.insert("b", big.clone());
    let text = repr(Any::from(map).as_view()).unwrap();
    assert!(
        text.ends_with(r#", "b": <same as <root>["a"][0]>}"#),
        "{text}"
    );
    assert_eq!(text.matches("39").count(), 1, "{text}");
    let value = arr(vec![crate::structural::node(1, big.clone()), big]);
    let text = repr(value.as_view()).unwrap();
    assert!(text.ends_with(", <same as <root>[0].child>)"), "{text}");
}

#[test]
fn shared_cyclic_lists_compare_and_hash_as_distinct_ones_of_the_same_shape() {
    let cyclic = || {
        let list = tvm_ffi::List::new();
        list.push(1);
        list.push(list.clone());
        list
    };
    let (l, m, n) = (cyclic(), cyclic(), cyclic());
    let shared = arr(vec![l.clone().into(), l.clone().into()]);
    let distinct = arr(vec![m.clone().into(), n.clone().into()]);
    assert!(recursive_eq(shared.as_view(), distinct.as_view()).unwrap());
    assert_eq!(
        recursive_hash(shared.as_view()).unwrap(),
        recursive_hash(distinct.as_view()).unwrap()
    );
    for list in [l, m, n] {
        list.clear(); // reference counting frees no cycle: break it
    }
}
