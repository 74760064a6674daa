//! The codec: byte-exact packets of the protocol's worked examples, and refusals of bad input.

use tvm_rpc::codec::{Message, TensorMeta, WireValue, decode_message, encode_message};
use tvm_rpc::protocol::RpcCode;

fn le(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn init_server_matches_the_reference_bytes() {
    let body = encode_message(&Message::InitServer {
        version: b"0.8.0".to_vec(),
        args: Vec::new(),
    });
    let expected = le(&[
        &2i32.to_le_bytes(),
        &5u64.to_le_bytes(),
        b"0.8.0",
        &0i32.to_le_bytes(),
    ]);
    assert_eq!(body, expected);
    assert_eq!(body.len(), 21);
    assert_eq!(
        decode_message(&body).unwrap(),
        Message::InitServer {
            version: b"0.8.0".to_vec(),
            args: Vec::new()
        }
    );
}

#[test]
fn call_and_return_match_the_reference_bytes() {
    let call = encode_message(&Message::CallFunc {
        handle: 0x1234,
        args: vec![WireValue::Int(10)],
    });
    assert_eq!(call.len(), 28);
    let reply = le(&[
        &4i32.to_le_bytes(),
        &2i32.to_le_bytes(),
        &1i32.to_le_bytes(),
        &1i64.to_le_bytes(),
        &1i32.to_le_bytes(),
        &11i64.to_le_bytes(),
    ]);
    assert_eq!(reply.len(), 32);
    assert_eq!(
        decode_message(&reply).unwrap(),
        Message::Return(vec![WireValue::Int(1), WireValue::Int(11)])
    );
}

#[test]
fn every_value_kind_round_trips() {
    let values = vec![
        WireValue::None,
        WireValue::Int(-7),
        WireValue::Bool(true),
        WireValue::Float(2.5),
        WireValue::Handle(0xdead_beef),
        WireValue::DataType(tvm_ffi::DataType::float(16).0),
        WireValue::Device(tvm_ffi::Device::cuda(1).0),
        WireValue::Tensor(TensorMeta {
            data: 64,
            device: tvm_ffi::Device::cpu(0).0,
            dtype: tvm_ffi::DataType::int(32).0,
            shape: vec![2, 3],
            byte_offset: 8,
        }),
        WireValue::RawStr(b"abc".to_vec()),
        WireValue::ByteArray(vec![0, 255]),
        WireValue::Str("é".as_bytes().to_vec()),
        WireValue::Bytes(vec![1, 2, 3]),
        WireValue::Function(16),
        WireValue::Module(32),
        WireValue::Object {
            type_index: 115,
            handle: 48,
        },
    ];
    let message = Message::Syscall {
        code: RpcCode::DevGetAttr,
        args: values.clone(),
    };
    assert_eq!(decode_message(&encode_message(&message)).unwrap(), message);
}

#[test]
fn bad_packets_are_errors_naming_the_problem() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "packet code needs 4 bytes"),
        (99i32.to_le_bytes().to_vec(), "unknown packet code 99"),
        (
            le(&[&4i32.to_le_bytes(), &i32::MAX.to_le_bytes()]),
            "argument count 2147483647",
        ),
        (
            le(&[
                &4i32.to_le_bytes(),
                &1i32.to_le_bytes(),
                &70i32.to_le_bytes(),
            ]),
            "type index 70 cannot travel",
        ),
        (
            le(&[
                &4i32.to_le_bytes(),
                &1i32.to_le_bytes(),
                &8i32.to_le_bytes(),
                &u64::MAX.to_le_bytes(),
            ]),
            "claims 18446744073709551615 bytes",
        ),
        (
            le(&[
                &4i32.to_le_bytes(),
                &1i32.to_le_bytes(),
                &65i32.to_le_bytes(),
                &70u32.to_le_bytes(),
            ]),
            "object type index 70 is not supported",
        ),
        (
            le(&[
                &6i32.to_le_bytes(),
                &0u64.to_le_bytes(),
                &[0; 8],
                &1000i32.to_le_bytes(),
            ]),
            "tensor ndim 1000",
        ),
        (
            le(&[&4i32.to_le_bytes(), &0i32.to_le_bytes(), &[1]]),
            "1 unexpected bytes",
        ),
    ];
    for (body, expected) in cases {
        let err = decode_message(&body).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{err} (wanted {expected:?})"
        );
    }
}
