//! Module trees embedded in a library as `__tvm_ffi__library_bin`: a little-endian u64 byte
//! count, then the import tree in CSR form (`indptr`, `child_indices`, each a u64 count and u64
//! items), then one entry per node: a kind string (u64 length and bytes) and, for kinds other
//! than `_lib` (the library itself), a byte payload that `ffi.Module.load_from_bytes.<kind>`
//! turns into a module.

use tvm_ffi::{Error, ErrorKind, Function, Result};

use crate::module::Module;

/// Reads the embedded stream.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn truncated(what: &str) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!("embedded module blob is truncated while reading {what}"),
    )
}

impl Reader<'_> {
    fn u64(&mut self, what: &str) -> Result<u64> {
        let end = self
            .pos
            .checked_add(8)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| truncated(what))?;
        let value = u64::from_le_bytes(self.bytes[self.pos..end].try_into().expect("8 bytes"));
        self.pos = end;
        Ok(value)
    }

    fn len(&mut self, what: &str) -> Result<usize> {
        let n = self.u64(what)?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.bytes.len())
            .ok_or_else(|| truncated(what))
    }

    fn bytes(&mut self, what: &str) -> Result<&[u8]> {
        let n = self.len(what)?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| truncated(what))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn vec(&mut self, what: &str) -> Result<Vec<u64>> {
        let n = self.len(what)?;
        (0..n).map(|_| self.u64(what)).collect()
    }
}

/// Rebuilds the module tree of a blob; `library` stands for the `_lib` nodes.
pub(crate) fn load_tree(bytes: &[u8], library: &Module) -> Result<Module> {
    let mut r = Reader { bytes, pos: 0 };
    let indptr = r.vec("the import offsets")?;
    let children = r.vec("the import indices")?;
    let count = indptr.len().saturating_sub(1);
    let mut modules = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = std::str::from_utf8(r.bytes("a module kind")?)
            .map_err(|_| Error::new(ErrorKind::ValueError, "module kind is not UTF-8"))?
            .to_owned();
        if kind == "_lib" {
            modules.push(library.clone());
            continue;
        }
        let payload = tvm_ffi::Bytes::from(r.bytes("a module payload")?);
        let loader = format!("ffi.Module.load_from_bytes.{kind}");
        let loader = Function::get_global(&loader).ok_or_else(|| {
            Error::new(
                ErrorKind::RuntimeError,
                format!("Loader for modules of kind `{kind}` is not registered ({loader})"),
            )
        })?;
        modules.push(loader.call((payload,))?.cast::<Module>()?);
    }
    for (i, module) in modules.iter().enumerate() {
        let (start, end) = (indptr[i] as usize, indptr[i + 1] as usize);
        let range = children
            .get(start..end)
            .ok_or_else(|| truncated("the import tree"))?;
        for child in range {
            let child = modules
                .get(*child as usize)
                .ok_or_else(|| truncated("the import tree"))?;
            module.import_module(child)?;
        }
    }
    modules
        .into_iter()
        .next()
        .ok_or_else(|| truncated("the first module"))
}

/// Rebuilds the tree of a length-prefixed blob at `ptr`.
///
/// # Safety
/// `ptr` points at a u64 byte count followed by that many readable bytes.
pub(crate) unsafe fn load_embedded(ptr: *const u8, library: &Module) -> Result<Module> {
    // SAFETY: guaranteed by the caller.
    let len = unsafe { std::ptr::read_unaligned(ptr.cast::<u64>()) };
    let len = usize::try_from(len).map_err(|_| truncated("the blob size"))?;
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.add(8), len) };
    load_tree(bytes, library)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push_vec(out: &mut Vec<u8>, items: &[u64]) {
        out.extend((items.len() as u64).to_le_bytes());
        for i in items {
            out.extend(i.to_le_bytes());
        }
    }

    #[test]
    fn unknown_kinds_name_their_loader() {
        let mut blob = Vec::new();
        push_vec(&mut blob, &[0, 1, 1]);
        push_vec(&mut blob, &[1]);
        blob.extend(4u64.to_le_bytes());
        blob.extend(b"_lib");
        blob.extend(7u64.to_le_bytes());
        blob.extend(b"mystery");
        blob.extend(1u64.to_le_bytes());
        blob.push(0);
        let library = Module::new(crate::system_lib::SystemLibModule::new(""));
        let err = load_tree(&blob, &library).unwrap_err();
        assert!(
            err.message().contains("ffi.Module.load_from_bytes.mystery"),
            "{err}"
        );
    }

    #[test]
    fn truncated_blobs_are_value_errors() {
        let library = Module::new(crate::system_lib::SystemLibModule::new(""));
        let err = load_tree(&[1, 2, 3], &library).unwrap_err();
        assert_eq!(err.kind(), "ValueError");
    }
}
