//! Enum types defined in Rust: entries, lookup by index and name, repr, serialization to the
//! same singleton, deep copy and structural identity.

use tvm_ffi::extra::deep_copy::deep_copy;
use tvm_ffi::extra::enums::{EnumObj, EnumState, IntEnumObj};
use tvm_ffi::extra::repr::repr;
use tvm_ffi::extra::serialization::{from_json_graph_string, to_json_graph_string};
use tvm_ffi::extra::structural::{structural_equal, structural_hash};
use tvm_ffi::{Any, Array, Object, ObjectCore, ObjectRef, define_object};

define_object! {
    /// A test enum.
    pub struct Color : "test.enums.Color" extends IntEnumObj {}
}

fn colors() -> (EnumState, Any, Any) {
    // Tests run on several threads: the entries are added once, before any test reads them.
    static ADDED: std::sync::Once = std::sync::Once::new();
    let state = EnumState::of_or_create(Color::type_index()).unwrap();
    ADDED.call_once(|| {
        for (name, value) in [("Red", 10), ("Green", 20)] {
            let entry = ObjectRef::new(Color {
                base: IntEnumObj {
                    base: EnumObj {
                        base: Object::header(),
                        _int_index: value,
                        _str_index: name.into(),
                    },
                },
            });
            state.add(entry.into()).unwrap();
        }
    });
    let entries = state.entries();
    (state, entries[0].clone(), entries[1].clone())
}

#[test]
fn entries_look_up_print_and_serialize_as_singletons() {
    let (state, red, green) = colors();
    let by_name = state
        .get("test.enums.Color", Any::from("Green").as_view())
        .unwrap();
    assert_eq!(by_name.as_object_ptr(), green.as_object_ptr());
    let by_index = state
        .get("test.enums.Color", Any::from(10).as_view())
        .unwrap();
    assert_eq!(by_index.as_object_ptr(), red.as_object_ptr());
    let err = state
        .get("test.enums.Color", Any::from(7).as_view())
        .unwrap_err();
    assert_eq!(err.kind(), "KeyError");
    assert!(err.message().contains("no entry 7"), "{err}");
    assert_eq!(repr(red.as_view()).unwrap(), "test.enums.Color.Red");

    let text = to_json_graph_string(
        Any::from(Array::from_vec(vec![red.clone(), green.clone()])).as_view(),
        Any::none().as_view(),
    )
    .unwrap();
    // Int enums serialize as their int index.
    assert!(
        text.contains(r#"{"type":"test.enums.Color","data":10}"#),
        "{text}"
    );
    let back = from_json_graph_string(&text)
        .unwrap()
        .cast::<Array>()
        .unwrap();
    assert_eq!(back.as_slice()[1].as_object_ptr(), green.as_object_ptr());
    let by_name = text.replace("\"data\":10", "\"data\":\"Red\"");
    let back = from_json_graph_string(&by_name)
        .unwrap()
        .cast::<Array>()
        .unwrap();
    assert_eq!(back.as_slice()[0].as_object_ptr(), red.as_object_ptr());
    for bad in ["\"Blue\"", "7", "1.5"] {
        let bad = text.replace("10", bad);
        assert!(from_json_graph_string(&bad).is_err(), "{bad}");
    }

    assert_eq!(
        deep_copy(red.as_view()).unwrap().as_object_ptr(),
        red.as_object_ptr()
    );
    assert!(!structural_equal(red.as_view(), green.as_view(), false, false).unwrap());
    assert_ne!(
        structural_hash(red.as_view(), false, false).unwrap(),
        structural_hash(green.as_view(), false, false).unwrap()
    );
}

#[test]
fn entries_are_added_once_named_and_carry_attributes() {
    let (state, red, green) = colors();
    let duplicate = ObjectRef::new(Color {
        base: IntEnumObj {
            base: EnumObj {
                base: Object::header(),
                _int_index: 10,
                _str_index: "Red".into(),
            },
        },
    });
    let err = state.add(duplicate.into()).unwrap_err();
    assert_eq!(err.kind(), "ValueError", "{err}");
    assert!(err.message().contains("already defined"), "{err}");
    let err = state.add(Any::from(5i64)).unwrap_err();
    assert_eq!(err.kind(), "TypeError", "{err}");
    assert_eq!(
        tvm_ffi::extra::enums::entry_name(red.as_view()).as_deref(),
        Some("Red")
    );
    assert!(tvm_ffi::extra::enums::entry_name(Any::from(1i64).as_view()).is_none());
    let found = tvm_ffi::extra::enums::entry_by_name("test.enums.Color", "Green").unwrap();
    assert_eq!(found.as_object_ptr(), green.as_object_ptr());
    assert!(tvm_ffi::extra::enums::entry_by_name("test.enums.Color", "Blue").is_err());
    state
        .set_attr("hex", red.clone(), Any::from("#f00"))
        .unwrap();
    state
        .set_attr("hex", green.clone(), Any::from("#0f0"))
        .unwrap();
    assert_eq!(state.entries().len(), 2);
}

#[test]
fn enum_values_are_read_only_aliases_of_the_indices() {
    use tvm_ffi::abi;
    let (_, _, green) = colors();
    let value = |type_index: i32| {
        tvm_ffi::reflection::fields_of(type_index)
            .find(|f| f.name() == "value")
            .unwrap()
    };
    let int_value = value(Color::type_index());
    assert_eq!(
        int_value
            .get(green.as_view())
            .unwrap()
            .cast::<i64>()
            .unwrap(),
        20
    );
    let flags = int_value.flags();
    assert_ne!(flags & abi::kTVMFFIFieldFlagBitMaskInitOff, 0);
    assert_ne!(flags & abi::kTVMFFIFieldFlagBitMaskSEqHashIgnore, 0);
    assert_eq!(flags & abi::kTVMFFIFieldFlagBitMaskWritable, 0);
    // No storage of their own: the layouts are the base entry's.
    assert_eq!(size_of::<IntEnumObj>(), size_of::<EnumObj>());
    assert_eq!(
        size_of::<tvm_ffi::extra::enums::StrEnumObj>(),
        size_of::<EnumObj>()
    );
    let str_value = value(tvm_ffi::extra::enums::StrEnumObj::type_index());
    assert_eq!(
        str_value.offset(),
        std::mem::offset_of!(EnumObj, _str_index)
    );
}

#[test]
fn fields_declared_in_rust_carry_their_type_schema() {
    let field = |type_index: i32, name: &str| {
        tvm_ffi::reflection::fields_of(type_index)
            .find(|f| f.name() == name)
            .unwrap()
    };
    assert_eq!(
        field(EnumObj::type_index(), "_int_index").metadata(),
        r#"{"type_schema":"{\"type\":\"int\"}"}"#
    );
    let value = field(tvm_ffi::extra::enums::StrEnumObj::type_index(), "value");
    assert_eq!(
        value.metadata(),
        r#"{"type_schema":"{\"type\":\"ffi.String\"}"}"#
    );
    assert_eq!(value.doc(), "Canonical string index.");
}

define_object! {
    /// A type with an optional field.
    pub struct MaybeNamed : "test.enums.MaybeNamed" extends Object {
        pub name: Option<tvm_ffi::String>,
    }
}

#[test]
fn optional_fields_have_an_optional_schema() {
    let field = tvm_ffi::reflection::fields_of(MaybeNamed::type_index())
        .next()
        .unwrap();
    assert_eq!(
        field.metadata(),
        r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.String\"}]}"}"#
    );
}
