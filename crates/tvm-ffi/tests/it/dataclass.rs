//! Object types laid out at run time (`tvm_ffi::extra::dataclass`): field storage, the generated
//! constructor, allocation, shallow copy and creation from packed arguments.

use std::ffi::{c_int, c_void};

use tvm_ffi::abi::{self, TVMFFIAny, TVMFFIByteArray, TVMFFIFieldInfo};
use tvm_ffi::extra::dataclass::{self, FieldStorage};
use tvm_ffi::reflection::fields_of;
use tvm_ffi::{Any, AnyView, Array, ErrorKind, Function, types};

/// A converter that stores every value as given.
unsafe extern "C" fn identity(
    _: *mut c_void,
    value: *const TVMFFIAny,
    out: *mut TVMFFIAny,
) -> c_int {
    // SAFETY: the setter passes a valid value and a writable slot that owns nothing.
    unsafe { out.write(AnyView::from_raw(*value).to_owned().into_raw()) };
    0
}

pub(crate) struct FieldSpec {
    name: &'static str,
    static_index: i32,
    size: i64,
    offset: i64,
    pub(crate) flags: i64,
    default: Any,
}

/// Registers `key` with the given fields as a run-time laid-out type of `total_size` bytes.
pub(crate) fn define(key: &str, fields: &[FieldSpec], total_size: i64) -> i32 {
    let index = types::register_type(key, abi::kTVMFFIObject, 0, true).unwrap();
    for spec in fields {
        // A 16-byte field holds a value whatever its static type (strings may be inline).
        let storage = if spec.size == 16 {
            FieldStorage::Any
        } else {
            FieldStorage::of(spec.static_index).unwrap()
        };
        // SAFETY: `identity` accepts any converter pointer.
        let setter = unsafe { dataclass::field_setter(storage, std::ptr::null_mut(), identity) };
        let setter = Any::from(setter);
        let info = TVMFFIFieldInfo {
            name: TVMFFIByteArray::from_text(spec.name),
            doc: TVMFFIByteArray::EMPTY,
            metadata: TVMFFIByteArray::EMPTY,
            flags: spec.flags
                | abi::kTVMFFIFieldFlagBitMaskWritable
                | abi::kTVMFFIFieldFlagBitMaskSetterIsFunctionObj,
            size: spec.size,
            alignment: 8,
            offset: spec.offset,
            getter: dataclass::field_getter(storage),
            setter: setter.as_object_ptr().unwrap().cast(),
            default_value_or_factory: *spec.default.as_raw(),
            field_static_type_index: spec.static_index,
        };
        // SAFETY: a valid record for the call; the runtime copies it and retains the setter.
        assert_eq!(unsafe { abi::TVMFFITypeRegisterField(index, &info) }, 0);
    }
    dataclass::register_layout_type(index, total_size).unwrap();
    index
}

pub(crate) fn field(name: &'static str, static_index: i32, size: i64, offset: i64) -> FieldSpec {
    FieldSpec {
        name,
        static_index,
        size,
        offset,
        flags: 0,
        default: Any::none(),
    }
}

/// `test.dataclass.Point`: x: int (required), y: float = 2.5, tag: Any (keyword-only, = None),
/// child: object (= None).
fn point_type() -> i32 {
    static INDEX: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *INDEX.get_or_init(|| {
        let mut y = field("y", abi::kTVMFFIFloat, 8, 32);
        y.flags = abi::kTVMFFIFieldFlagBitMaskHasDefault;
        y.default = Any::from(2.5);
        let mut tag = field("tag", abi::kTVMFFIAny, 16, 40);
        tag.flags = abi::kTVMFFIFieldFlagBitMaskHasDefault | abi::kTVMFFIFieldFlagBitMaskKwOnly;
        let mut child = field("child", abi::kTVMFFIObject, 8, 56);
        child.flags = abi::kTVMFFIFieldFlagBitMaskHasDefault;
        define(
            "test.dataclass.Point",
            &[field("x", abi::kTVMFFIInt, 8, 24), y, tag, child],
            64,
        )
    })
}

