//! Objects: reference counting, weak references, Rust-defined types and reflection.

use tvm_ffi::abi;
use tvm_ffi::{Any, Function, Object, ObjectCore, ObjectRef, define_object, reflection, types};

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
    let value = reflection::fields_of(TestNode::type_index())
        .next()
        .expect("a first field");
    assert_eq!(
        value.get(&Any::from(leaf)).unwrap().cast::<i64>().unwrap(),
        3
    );
}

#[test]
fn fields_walk_the_ancestors_root_first() {
    let leaf = Any::from(ObjectRef::new(TestLeaf {
        base: TestNode {
            base: Object::header(),
            value: 7,
            label: "leaf".into(),
        },
        weight: 0.25,
    }));
    let fields: Vec<_> = reflection::fields_of(TestLeaf::type_index()).collect();
    let names: Vec<_> = fields.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["value", "label", "weight"]);
    let owners: Vec<_> = fields.iter().map(|f| f.owner()).collect();
    let (node, leaf_index) = (TestNode::type_index(), TestLeaf::type_index());
    assert_eq!(owners, [node, node, leaf_index]);
    assert!(fields.iter().all(|f| f.is_readable() && f.offset() >= 24));
    assert_eq!(fields[0].get(&leaf).unwrap().cast::<i64>().unwrap(), 7);
    assert_eq!(
        fields[1].get(&leaf).unwrap().cast::<String>().unwrap(),
        "leaf"
    );
    assert_eq!(fields[2].get(&leaf).unwrap().cast::<f64>().unwrap(), 0.25);
    assert_eq!(
        reflection::ancestors_of(leaf_index).collect::<Vec<_>>(),
        [abi::kTVMFFIObject, node]
    );
    assert_eq!(reflection::ancestors_of(abi::kTVMFFIObject).count(), 0);
    assert_eq!(reflection::fields_of(-12345).count(), 0);
}

#[test]
fn fields_read_only_instances_of_their_type() {
    let weight = reflection::fields_of(TestLeaf::type_index())
        .find(|f| f.name() == "weight")
        .unwrap();
    let err = weight.get(&Any::from(node(1))).unwrap_err();
    assert!(err.is_kind("TypeError"), "{err}");
    assert!(err.message().contains("weight"), "{err}");
    let err = weight.get(&Any::from(1i64)).unwrap_err();
    assert!(err.is_kind("TypeError"), "{err}");
}

#[test]
fn methods_register_on_types() {
    let index = TestNode::type_index();
    let method = Function::from_typed("test.Node.double", |n: ObjectRef<TestNode>| n.value * 2);
    tvm_ffi::reflection::register_method(index, "double", &method, false).unwrap();
    let m = reflection::methods_of(TestLeaf::type_index())
        .find(|m| m.name() == "double")
        .expect("inherited by the leaf");
    assert_eq!(m.owner(), index);
    assert!(!m.is_static());
    let f = m.function().unwrap();
    assert_eq!(f.call((node(21),)).unwrap().cast::<i64>().unwrap(), 42);
}

#[test]
fn methods_carry_their_type_schema() {
    let index = TestNode::type_index();
    reflection::register_typed_method(
        index,
        "scaled",
        |n: ObjectRef<TestNode>, k: i64| -> tvm_ffi::Result<i64> { Ok(n.value * k) },
        false,
    )
    .unwrap();
    let packed = Function::from_packed(|_| Ok(Any::none()));
    reflection::register_method(index, "anything", &packed, true).unwrap();
    let metadata = |name: &str| {
        reflection::methods_of(index)
            .find(|m| m.name() == name)
            .unwrap()
            .metadata()
    };
    assert_eq!(
        metadata("scaled"),
        r#"{"type_schema":"{\"type\":\"ffi.Function\",\"args\":[{\"type\":\"int\"},{\"type\":\"test.Node\"},{\"type\":\"int\"}]}"}"#
    );
    assert_eq!(
        metadata("anything"),
        r#"{"type_schema":"{\"type\":\"ffi.Function\"}"}"#
    );
    let scaled = reflection::methods_of(index)
        .find(|m| m.name() == "scaled")
        .unwrap();
    let result = scaled.function().unwrap().call((node(4), 3i64)).unwrap();
    assert_eq!(result.cast::<i64>().unwrap(), 12);
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
