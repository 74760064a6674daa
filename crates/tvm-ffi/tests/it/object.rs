//! Objects: reference counting, weak references, Rust-defined types and reflection.

use tvm_ffi::abi;
use tvm_ffi::{Any, Function, Object, ObjectCore, ObjectRef, define_object, types};

define_object! {
    /// A test node with two reflected fields.
    pub struct TestNode : "test.Node" extends Object {
        pub value: i64,
        pub label: tvm_ffi::String,
    }
}

define_object! {
    /// A child type of `TestNode`.
    pub struct TestLeaf : "test.Leaf" extends TestNode {
        pub weight: f64,
    }
}

fn node(value: i64) -> ObjectRef<TestNode> {
    ObjectRef::new(TestNode {
        base: Object::header(),
        value,
        label: "node".into(),
    })
}

#[test]
fn counts_start_at_one_and_return_to_zero() {
    let n = node(1);
    assert_eq!(n.use_count(), 1);
    assert_eq!(n.header().weak_count(), 1);
    let m = n.clone();
    assert_eq!(n.use_count(), 2);
    drop(m);
    assert_eq!(n.use_count(), 1);
}

#[test]
fn weak_references_do_not_keep_values() {
    let n = node(5);
    let weak = n.downgrade();
    assert_eq!(weak.upgrade().unwrap().value, 5);
    drop(n);
    assert!(weak.upgrade().is_none());
}

#[test]
fn rust_types_register_key_parent_and_fields() {
    let leaf = ObjectRef::new(TestLeaf {
        base: TestNode {
            base: Object::header(),
            value: 3,
            label: "leaf".into(),
        },
        weight: 0.5,
    });
    assert!(TestLeaf::type_index() >= abi::kTVMFFIDynObjectBegin);
    assert_eq!(
        types::type_key_to_index("test.Leaf").unwrap(),
        TestLeaf::type_index()
    );
    assert!(types::is_instance_of(
        TestLeaf::type_index(),
        TestNode::type_index()
    ));
    assert!(!types::is_instance_of(
        TestNode::type_index(),
        TestLeaf::type_index()
    ));
    let as_node = leaf
        .clone()
        .upcast()
        .downcast::<TestNode>()
        .expect("a leaf is a node");
    assert_eq!(as_node.value, 3);

    let info = types::type_info(TestNode::type_index()).unwrap();
    assert_eq!(info.num_fields, 2);
    // SAFETY: the runtime keeps `num_fields` records.
    let fields = unsafe { std::slice::from_raw_parts(info.fields, 2) };
    let mut out = abi::TVMFFIAny::NONE;
    let field_addr = leaf
        .as_raw()
        .cast::<u8>()
        .wrapping_add(fields[0].offset as usize);
    // SAFETY: the getter reads a live field and writes an owned value.
    let rc = unsafe { (fields[0].getter.unwrap())(field_addr.cast(), &mut out) };
    assert_eq!(rc, 0);
    // SAFETY: the output is owned.
    assert_eq!(unsafe { Any::from_raw(out) }.cast::<i64>().unwrap(), 3);
}

#[test]
fn methods_register_on_types() {
    let index = TestNode::type_index();
    let method = Function::from_typed("test.Node.double", |n: ObjectRef<TestNode>| n.value * 2);
    tvm_ffi::reflection::register_method(index, "double", &method, false).unwrap();
    let info = types::type_info(index).unwrap();
    assert!(info.num_methods >= 1);
    // SAFETY: the runtime keeps `num_methods` records.
    let methods = unsafe { std::slice::from_raw_parts(info.methods, info.num_methods as usize) };
    let m = methods.last().unwrap();
    // SAFETY: a registered method is a function value owned by the table.
    let f = unsafe { tvm_ffi::AnyView::from_raw(m.method) }
        .cast::<Function>()
        .unwrap();
    assert_eq!(f.call((node(21),)).unwrap().cast::<i64>().unwrap(), 42);
}

#[test]
fn downcast_checks_the_runtime_type() {
    let f = Any::from(Function::from_packed(|_| Ok(Any::none())));
    assert!(f.try_as::<ObjectRef<TestNode>>().is_none());
    let err = f.cast::<ObjectRef<TestNode>>().unwrap_err();
    assert!(
        err.message().contains("test.Node") && err.message().contains("ffi.Function"),
        "{err}"
    );
}
