//! `Map` (`ffi.Map`, index 72: immutable, copy-on-write) and `Dict` (`ffi.Dict`, index 76:
//! shared-mutable), laid out as apache-tvm-ffi's hash table so that C++ header code
//! can probe, iterate and mutate them inline.
//!
//! Layout (offsets from the object header):
//!
//! | Off | Field | Meaning |
//! |---:|---|---|
//! | 24 | `data_` | slot storage |
//! | 32 | `size_` | number of entries |
//! | 40 | `slots_` | bit 63 set: small layout; low bits: slot count |
//! | 48 | `data_deleter_` | frees `data_` when non-NULL |
//! | 56 | `fib_shift_` (u32) | dense only |
//! | 64 | `iter_list_head_` | dense only: first slot in insertion order (`u64::MAX`: none) |
//! | 72 | `iter_list_tail_` | dense only: last slot in insertion order |
//!
//! A small table (at most 4 entries) keeps `{key, value}` pairs inline right after the 56-byte
//! common part, in insertion order. A dense table points `data_` at `malloc`ed blocks of 16
//! metadata bytes followed by 16 items (`{key, value, prev, next}`, 48 bytes). A key lives in the
//! chain whose head sits in its home slot `(hash * 11400714819323198485) >> fib_shift_`; the low
//! 7 metadata bits index [`PROBE`] to find the next chain member, bit 7 tells chain members from
//! heads. Iteration follows the `prev`/`next` list, which keeps insertion order across erasure
//! and rehashing.
//!
//! Objects made here always have room for 4 inline pairs (184 bytes), so a small table can grow
//! to 4 slots and switch to the dense layout without moving the object; objects made elsewhere
//! are handled with whatever room their slot count proves.
//!
//! The code is split by idea: `layout` (constants and the `repr(C)` structs), `object`
//! (allocation, ownership and release), `dense` (the dense hash table), `table` (operations on
//! a live object of either layout), `iter` (insertion-order cursors and iterators), `keys`
//! (lookup keys), `read` (the [`MapRead`] methods both containers share), `cow_map` (`Map`)
//! and `dict` (`Dict`).

mod cow_map;
mod dense;
mod dict;
mod iter;
mod keys;
mod layout;
mod object;
mod read;
mod table;

pub use cow_map::{Map, MapObj};
pub use dict::{Dict, DictObj};
pub use iter::Iter;
pub(crate) use iter::{Cursor, cursor_of};
pub use keys::{KeyArg, MapKey};
pub use layout::{DataDeleter, MapBaseObj, PROBE};
pub(crate) use object::lock_if_dict;
pub use read::MapRead;
