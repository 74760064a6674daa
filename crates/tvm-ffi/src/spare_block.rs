//! One spare `malloc` block per thread for each kind of short-lived block (heap strings, DLPack
//! export records, tensor objects): a value made and released soon, the common case across the
//! C ABI, gives its block back here and the next one of the same kind and size takes it,
//! saving a trip through `malloc` and `free` (about 130 instructions with glibc).
//!
//! Every block is a `libc::malloc` block, so a block that is not kept is simply freed, by any
//! thread. A thread's spares are freed with the thread; during its teardown nothing is kept.

use std::cell::Cell;
use std::ffi::c_void;

/// The kinds of block a thread keeps one spare of.
#[derive(Clone, Copy)]
pub(crate) enum BlockKind {
    /// Heap string and bytes objects (any size up to the caller's limit).
    Bytes = 0,
    /// DLPack export records.
    ExportRecord = 1,
    /// Tensor objects of the pooled size.
    Tensor = 2,
}

/// One spare block and its size (`size` 0: none).
struct Slot {
    block: Cell<*mut c_void>,
    size: Cell<usize>,
}

/// A thread's spare blocks, one slot per [`BlockKind`].
struct SpareBlocks([Slot; 3]);

impl Drop for SpareBlocks {
    fn drop(&mut self) {
        for slot in &self.0 {
            // SAFETY: a spare block came from `libc::malloc` and nothing refers to it (free of
            // NULL does nothing).
            unsafe { libc::free(slot.block.get()) };
        }
    }
}

thread_local! {
    static SPARE: SpareBlocks = const {
        SpareBlocks([const { Slot { block: Cell::new(std::ptr::null_mut()), size: Cell::new(0) } }; 3])
    };
}

/// A `malloc` block of `size` (> 0) bytes: this thread's spare of `kind` if it has that size, a
/// new one otherwise. Aborts through `handle_alloc_error` when memory runs out.
#[inline]
pub(crate) fn take(kind: BlockKind, size: usize) -> *mut c_void {
    let spare = SPARE
        .try_with(|spare| {
            let slot = &spare.0[kind as usize];
            if slot.size.get() == size {
                slot.size.set(0);
                slot.block.replace(std::ptr::null_mut())
            } else {
                std::ptr::null_mut()
            }
        })
        .unwrap_or(std::ptr::null_mut());
    if spare.is_null() {
        allocate(size)
    } else {
        spare
    }
}

/// A new `malloc` block of `size` (> 0) bytes (out of line: the spare is the common case).
/// Aborts through `handle_alloc_error` when memory runs out.
#[inline(never)]
pub(crate) fn allocate(size: usize) -> *mut c_void {
    let block = try_allocate(size);
    if block.is_null() {
        abort_out_of_memory(size);
    }
    block
}

/// Ends the process for an allocation of `size` bytes that failed, as a `Vec` does
/// (`handle_alloc_error`): for blocks whose size no caller chose.
#[cold]
pub(crate) fn abort_out_of_memory(size: usize) -> ! {
    let layout = std::alloc::Layout::from_size_align(size.max(1), 16)
        .unwrap_or(std::alloc::Layout::new::<u128>());
    std::alloc::handle_alloc_error(layout)
}

/// A new `malloc` block of `size` (> 0) bytes, or NULL when memory runs out.
#[inline(never)]
pub(crate) fn try_allocate(size: usize) -> *mut c_void {
    // SAFETY: malloc with a non-zero size; the caller checks the result for NULL.
    unsafe { libc::malloc(size) }
}

/// Gives back a block of `size` bytes: kept as this thread's spare of `kind` if it has none
/// (and is not exiting), freed otherwise.
///
/// # Safety
/// `block` came from `libc::malloc` with `size` bytes (> 0) and nothing refers to it any more.
#[inline]
pub(crate) unsafe fn give_back(kind: BlockKind, block: *mut c_void, size: usize) {
    let kept = SPARE
        .try_with(|spare| {
            let slot = &spare.0[kind as usize];
            let empty = slot.size.get() == 0;
            if empty {
                slot.block.set(block);
                slot.size.set(size);
            }
            empty
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: guaranteed by the caller.
        unsafe { libc::free(block) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_block_is_taken_again_for_the_same_kind_and_size_only() {
        let block = take(BlockKind::Tensor, 104);
        // SAFETY: a fresh block of 104 bytes, given back once.
        unsafe { give_back(BlockKind::Tensor, block, 104) };
        let other_kind = take(BlockKind::ExportRecord, 104);
        let other_size = take(BlockKind::Tensor, 96);
        assert_ne!(other_kind, block);
        assert_ne!(other_size, block);
        assert_eq!(take(BlockKind::Tensor, 104), block);
        // SAFETY: each block is released once: the first kept, the others freed.
        unsafe {
            give_back(BlockKind::Tensor, block, 104);
            give_back(BlockKind::Tensor, other_size, 96);
            give_back(BlockKind::ExportRecord, other_kind, 104);
        }
    }
}
