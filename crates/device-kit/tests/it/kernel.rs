//! Kernel metadata, the launch convention and the binary container that GPU backends share.

use device_kit::kernel::{
    ArgExtraTag, ArgKind, BinaryReader, BinaryWriter, FunctionInfo, LaunchConfig,
    function_map_from_json, read_function_map, write_function_map,
};
use tvm_ffi::{Any, AnyView, DataType};

fn tags(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn views(values: &[Any]) -> Vec<AnyView<'_>> {
    values.iter().map(AnyView::from).collect()
}

const META: &str = r#"{
  "tvm_version": "0.27",
  "func_info": {
    "add_one": {"name": "add_one", "arg_types": ["handle", "handle", "int32"],
                "launch_param_tags": ["blockIdx.x", "threadIdx.x"]},
    "legacy": {"arg_types": ["float32"], "thread_axis_tags": ["blockIdx.y"],
               "arg_extra_tags": [1]}
  }
}"#;

#[test]
fn metadata_files_give_each_kernel_its_types_and_tags() {
    let map = function_map_from_json(META).unwrap();
    let add_one = &map["add_one"];
    assert_eq!(
        add_one.arg_types,
        vec![DataType::handle(), DataType::handle(), DataType::int(32)]
    );
    assert_eq!(
        add_one.launch_param_tags,
        tags(&["blockIdx.x", "threadIdx.x"])
    );
    assert!(add_one.arg_extra_tags.is_empty());
    let legacy = &map["legacy"];
    assert_eq!(legacy.name, "legacy");
    assert_eq!(legacy.launch_param_tags, tags(&["blockIdx.y"]));
    assert_eq!(legacy.arg_extra_tags, vec![ArgExtraTag::TensorMap]);
}

