//! The global function registry: names to functions with their documentation and metadata,
//! and the rule for registering a name that is already taken. The process's one registry is
//! created, with the built-in functions, by [`crate::global_registry`].

use std::collections::HashMap;
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLock;

use tvm_ffi::error::{ErrorKind, Result};
use tvm_ffi::function::Function;

/// One registered global function with its documentation.
pub(crate) struct GlobalEntry {
    pub(crate) function: Function,
    pub(crate) doc: String,
    pub(crate) metadata: String,
    /// A default implementation: any later registration of the name replaces it.
    pub(crate) is_default: bool,
}

/// How a registration treats an entry already under its name (`allow_override` of the C API).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Overwrite {
    /// An existing entry is an error, unless it is a default.
    Refuse,
    /// An existing entry is replaced.
    Replace,
    /// The new entry is a default: an existing entry stays.
    AsDefault,
}

impl Overwrite {
    /// The mode of an `allow_override` argument (`TVM_FFI_GLOBAL_DEFAULT`, non-zero, zero).
    pub(crate) fn from_c(allow_override: c_int) -> Overwrite {
        match allow_override {
            0 => Overwrite::Refuse,
            tvm_ffi_sys::TVM_FFI_GLOBAL_DEFAULT => Overwrite::AsDefault,
            _ => Overwrite::Replace,
        }
    }
}

/// The global function registry, safe for concurrent registration and lookup. Names are kept
/// as bytes (always UTF-8: they are inserted as `&str`), so a C lookup needs no validation.
pub(crate) struct Registry {
    entries: RwLock<HashMap<Vec<u8>, GlobalEntry, BuildHasherDefault<NameHasher>>>,
}

/// The hash of registry names: one rotate, xor and multiply per 8-byte word (the FxHash
/// scheme). Names come from the programs and libraries of the process, not from untrusted
/// input, so a keyed hash (std's SipHash, 4x the instructions of a whole lookup here) buys
/// nothing.
#[derive(Default)]
pub(crate) struct NameHasher(u64);

impl NameHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Registry {
    /// An empty registry.
    pub(crate) fn new() -> Registry {
        Registry {
            entries: RwLock::new(HashMap::default()),
        }
    }

    /// Adds an entry; what happens to an existing one is `overwrite`'s to say.
    pub(crate) fn insert(
        &self,
        name: &str,
        function: Function,
        doc: String,
        metadata: String,
        overwrite: Overwrite,
    ) -> Result<()> {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = entries.get(name.as_bytes()) {
            match overwrite {
                Overwrite::AsDefault => return Ok(()),
                Overwrite::Refuse if !existing.is_default => tvm_ffi::bail!(
                    ErrorKind::RuntimeError,
                    "Global Function `{name}` is already registered"
                ),
                Overwrite::Refuse | Overwrite::Replace => {}
            }
        }
        let entry = GlobalEntry {
            function,
            doc,
            metadata,
            is_default: overwrite == Overwrite::AsDefault,
        };
        let previous = entries.insert(name.as_bytes().to_vec(), entry);
        drop(entries);
        drop(previous);
        Ok(())
    }

    /// The function registered as `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Function> {
        self.get_bytes(name.as_bytes())
    }

    /// The function registered under the name spelled by `name` (none when it is not UTF-8).
    pub(crate) fn get_bytes(&self, name: &[u8]) -> Option<Function> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(name).map(|e| e.function.clone())
    }

    /// Runs `read` on the entry for `name`.
    pub(crate) fn with_entry<T>(
        &self,
        name: &str,
        read: impl FnOnce(&GlobalEntry) -> T,
    ) -> Option<T> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(name.as_bytes()).map(read)
    }

    /// Removes `name`; whether it was registered.
    pub(crate) fn remove(&self, name: &str) -> bool {
        let removed = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name.as_bytes());
        removed.is_some()
    }

    /// All registered names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = entries
            .keys()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect();
        names.sort_unstable();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvm_ffi::Any;

    #[test]
    fn a_default_yields_to_any_later_registration_and_never_displaces() {
        let registry = Registry::new();
        let constant = |value: i64| Function::from_packed(move |_| Ok(Any::from(value)));
        let value_of = |name: &str| registry.get(name).unwrap().call(()).unwrap().cast::<i64>();
        let insert = |name: &str, value: i64, overwrite: Overwrite| {
            registry.insert(
                name,
                constant(value),
                String::new(),
                String::new(),
                overwrite,
            )
        };
        insert("x.f", 1, Overwrite::AsDefault).unwrap();
        // A plain registration of a default's name replaces it, and is no longer a default.
        insert("x.f", 2, Overwrite::Refuse).unwrap();
        assert_eq!(value_of("x.f").unwrap(), 2);
        assert!(insert("x.f", 3, Overwrite::Refuse).is_err());
        // A default never displaces an entry.
        insert("x.f", 4, Overwrite::AsDefault).unwrap();
        assert_eq!(value_of("x.f").unwrap(), 2);
        assert_eq!(Overwrite::from_c(0), Overwrite::Refuse);
        assert_eq!(Overwrite::from_c(1), Overwrite::Replace);
        assert_eq!(Overwrite::from_c(-3), Overwrite::Replace);
        assert_eq!(
            Overwrite::from_c(tvm_ffi_sys::TVM_FFI_GLOBAL_DEFAULT),
            Overwrite::AsDefault
        );
    }

    #[test]
    fn names_of_every_length_are_found_by_text_and_by_bytes() {
        let registry = Registry::new();
        // Names that differ only in their last word, and lengths across the 8-byte words.
        let names: Vec<String> = (1..=20)
            .map(|len| "registry.x".repeat(3)[..len].to_owned())
            .collect();
        for (i, name) in names.iter().enumerate() {
            let value = i as i64;
            let function = Function::from_packed(move |_| Ok(Any::from(value)));
            registry
                .insert(
                    name,
                    function,
                    String::new(),
                    String::new(),
                    Overwrite::Refuse,
                )
                .unwrap();
        }
        for (i, name) in names.iter().enumerate() {
            let by_text = registry.get(name).expect("registered");
            assert_eq!(by_text.call(()).unwrap().cast::<i64>().unwrap(), i as i64);
            let by_bytes = registry.get_bytes(name.as_bytes()).expect("registered");
            assert_eq!(by_bytes.call(()).unwrap().cast::<i64>().unwrap(), i as i64);
        }
        assert!(registry.get_bytes(b"registry.\xff").is_none());
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(registry.names(), sorted);
        assert!(registry.remove(&names[3]));
        assert!(registry.get(&names[3]).is_none());
    }
}