fn init() -> Function {
    dataclass::type_attr(point_type(), "__ffi_init__")
        .unwrap()
        .cast()
        .unwrap()
}

fn kwargs() -> Any {
    Function::get_global("ffi.GetKwargsObject")
        .unwrap()
        .call(())
        .unwrap()
}

fn get(obj: &Any, name: &str) -> Any {
    let field = fields_of(obj.type_index())
        .find(|f| f.name() == name)
        .unwrap();
    field.get(obj.as_view()).unwrap()
}

#[test]
fn generated_init_binds_positional_arguments_and_defaults() {
    let obj = init().call((7i64,)).unwrap();
    assert_eq!(obj.type_index(), point_type());
    assert_eq!(get(&obj, "x").cast::<i64>().unwrap(), 7);
    assert_eq!(get(&obj, "y").cast::<f64>().unwrap(), 2.5);
    assert!(get(&obj, "tag").is_none());
    assert!(get(&obj, "child").is_none());
}

#[test]
fn generated_init_binds_keyword_arguments() {
    let k = kwargs();
    let args = [
        Any::from(1i64),
        k.clone(),
        Any::from("tag"),
        Any::from("hello, world"),
        Any::from("y"),
        Any::from(4.0),
    ];
    let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
    let obj = init().call_packed(&views).unwrap();
    assert_eq!(get(&obj, "x").cast::<i64>().unwrap(), 1);
    assert_eq!(get(&obj, "y").cast::<f64>().unwrap(), 4.0);
    assert_eq!(get(&obj, "tag").cast::<String>().unwrap(), "hello, world");
}

#[test]
fn generated_init_rejects_bad_calls_naming_the_problem() {
    let k = kwargs();
    let missing = init().call(()).unwrap_err();
    assert!(missing.is_kind(ErrorKind::TypeError));
    assert!(
        missing.message().contains("missing required argument: 'x'"),
        "{}",
        missing.message()
    );

    let too_many = init().call((1i64, 2.0, (), 3i64)).unwrap_err();
    assert!(
        too_many
            .message()
            .contains("takes at most 3 positional argument(s), but 4 were given"),
        "{}",
        too_many.message()
    );

    let unknown = init().call((1i64, k.clone(), "z", 1i64)).unwrap_err();
    assert!(
        unknown
            .message()
            .contains("unexpected keyword argument 'z'")
    );

    let twice = init().call((1i64, k.clone(), "x", 2i64)).unwrap_err();
    assert!(twice.message().contains("multiple values for argument 'x'"));

    let odd = init().call((1i64, k, "y")).unwrap_err();
    assert!(odd.message().contains("even number"));

    let wrong_type = init().call(("not an int",)).unwrap_err();
    assert!(wrong_type.is_kind(ErrorKind::TypeError));
    assert!(
        wrong_type
            .message()
            .contains("test.dataclass.Point.__ffi_init__() field 'x':"),
        "{}",
        wrong_type.message()
    );
}

#[test]
fn object_fields_are_released_with_the_object_and_shared_by_shallow_copy() {
    let child = Array::from_vec(vec![Any::from(1i64)]);
    let base = child.as_object().use_count();
    let obj = init().call((1i64, 2.0, child.clone())).unwrap();
    assert_eq!(child.as_object().use_count(), base + 1);

    let copy_fn: Function = dataclass::type_attr(point_type(), "__ffi_shallow_copy__")
        .unwrap()
        .cast()
        .unwrap();
    let copy = copy_fn.call((obj.clone(),)).unwrap();
    assert_ne!(copy.as_object_ptr(), obj.as_object_ptr());
    assert_eq!(child.as_object().use_count(), base + 2);
    assert_eq!(get(&copy, "x").cast::<i64>().unwrap(), 1);
    drop(obj);
    drop(copy);
    assert_eq!(child.as_object().use_count(), base);
}

