//! Structural hashing (`ffi.StructuralHash`), consistent with [`structural_equal`]
//! (super::structural_equal).

use std::collections::{HashMap, HashSet};

use super::{
    FactCache, SEqHashKind, TypeFacts, canonical_index, content, enter_level, equal::HookSlot,
    fast_hash_bytes, may_be_shared, tensor_bytes,
};
use crate::abi;
use crate::any::{Any, AnyView};
use crate::containers::array::ArrayObj;
use crate::containers::hash::{hash_bytes, hash_combine};
use crate::containers::map::MapRead;
use crate::error::Result;
use crate::function::Function;
use crate::{Dict, List, Map, Shape, Tensor};

/// The structural hash of `value` (see the [module](super) documentation).
pub fn structural_hash(
    value: AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<u64> {
    Hasher {
        map_free_vars,
        skip_tensor_content,
        vars: HashMap::new(),
        dag_nodes: HashMap::new(),
        memo: HashMap::new(),
        stateful: false,
        vars_by_address: HashSet::new(),
        facts: FactCache::default(),
        in_def: false,
        depth: 0,
    }
    .hash(value)
}

/// The seed of a DAG node's hash where it is met again.
const DAG_BACK_REFERENCE: u64 = 0x6461_675f_6261_636b;

/// Finalizes a hash (a 64-bit mixer, so nearby inputs spread).
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// What a walk remembers of a shared object it has hashed.
struct Memo {
    /// Keeps the object alive for the walk, so that its address names it alone.
    _keep: Any,
    hash: u64,
    /// Whether its hash depends on the walk's state.
    stateful: bool,
    /// Whether a later visit would hash it alike, so the hash stands for it. An object without
    /// variables or DAG nodes hashes alike every time; one with them hashes alike from its
    /// second visit on, once its DAG nodes are back-references and its variables numbered.
    settled: bool,
}

struct Hasher {
    map_free_vars: bool,
    skip_tensor_content: bool,
    /// Hashes given to variables, by address: their order of definition.
    vars: HashMap<usize, u64>,
    /// Hashes of the DAG nodes met so far, by address: a node met again hashes as a
    /// back-reference to it, so that sharing is part of the hash as it is of equality.
    dag_nodes: HashMap<usize, u64>,
    /// The hashes of shared objects met so far, by address and definition region.
    memo: HashMap<(usize, bool), Memo>,
    /// Whether the hash of the value being hashed now depends on what the walk met before
    /// (variables and DAG nodes in it).
    stateful: bool,
    /// Variables hashed by address so far (not mapped yet).
    vars_by_address: HashSet<usize>,
    facts: FactCache,
    in_def: bool,
    depth: usize,
}

/// The hash of a value that holds no objects to walk (plain values, strings and bytes), or
/// `None` for an object. Floats hash by their bits, with every NaN alike.
#[inline]
fn leaf_hash(value: AnyView<'_>) -> Option<u64> {
    let raw = value.as_raw();
    // SAFETY: every payload is 8 initialized bytes; `v_uint64` reads them all.
    let bits = unsafe { raw.payload.v_uint64 };
    let t = raw.type_index;
    Some(match t {
        abi::kTVMFFIFloat => {
            let bits = if f64::from_bits(bits).is_nan() {
                f64::NAN.to_bits()
            } else {
                bits
            };
            hash_combine(t as u64, bits)
        }
        t if t < abi::kTVMFFIRawStr => hash_combine(t as u64, bits),
        abi::kTVMFFISmallStr
        | abi::kTVMFFIStr
        | abi::kTVMFFIRawStr
        | abi::kTVMFFISmallBytes
        | abi::kTVMFFIBytes
        | abi::kTVMFFIByteArrayPtr => {
            let seed = canonical_index(t) as u64;
            hash_combine(seed, fast_hash_bytes(content(&value).unwrap_or_default()))
        }
        t if t >= abi::kTVMFFIStaticObjectBegin => return None,
        _ => hash_combine(t as u64, bits),
    })
}

impl Hasher {
    fn hash(&mut self, value: AnyView<'_>) -> Result<u64> {
        match leaf_hash(value) {
            Some(h) => Ok(h),
            None => self.hash_nested(value),
        }
    }

    /// The hash of an object, one level deeper.
    fn hash_nested(&mut self, value: AnyView<'_>) -> Result<u64> {
        self.remembered(value, |walk| walk.deeper(|walk| walk.hash_object(value)))
    }

    /// The hash `f` computes for the object `value`, remembered by address when the object is
    /// shared, so that a graph whose nodes are met many times is walked about once per node.
    fn remembered(
        &mut self,
        value: AnyView<'_>,
        f: impl FnOnce(&mut Self) -> Result<u64>,
    ) -> Result<u64> {
        if !may_be_shared(value) {
            return f(self);
        }
        let key = (
            value.as_object_ptr().expect("an object") as usize,
            self.in_def,
        );
        let seen = match self.memo.get(&key) {
            Some(memo) if memo.settled => {
                self.stateful |= memo.stateful;
                return Ok(memo.hash);
            }
            Some(_) => true,
            None => false,
        };
        let outer = std::mem::replace(&mut self.stateful, false);
        let result = f(self);
        let stateful = self.stateful;
        self.stateful |= outer;
        let hash = result?;
        let memo = Memo {
            _keep: value.to_owned(),
            hash,
            stateful,
            settled: !stateful || seen,
        };
        self.memo.insert(key, memo);
        Ok(hash)
    }

    /// Runs `f` one level deeper, or fails when the structure nests too deeply.
    #[inline(always)]
    fn deeper(&mut self, f: impl FnOnce(&mut Self) -> Result<u64>) -> Result<u64> {
        self.depth += 1;
        enter_level(self.depth)?;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn hash_seq(&mut self, seed: u64, items: &[Any]) -> Result<u64> {
        let mut h = hash_combine(seed, items.len() as u64);
        for item in items {
            let item = item.as_view();
            // Nested arrays, the most common objects of a graph, skip the dispatch on type.
            let item_hash = match item.as_object::<ArrayObj>() {
                Some(array) => self.remembered(item, |walk| {
                    walk.deeper(|walk| walk.hash_seq(abi::kTVMFFIArray as u64, array.as_slice()))
                })?,
                None => match leaf_hash(item) {
                    Some(leaf) => leaf,
                    None => self.hash_nested(item)?,
                },
            };
            h = hash_combine(h, item_hash);
        }
        Ok(h)
    }

    fn hash_map<M: MapRead>(&mut self, seed: u64, map: &M) -> Result<u64> {
        // Order-independent: a sum of mixed per-entry hashes.
        let mut sum = 0u64;
        for (k, v) in map.iter() {
            let entry = hash_combine(self.hash(k.as_view())?, self.hash(v.as_view())?);
            sum = sum.wrapping_add(mix(entry));
        }
        Ok(hash_combine(hash_combine(seed, map.len() as u64), sum))
    }

    fn hash_object(&mut self, value: AnyView<'_>) -> Result<u64> {
        let t = value.type_index();
        let seed = t as u64;
        Ok(match t {
            abi::kTVMFFIArray => {
                let array = value.as_object::<ArrayObj>().expect("an array");
                return self.hash_seq(seed, array.as_slice());
            }
            abi::kTVMFFIList => self.hash_seq(seed, &value.cast::<List>()?.to_vec())?,
            abi::kTVMFFIMap => self.hash_map(seed, &value.cast::<Map>()?)?,
            abi::kTVMFFIDict => self.hash_map(seed, &value.cast::<Dict>()?)?,
            abi::kTVMFFIShape => value
                .cast::<Shape>()?
                .as_slice()
                .iter()
                .fold(seed, |h, d| hash_combine(h, *d as u64)),
            abi::kTVMFFITensor => {
                let tensor: Tensor = value.cast()?;
                let dtype = tensor.dtype();
                let mut h = hash_combine(
                    seed,
                    u64::from(dtype.code()) << 24
                        | u64::from(dtype.bits()) << 16
                        | u64::from(dtype.lanes()),
                );
                let device = tensor.device().0;
                h = hash_combine(
                    h,
                    (device.device_type as u64) << 32 | device.device_id as u32 as u64,
                );
                for d in tensor.shape() {
                    h = hash_combine(h, *d as u64);
                }
                if !self.skip_tensor_content
                    && let Some(bytes) = tensor_bytes(&tensor)
                {
                    h = hash_combine(h, hash_bytes(bytes));
                }
                h
            }
            abi::kTVMFFIBigInt => hash_combine(
                seed,
                hash_bytes(
                    crate::extra::bigint_text::to_decimal(value)
                        .unwrap_or_default()
                        .as_bytes(),
                ),
            ),
            t if crate::extra::enums::is_enum_type(t) => {
                let seed = crate::types::type_info(t).map_or(0, |i| i.type_key_hash);
                let index = value
                    .as_object::<crate::extra::enums::EnumObj>()
                    .map_or(0, |e| e._int_index);
                hash_combine(seed, index as u64)
            }
            _ => {
                let ptr = value.as_object_ptr().expect("an object") as usize;
                self.hash_reflected(t, value, ptr)?
            }
        })
    }

    fn hash_reflected(&mut self, type_index: i32, value: AnyView<'_>, ptr: usize) -> Result<u64> {
        let facts = self.facts.get(type_index)?;
        let seed = facts.type_key_hash;
        match facts.kind {
            SEqHashKind::Unsupported => unreachable!("kind_of rejects it"),
            SEqHashKind::UniqueInstance => return Ok(hash_combine(seed, ptr as u64)),
            SEqHashKind::FreeVar => {
                self.stateful = true;
                if let Some(&h) = self.vars.get(&ptr) {
                    return Ok(h);
                }
                if self.in_def || self.map_free_vars {
                    let h = hash_combine(seed, self.vars.len() as u64 + 1);
                    self.vars.insert(ptr, h);
                    if self.vars_by_address.remove(&ptr) {
                        // Objects hashed with this variable by address would hash otherwise now.
                        self.memo.retain(|_, memo| !memo.stateful);
                    }
                    return Ok(h);
                }
                self.vars_by_address.insert(ptr);
                return Ok(hash_combine(seed, ptr as u64));
            }
            SEqHashKind::DagNode => {
                self.stateful = true;
                if let Some(&h) = self.dag_nodes.get(&ptr) {
                    return Ok(hash_combine(DAG_BACK_REFERENCE, h));
                }
                let h = self.hash_contents(&facts, value, seed)?;
                self.dag_nodes.insert(ptr, h);
                return Ok(h);
            }
            _ => {}
        }
        self.hash_contents(&facts, value, seed)
    }

    /// The hash of a reflected object's contents: its `__s_hash__` hook's, or its fields'.
    fn hash_contents(&mut self, facts: &TypeFacts, value: AnyView<'_>, seed: u64) -> Result<u64> {
        if let Some(hook) = &facts.s_hash {
            return self.call_hook(hook, value, seed);
        }
        let mut h = seed;
        for sfield in &facts.fields {
            let field = sfield.field.get(value)?;
            let saved = self.in_def;
            self.in_def = saved || sfield.defines;
            let result = self.hash(field.as_view());
            self.in_def = saved;
            h = hash_combine(h, result?);
        }
        Ok(h)
    }

    /// Runs a type's `__s_hash__(obj, init_hash, hash_cb)`, where `hash_cb(value, init_hash,
    /// def_region_kind)` folds a sub-value's hash into `init_hash` with this walk's state.
    fn call_hook(&mut self, hook: &Function, value: AnyView<'_>, seed: u64) -> Result<u64> {
        let this = HookSlot::new(self as *mut Hasher as usize);
        let slot = this.clone();
        let callback = Function::from_typed(
            "__s_hash__.hash_cb",
            move |v: Any, init: i64, def_region: i64| -> Result<i64> {
                let ptr = slot.get()?;
                // SAFETY: the slot holds the walk's address only while the hook runs, during
                // which the walk itself is not used except through this callback, on the
                // calling thread.
                let walk = unsafe { &mut *(ptr as *mut Hasher) };
                let saved = walk.in_def;
                walk.in_def = saved || def_region != 0;
                let result = walk.hash(v.as_view());
                walk.in_def = saved;
                Ok(hash_combine(init as u64, result?) as i64)
            },
        );
        let result = hook.call_packed(&[
            value,
            Any::from(seed as i64).as_view(),
            Any::from(callback).as_view(),
        ]);
        this.clear();
        Ok(result?.cast::<i64>()? as u64)
    }
}
