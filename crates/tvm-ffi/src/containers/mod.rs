//! Containers laid out for inline access by C++ header code: `Array` and `List` (sequence cell
//! with inline `Any` elements), `Map` and `Dict` (apache-tvm-ffi's hash table), and
//! `Shape`; and their typed views `ArrayOf<T>` and `MapOf<K, V>` (`typed`).

pub mod array;
pub mod devices;
pub mod hash;
pub mod map;
pub mod map_globals;
pub mod shape;
pub mod sync;
pub mod typed;