#[test]
fn string_fields_of_sixteen_bytes_are_values_not_pointers() {
    // A field typed `ffi.String` and stored in 16 bytes (as C++ parents and the core's own
    // types record strings): inline small strings and string objects are both released and
    // copied as values.
    let index = define(
        "test.dataclass.Named",
        &[field("name", abi::kTVMFFIStr, 16, 24)],
        40,
    );
    let init: Function = dataclass::type_attr(index, "__ffi_init__")
        .unwrap()
        .cast()
        .unwrap();
    let copy_fn: Function = dataclass::type_attr(index, "__ffi_shallow_copy__")
        .unwrap()
        .cast()
        .unwrap();
    for name in ["abc", "a string too long to be stored inline"] {
        let obj = init.call((name,)).unwrap();
        let copy = copy_fn.call((obj.clone(),)).unwrap();
        drop(obj);
        assert_eq!(get(&copy, "name").cast::<String>().unwrap(), name);
        drop(copy);
    }
    let long = tvm_ffi::String::new("a string object shared by the fields of two objects");
    let obj = init.call((long.clone(),)).unwrap();
    let copy = copy_fn.call((obj.clone(),)).unwrap();
    drop((obj, copy));
    assert_eq!(
        Any::from(long).cast::<String>().unwrap(),
        "a string object shared by the fields of two objects"
    );
}

#[test]
fn make_object_from_packed_args_sets_named_fields() {
    let make = Function::get_global("ffi.MakeObjectFromPackedArgs").unwrap();
    let obj = make
        .call(("test.dataclass.Point", "x", 5i64, "tag", 9i64))
        .unwrap();
    assert_eq!(get(&obj, "x").cast::<i64>().unwrap(), 5);
    assert_eq!(get(&obj, "y").cast::<f64>().unwrap(), 2.5);
    assert_eq!(get(&obj, "tag").cast::<i64>().unwrap(), 9);
    let by_index = make.call((i64::from(point_type()), "x", 6i64)).unwrap();
    assert_eq!(get(&by_index, "x").cast::<i64>().unwrap(), 6);

    let missing = make.call(("test.dataclass.Point",)).unwrap_err();
    assert!(
        missing.message().contains("Required field `x` not set"),
        "{}",
        missing.message()
    );
    let unknown = make
        .call(("test.dataclass.Point", "x", 1i64, "w", 1i64))
        .unwrap_err();
    assert!(unknown.message().contains("does not have field `w`"));
    let no_type = make.call(("test.dataclass.NoSuchType",)).unwrap_err();
    assert!(no_type.message().contains("NoSuchType"));
}

#[test]
fn bad_registrations_are_errors() {
    let getter = Function::get_global("ffi.MakeFieldGetter").unwrap();
    assert!(
        getter
            .call((abi::kTVMFFIInt,))
            .unwrap()
            .cast::<i64>()
            .unwrap()
            != 0
    );
    let err = getter.call((abi::kTVMFFIRawStr,)).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError));
    assert!(err.message().contains('8'), "{}", err.message());

    let setter = Function::get_global("ffi.MakeFieldSetter").unwrap();
    let err = setter.call((abi::kTVMFFIInt, 0i64, 0i64)).unwrap_err();
    assert!(err.message().contains("NULL"));

    let register = Function::get_global("ffi._PyClassRegisterTypeAttrColumns").unwrap();
    let small = types::register_type("test.dataclass.Small", abi::kTVMFFIObject, 0, true).unwrap();
    let err = register.call((small, 8i64)).unwrap_err();
    assert!(err.is_kind(ErrorKind::ValueError));
    let err = register.call((9999i64, 24i64)).unwrap_err();
    assert!(err.message().contains("9999"));

    let err = dataclass::create_empty(small).unwrap_err();
    assert!(
        err.message()
            .contains("does not support reflection creation")
    );
}

#[test]
fn an_empty_object_comes_from_new() {
    let obj = dataclass::create_empty(point_type()).unwrap();
    let obj: Any = obj.into();
    assert_eq!(get(&obj, "x").cast::<i64>().unwrap(), 0);
    assert!(get(&obj, "child").is_none());
}
