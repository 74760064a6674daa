//! Hash and equality of values as the map and dict tables use them (`AnyHash`/`AnyEqual` of the
//! C ABI). Both are bit-exact with apache-tvm-ffi, because C++ code compiled against the
//! header probes tables built here (and the other way round).
//!
//! * strings and bytes hash their content (small and heap forms alike), with the type index of
//!   the heap form;
//! * objects with an `__any_hash__`/`__any_equal__` type attribute use it;
//! * everything else hashes and compares its raw 8-byte payload together with its type index, so
//!   `1` differs from `true` and `0.0` from `-0.0`.

use std::ffi::c_void;

use crate::abi::{
    TVMFFIAny, kTVMFFIBytes, kTVMFFIFunction, kTVMFFIOpaquePtr, kTVMFFISmallBytes, kTVMFFISmallStr,
    kTVMFFIStaticObjectBegin, kTVMFFIStr,
};
use crate::any::{Any, AnyView};
use crate::function::Function;
use crate::string::BytesObj;
use crate::type_attr::TypeAttr;

/// Modulus of the byte-string hash (the Mersenne prime 2^31 - 1).
const HASH_MOD: u64 = 2_147_483_647;
/// Multiplier of the byte-string hash (the 64-bit FNV prime).
const HASH_MUL: u64 = 1_099_511_628_211;

/// Mixes `value` into `key` (the runtime's stable hash combiner; wrapping `u64` arithmetic).
#[inline]
pub fn hash_combine(key: u64, value: u64) -> u64 {
    key ^ value
        .wrapping_add(0x9e37_79b9)
        .wrapping_add(key << 6)
        .wrapping_add(key >> 2)
}

/// The runtime's stable hash of a byte string: a polynomial over little-endian 8-byte chunks
/// (the last one zero-padded) modulo 2^31 - 1, in wrapping `u64` arithmetic.
pub fn hash_bytes(data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    let mut result = 0u64;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        result = result.wrapping_mul(HASH_MUL).wrapping_add(word) % HASH_MOD;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut padded = [0u8; 8];
        padded[..rest.len()].copy_from_slice(rest);
        let word = u64::from_le_bytes(padded);
        result = result.wrapping_mul(HASH_MUL).wrapping_add(word) % HASH_MOD;
    }
    result
}

/// Signature of a custom hash stored as an opaque pointer in `__any_hash__`.
type HashHook = unsafe extern "C" fn(*const TVMFFIAny) -> i64;
/// Signature of a custom equality stored as an opaque pointer in `__any_equal__`.
type EqualHook = unsafe extern "C" fn(*const TVMFFIAny, *const TVMFFIAny) -> bool;