#[test]
fn bad_metadata_is_refused_naming_the_kernel_and_value() {
    let refused = |text: &str| function_map_from_json(text).unwrap_err();
    let err = refused("not json");
    assert!(err.message().contains("not JSON"), "{err}");
    let err = refused(r#"{"kernels": {}}"#);
    assert!(err.message().contains("func_info"), "{err}");
    let cases = [
        (r#"{"k": 3}"#, "metadata is not an object"),
        (
            r#"{"k": {"arg_types": ["float7"]}}"#,
            "bad argument type \"float7\"",
        ),
        (r#"{"k": {"arg_types": [1]}}"#, "arg_types holds 1"),
        (
            r#"{"k": {"arg_types": "int32"}}"#,
            "must be a list of strings",
        ),
        (r#"{"k": {"name": "other"}}"#, "names it `other`"),
        (
            r#"{"k": {"arg_types": ["int32"], "arg_extra_tags": [7]}}"#,
            "holds 7",
        ),
        (
            r#"{"k": {"arg_types": ["int32"], "arg_extra_tags": 0}}"#,
            "must be a list",
        ),
        (
            r#"{"k": {"arg_types": ["int32"], "arg_extra_tags": [0, 0]}}"#,
            "2 arg_extra_tags for 1",
        ),
    ];
    for (kernel, expected) in cases {
        let err = refused(&format!(r#"{{"func_info": {kernel}}}"#));
        assert_eq!(err.kind(), "ValueError");
        assert!(err.message().contains("kernel `k`"), "{err}");
        assert!(err.message().contains(expected), "{expected}: {err}");
    }
}

#[test]
fn the_binary_form_round_trips_and_refuses_damage() {
    let map = function_map_from_json(META).unwrap();
    let mut writer = BinaryWriter::new();
    writer.string("vulkan");
    write_function_map(&mut writer, &map);
    writer.byte_string(&[1, 2, 3]);
    writer.u32(7);
    let bytes = writer.into_bytes();

    let mut reader = BinaryReader::new(&bytes, "test module");
    assert_eq!(reader.string().unwrap(), "vulkan");
    assert_eq!(read_function_map(&mut reader).unwrap(), map);
    assert_eq!(reader.byte_string().unwrap(), &[1, 2, 3]);
    assert_eq!(reader.u32().unwrap(), 7);
    reader.finish().unwrap();

    for cut in [3, 20, bytes.len() - 1] {
        let mut reader = BinaryReader::new(&bytes[..cut], "test module");
        let err = (|| {
            reader.string()?;
            read_function_map(&mut reader)?;
            reader.byte_string()?;
            reader.u32()
        })()
        .unwrap_err();
        assert!(
            err.message().starts_with("malformed test module at byte"),
            "{err}"
        );
    }
    let mut huge = BinaryWriter::new();
    huge.u64(u64::MAX);
    let huge = huge.into_bytes();
    let err = BinaryReader::new(&huge, "m").strings().unwrap_err();
    assert!(err.message().contains("does not fit"), "{err}");
    let mut trailing = BinaryReader::new(&[0, 0, 0, 0], "m");
    trailing.u32().unwrap();
    trailing.finish().unwrap();
    let err = BinaryReader::new(&[1], "m").finish().unwrap_err();
    assert!(err.message().contains("1 bytes follow the end"), "{err}");
    let mut bad_text = BinaryWriter::new();
    bad_text.byte_string(&[0xff, 0xfe]);
    let bad_text = bad_text.into_bytes();
    let err = BinaryReader::new(&bad_text, "m").string().unwrap_err();
    assert!(err.message().contains("not UTF-8"), "{err}");
    let mut bad_tag = BinaryWriter::new();
    FunctionInfo {
        name: "k".into(),
        arg_types: vec![DataType::int(32)],
        launch_param_tags: vec![],
        arg_extra_tags: vec![],
    }
    .write(&mut bad_tag);
    let mut bytes = bad_tag.into_bytes();
    bytes.truncate(bytes.len() - 8);
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&9i32.to_le_bytes());
    let err = FunctionInfo::read(&mut BinaryReader::new(&bytes, "m")).unwrap_err();
    assert!(
        err.message().contains("unknown argument extra tag 9"),
        "{err}"
    );
}

#[test]
fn launch_arguments_set_grid_block_cluster_and_shared_memory() {
    let config = LaunchConfig::new(
        "k",
        &tags(&[
            "blockIdx.x",
            "vthread.x",
            "threadIdx.y",
            "clusterCtaIdx.z",
            "preferredClusterCtaIdx.x",
            "tirx.use_cooperative_launch",
            "tirx.use_programtic_dependent_launch",
            "tirx.use_dyn_shared_memory",
        ]),
    )
    .unwrap();
    assert_eq!(config.num_args(), 5);
    assert!(config.uses_dyn_shared_memory());
    let values = [8i64, 32, 2, 4, 1024].map(Any::from);
    let dims = config.dims(&views(&values)).unwrap();
    assert_eq!(dims.grid, [8, 1, 1]);
    assert_eq!(dims.block, [1, 32, 1]);
    assert_eq!(dims.cluster, [1, 1, 2]);
    assert_eq!(dims.preferred_cluster, [4, 1, 1]);
    assert_eq!(dims.dyn_shared_memory, 1024);
    assert!(dims.cooperative && dims.programmatic_dependent_launch);
    assert_eq!(dims.work_dim(), 2);
    assert_eq!(dims.total_threads(), Some(256));

    let plain = LaunchConfig::of(&function_map_from_json(META).unwrap()["add_one"]).unwrap();
    let dims = plain
        .dims(&views(&[Any::from(3i64), Any::from(64i64)]))
        .unwrap();
    assert_eq!(
        (dims.grid, dims.block, dims.dyn_shared_memory),
        ([3, 1, 1], [64, 1, 1], 0)
    );
    assert!(!dims.cooperative);
    assert_eq!(dims.work_dim(), 1);
}

#[test]
fn bad_launches_are_refused_naming_the_tag_and_value() {
    let err = LaunchConfig::new("k", &tags(&["blockIdx.w"])).unwrap_err();
    assert!(
        err.message().contains("unknown launch tag \"blockIdx.w\""),
        "{err}"
    );
    let err = LaunchConfig::new("k", &tags(&["warpIdx.x"])).unwrap_err();
    assert!(err.message().contains("\"warpIdx.x\""), "{err}");
    let err =
        LaunchConfig::new("k", &tags(&["tirx.use_dyn_shared_memory", "blockIdx.x"])).unwrap_err();
    assert!(
        err.message().contains("must be the last launch tag"),
        "{err}"
    );

    let config =
        LaunchConfig::new("k", &tags(&["blockIdx.x", "tirx.use_dyn_shared_memory"])).unwrap();
    let refused = |values: &[Any]| config.dims(&views(values)).unwrap_err();
    let err = refused(&[Any::from(1i64)]);
    assert_eq!(err.kind(), "TypeError");
    assert!(
        err.message()
            .contains("takes 2 launch arguments after its own, got 1"),
        "{err}"
    );
    let err = refused(&[Any::from(0i64), Any::from(0i64)]);
    assert_eq!(err.kind(), "ValueError");
    assert!(err.message().contains("blockIdx.x is 0"), "{err}");
    let err = refused(&[Any::from(1i64 << 40), Any::from(0i64)]);
    assert!(
        err.message().contains(&format!("is {}", 1i64 << 40)),
        "{err}"
    );
    let err = refused(&[Any::from(2i64), Any::from(-1i64)]);
    assert!(
        err.message().contains("tirx.use_dyn_shared_memory is -1"),
        "{err}"
    );
    let err = refused(&[Any::from("wide"), Any::from(0i64)]);
    assert_eq!(err.kind(), "TypeError");
    assert!(err.message().contains("must be an int"), "{err}");
}

#[test]
fn scalar_arguments_pack_into_eight_bytes() {
    let kind =
        |text: &str| ArgKind::of("k", 0, DataType(tvm_ffi::dtype::parse_dtype(text).unwrap()));
    assert_eq!(kind("handle").unwrap(), ArgKind::Handle);
    let cases: [(&str, Any, [u8; 8]); 5] = [
        ("int64", Any::from(-2i64), (-2i64).to_le_bytes()),
        (
            "int32",
            Any::from(-2i64),
            [0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        ),
        ("uint32", Any::from(7i64), [7, 0, 0, 0, 0, 0, 0, 0]),
        ("float64", Any::from(1.5f64), 1.5f64.to_le_bytes()),
        ("float32", Any::from(1.5f64), {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&1.5f32.to_le_bytes());
            b
        }),
    ];
    for (dtype, value, expected) in cases {
        let kind = kind(dtype).unwrap();
        assert_eq!(
            kind.size(),
            if dtype.ends_with("64") { 8 } else { 4 },
            "{dtype}"
        );
        assert_eq!(
            kind.scalar_bytes("k", 0, &AnyView::from(&value)).unwrap(),
            expected,
            "{dtype}"
        );
    }
    assert_eq!(ArgKind::Handle.size(), 8);

    let err = kind("float32x4").unwrap_err();
    assert!(err.message().contains("vector type float32x4"), "{err}");
    let err = kind("float16").unwrap_err();
    assert!(
        err.message().contains("argument 0 has type float16"),
        "{err}"
    );
    let big = Any::from(1i64 << 33);
    let err = ArgKind::Int32
        .scalar_bytes("k", 2, &AnyView::from(&big))
        .unwrap_err();
    assert!(
        err.message()
            .contains("argument 2 is 8589934592, outside int32"),
        "{err}"
    );
    let negative = Any::from(-1i64);
    let err = ArgKind::UInt32
        .scalar_bytes("k", 1, &AnyView::from(&negative))
        .unwrap_err();
    assert!(err.message().contains("outside uint32"), "{err}");
    let text = Any::from("x");
    for kind in [
        ArgKind::Int64,
        ArgKind::Float32,
        ArgKind::Float64,
        ArgKind::Handle,
    ] {
        let err = kind
            .scalar_bytes("k", 0, &AnyView::from(&text))
            .unwrap_err();
        assert_eq!(err.kind(), "TypeError", "{kind:?}");
    }
}
