//! Large host blocks a session keeps after the peer frees them, for its next allocations of the
//! same size.
//!
//! A client that sends tensors of one size again and again (the inputs of a model, tuning
//! trials) would otherwise get fresh memory from the OS for each, and fresh memory is zeroed page
//! by page as the bytes arrive: for a 64 MiB upload that costs about as much as the transfer.
//! Only blocks of at least [`MIN_BYTES`] are kept, at most [`MAX_BLOCKS`] and [`MAX_BYTES`] in
//! all; the oldest goes first, and the rest when the session ends.

/// The smallest block worth keeping (a huge page: smaller blocks come from the allocator's own
/// free lists).
pub(super) const MIN_BYTES: u64 = 2 << 20;
/// The most blocks kept.
const MAX_BLOCKS: usize = 4;
/// The most bytes kept.
const MAX_BYTES: u64 = 1 << 30;

/// A freed block: its address and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Block {
    pub(super) address: u64,
    pub(super) len: u64,
}

/// The kept blocks, oldest first.
#[derive(Debug, Default)]
pub(super) struct HostBlockCache {
    blocks: Vec<Block>,
    bytes: u64,
}

impl HostBlockCache {
    /// A kept block of exactly `len` bytes whose address is a multiple of `alignment`.
    pub(super) fn take(&mut self, len: u64, alignment: u64) -> Option<u64> {
        let alignment = alignment.max(1);
        let index = self
            .blocks
            .iter()
            .rposition(|b| b.len == len && b.address.is_multiple_of(alignment))?;
        let block = self.blocks.remove(index);
        self.bytes -= block.len;
        Some(block.address)
    }

    /// Keeps `block` if it is large enough and fits; returns the blocks to free now (`block`
    /// itself, or the oldest ones it displaced).
    pub(super) fn keep(&mut self, block: Block) -> Vec<Block> {
        if block.len < MIN_BYTES || block.len > MAX_BYTES {
            return vec![block];
        }
        let mut evicted = Vec::new();
        while self.blocks.len() >= MAX_BLOCKS || self.bytes + block.len > MAX_BYTES {
            let oldest = self.blocks.remove(0);
            self.bytes -= oldest.len;
            evicted.push(oldest);
        }
        self.bytes += block.len;
        self.blocks.push(block);
        evicted
    }

    /// Every kept block, for release.
    pub(super) fn drain(&mut self) -> Vec<Block> {
        self.bytes = 0;
        std::mem::take(&mut self.blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn block(address: u64, len: u64) -> Block {
        Block { address, len }
    }

    #[test]
    fn small_and_huge_blocks_are_not_kept() {
        let mut cache = HostBlockCache::default();
        assert_eq!(cache.keep(block(0x1000, MIB)), vec![block(0x1000, MIB)]);
        assert_eq!(
            cache.keep(block(0x2000, 2 << 30)),
            vec![block(0x2000, 2 << 30)]
        );
        assert_eq!(cache.take(MIB, 1), None);
    }

    #[test]
    fn a_block_serves_the_same_size_and_alignment_once() {
        let mut cache = HostBlockCache::default();
        assert!(cache.keep(block(0x20_0000, 64 * MIB)).is_empty());
        assert_eq!(cache.take(32 * MIB, 64), None, "another size");
        assert_eq!(cache.take(64 * MIB, 0x40_0000), None, "not aligned enough");
        assert_eq!(cache.take(64 * MIB, 64), Some(0x20_0000));
        assert_eq!(cache.take(64 * MIB, 64), None, "taken already");
    }

    #[test]
    fn the_oldest_blocks_make_room() {
        let mut cache = HostBlockCache::default();
        for i in 0..4 {
            assert!(cache.keep(block(i << 32, 8 * MIB)).is_empty());
        }
        assert_eq!(cache.keep(block(9 << 32, 8 * MIB)), vec![block(0, 8 * MIB)]);
        let evicted = cache.keep(block(10 << 32, 1010 * MIB));
        assert_eq!(evicted.len(), 3, "{evicted:?}");
        let mut rest = cache.drain();
        rest.sort_by_key(|b| b.address);
        assert_eq!(
            rest,
            vec![block(9 << 32, 8 * MIB), block(10 << 32, 1010 * MIB)]
        );
        assert!(cache.drain().is_empty());
    }
}