/// Custom map hashing and equality for the objects of one type (its `__any_hash__` and
/// `__any_equal__` type attributes), registered with [`register_hooks`]. Equal values must hash
/// alike. The hooks run inside map operations and cannot fail: a panic in one aborts the process.
pub trait AnyHashHooks {
    /// The hash of `value`, an object of the type the hooks are registered for.
    fn hash(value: AnyView<'_>) -> i64;
    /// Whether `a` and `b`, both objects of that type, are the same key.
    fn equal(a: AnyView<'_>, b: AnyView<'_>) -> bool;
}

/// The C form of [`AnyHashHooks::hash`].
unsafe extern "C" fn hash_trampoline<H: AnyHashHooks>(value: *const TVMFFIAny) -> i64 {
    // SAFETY: the table calls the hook with a valid value, alive for the call.
    H::hash(unsafe { AnyView::from_raw(*value) })
}

/// The C form of [`AnyHashHooks::equal`].
unsafe extern "C" fn equal_trampoline<H: AnyHashHooks>(
    a: *const TVMFFIAny,
    b: *const TVMFFIAny,
) -> bool {
    // SAFETY: the table calls the hook with two valid values, alive for the call.
    let (a, b) = unsafe { (AnyView::from_raw(*a), AnyView::from_raw(*b)) };
    H::equal(a, b)
}

/// Registers the hooks of `H` as the map hashing and equality of the objects of `type_index`
/// (as direct function pointers, which the table calls without a packed call).
pub fn register_hooks<H: AnyHashHooks>(type_index: i32) -> crate::Result<()> {
    let hash: HashHook = hash_trampoline::<H>;
    let equal: EqualHook = equal_trampoline::<H>;
    crate::reflection::register_type_attr(
        type_index,
        "__any_hash__",
        &Any::from(hash as *mut c_void),
    )?;
    crate::reflection::register_type_attr(
        type_index,
        "__any_equal__",
        &Any::from(equal as *mut c_void),
    )
}

static HASH_ATTR: TypeAttr = TypeAttr::new("__any_hash__");
static EQUAL_ATTR: TypeAttr = TypeAttr::new("__any_equal__");

/// Runs a custom `__any_hash__` entry on `v`.
fn call_hash_hook(hook: TVMFFIAny, v: &TVMFFIAny) -> u64 {
    match hook.type_index {
        kTVMFFIOpaquePtr => {
            // SAFETY: an opaque-pointer entry of this column is a hash function of this type.
            let f: HashHook =
                unsafe { std::mem::transmute::<*mut c_void, HashHook>(hook.payload.v_ptr) };
            // SAFETY: `v` is a valid value for the duration of the call.
            (unsafe { f(v) }) as u64
        }
        kTVMFFIFunction => {
            // SAFETY: the column keeps the function alive; `v` is borrowed for the call.
            let (f, arg) = unsafe { (AnyView::from_raw(hook), AnyView::from_raw(*v)) };
            let f: Function = f.cast().expect("function entry");
            let result = f.call_packed(&[arg]).and_then(|r| r.cast::<i64>());
            match result {
                Ok(h) => h as u64,
                Err(err) => panic!("__any_hash__ of `{}` failed: {err}", arg.type_key()),
            }
        }
        other => panic!("__any_hash__ entry has unsupported type index {other}"),
    }
}

/// Runs a custom `__any_equal__` entry on `a` and `b`.
fn call_equal_hook(hook: TVMFFIAny, a: &TVMFFIAny, b: &TVMFFIAny) -> bool {
    match hook.type_index {
        kTVMFFIOpaquePtr => {
            // SAFETY: an opaque-pointer entry of this column is an equality of this type.
            let f: EqualHook =
                unsafe { std::mem::transmute::<*mut c_void, EqualHook>(hook.payload.v_ptr) };
            // SAFETY: both values are valid for the duration of the call.
            unsafe { f(a, b) }
        }
        kTVMFFIFunction => {
            // SAFETY: the column keeps the function alive; the values are borrowed for the call.
            let (f, x, y) = unsafe {
                (
                    AnyView::from_raw(hook),
                    AnyView::from_raw(*a),
                    AnyView::from_raw(*b),
                )
            };
            let f: Function = f.cast().expect("function entry");
            match f.call_packed(&[x, y]).and_then(|r| r.cast::<bool>()) {
                Ok(eq) => eq,
                Err(err) => panic!("__any_equal__ of `{}` failed: {err}", x.type_key()),
            }
        }
        other => panic!("__any_equal__ entry has unsupported type index {other}"),
    }
}

/// The content of a heap string or bytes object.
///
/// # Safety
/// `v` holds a live `ffi.String` or `ffi.Bytes` object.
unsafe fn heap_bytes(v: &TVMFFIAny) -> &[u8] {
    // SAFETY: per the caller, the payload is a live object with the bytes layout.
    unsafe { (*v.payload.v_obj.cast::<BytesObj>()).as_bytes() }
}

/// The content of a small string or small bytes value.
fn small_bytes(v: &TVMFFIAny) -> &[u8] {
    // SAFETY: small values keep their content in `v_bytes`.
    let bytes: &[u8; 8] = unsafe { &*std::ptr::addr_of!(v.payload.v_bytes) };
    &bytes[..(v.small_str_len as usize).min(7)]
}

/// The map hash of a value (`AnyHash` of the C ABI).
///
/// `v` must be a valid value: objects it holds are alive for the call. Plain values (not
/// strings, bytes or objects) are hashed inline; the rest out of line.
#[inline]
pub fn any_hash(v: &TVMFFIAny) -> u64 {
    let t = v.type_index;
    if t < kTVMFFIStaticObjectBegin && t != kTVMFFISmallStr && t != kTVMFFISmallBytes {
        // SAFETY: every payload member is 8 plain bytes; `v_uint64` reads them all.
        return hash_combine(i64::from(t) as u64, unsafe { v.payload.v_uint64 });
    }
    any_hash_slow(v)
}

/// [`any_hash`] of every kind of value.
#[inline(never)]
fn any_hash_slow(v: &TVMFFIAny) -> u64 {
    // SAFETY: every payload member is 8 plain bytes; `v_uint64` reads them all.
    let bits = unsafe { v.payload.v_uint64 };
    match v.type_index {
        kTVMFFISmallStr => hash_combine(kTVMFFIStr as u64, bits % HASH_MOD),
        kTVMFFISmallBytes => hash_combine(kTVMFFIBytes as u64, bits % HASH_MOD),
        kTVMFFIStr | kTVMFFIBytes => {
            // SAFETY: a valid value with these indices holds a live bytes object.
            let content = unsafe { heap_bytes(v) };
            hash_combine(v.type_index as u64, hash_bytes(content))
        }
        t if t >= kTVMFFIStaticObjectBegin => match HASH_ATTR.get_raw(t) {
            Some(hook) => hash_combine(t as u64, call_hash_hook(hook, v)),
            None => hash_combine(t as u64, bits),
        },
        t => hash_combine(i64::from(t) as u64, bits),
    }
}

/// Map key equality of two values (`AnyEqual` of the C ABI).
///
/// Both must be valid values: objects they hold are alive for the call. Identical bits, and
/// plain values of one type, are decided inline; the rest out of line.
#[inline]
pub fn any_equal(a: &TVMFFIAny, b: &TVMFFIAny) -> bool {
    if a.type_index == b.type_index {
        // SAFETY: every payload member is 8 plain bytes; `v_uint64` reads them all.
        let (pa, pb) = unsafe { (a.payload.v_uint64, b.payload.v_uint64) };
        if a.small_str_len == b.small_str_len && pa == pb {
            return true;
        }
        if a.type_index < kTVMFFIStaticObjectBegin {
            // Plain values and small strings or bytes of one type: equal only bit for bit.
            return false;
        }
    }
    any_equal_slow(a, b)
}

/// [`any_equal`] of every pair of values.
#[inline(never)]
fn any_equal_slow(a: &TVMFFIAny, b: &TVMFFIAny) -> bool {
    // SAFETY: every payload member is 8 plain bytes; `v_uint64` reads them all.
    let (pa, pb) = unsafe { (a.payload.v_uint64, b.payload.v_uint64) };
    if a.type_index == b.type_index && a.small_str_len == b.small_str_len && pa == pb {
        return true;
    }
    if a.type_index == b.type_index {
        return match a.type_index {
            kTVMFFIStr | kTVMFFIBytes => {
                // SAFETY: valid values with these indices hold live bytes objects.
                unsafe { heap_bytes(a) == heap_bytes(b) }
            }
            t if t >= kTVMFFIStaticObjectBegin => EQUAL_ATTR
                .get_raw(t)
                .is_some_and(|hook| call_equal_hook(hook, a, b)),
            _ => false,
        };
    }
    match (a.type_index, b.type_index) {
        (kTVMFFIStr, kTVMFFISmallStr) | (kTVMFFIBytes, kTVMFFISmallBytes) => {
            // SAFETY: `a` is a valid value holding a live bytes object.
            unsafe { heap_bytes(a) == small_bytes(b) }
        }
        (kTVMFFISmallStr, kTVMFFIStr) | (kTVMFFISmallBytes, kTVMFFIBytes) => {
            // SAFETY: `b` is a valid value holding a live bytes object.
            small_bytes(a) == unsafe { heap_bytes(b) }
        }
        _ => false,
    }
}

impl PartialEq for Any {
    /// Map key equality ([`any_equal`]).
    fn eq(&self, other: &Any) -> bool {
        any_equal(self.as_raw(), other.as_raw())
    }
}

impl Eq for Any {}

impl std::hash::Hash for Any {
    /// Feeds [`any_hash`] to the hasher.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(any_hash(self.as_raw()));
    }
}
