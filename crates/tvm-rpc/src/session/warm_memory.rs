//! Warm memory: host memory an RPC server keeps resident from one session to the next.
//!
//! Memory a process has never touched is slow to write the first time: each page is faulted in
//! and zeroed (on a VM with free page reporting, faulted in from the hypervisor as well), so the
//! first large upload of a fresh session process ran at a fraction of the speed of the next one.
//! So the server's session zygote reserves slabs of *shared* anonymous memory ([`reserve`]),
//! which stay resident while it lives and which every session process inherits. A session
//! process claims a free one ([`claim`]: an atomic flag in the slab's shared header, so that no
//! two processes ever hold one) at its first large allocation and unmaps the rest; before that,
//! a spare session process maps the part of a slab earlier sessions used into its page tables
//! while it waits for its connection ([`prefault`]). The session serves its large host allocations from the slab ([`take`],
//! [`give_back`]) and zeroes what it touched when it ends ([`scrub`]), which frees the slab for
//! the next one. When a session dies holding a slab, the zygote drops the slab's pages
//! ([`release_dead`]): zero and free again, though cold.
//!
//! A slab is a header page, then the arena from the next 2 MiB boundary, carved into blocks of
//! whole 2 MiB units.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tvm_ffi::{Error, ErrorKind, Result};

/// The arena's unit of allocation and alignment (a huge page).
pub(crate) const UNIT: usize = 2 << 20;
/// The most slabs one process reserves.
const MAX_SLABS: usize = 64;

/// A slab's state, shared by every process that maps it.
#[repr(C)]
struct Header {
    /// [`CLEAN`] (free, and zero past the header) or [`IN_USE`]; a fresh or dropped slab's
    /// pages read as zero, so clean.
    state: AtomicU32,
    /// The process that claimed it (while in use).
    owner: AtomicI32,
    /// The most arena bytes any session has touched: what the next one prefaults.
    touched: AtomicU64,
}

const CLEAN: u32 = 0;
const IN_USE: u32 = 1;

/// One shared mapping: `len` bytes at `base` (addresses, so that the lists are `Send`), whose
/// arena holds `arena_len` bytes.
#[derive(Debug)]
struct Slab {
    base: usize,
    len: usize,
    arena_len: usize,
    /// How much of the arena [`prefault`] has mapped into this process's page tables.
    prefaulted: usize,
}

impl Slab {
    /// Maps a slab whose arena holds `arena_bytes` (whole units).
    fn map(arena_bytes: usize) -> Result<Slab> {
        let len = arena_bytes
            .checked_add(2 * UNIT)
            .ok_or_else(|| too_large(arena_bytes))?;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(Error::new(
                ErrorKind::MemoryError,
                format!("cannot reserve {arena_bytes} bytes of warm memory: {err}"),
            ));
        }
        Ok(Slab {
            base: base as usize,
            len,
            arena_len: arena_bytes,
            prefaulted: 0,
        })
    }

    fn unmap(&self) {
        // SAFETY: the slab's whole mapping, made by `Slab::map`; nothing of this process uses it
        // any more (a session unmaps the slabs it did not claim, and its own after the scrub).
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }

    fn header(&self) -> &Header {
        // SAFETY: the first page of a live mapping, zero or written only through these atomics;
        // `Header` is two naturally aligned atomics, valid for any bit pattern.
        unsafe { &*(self.base as *const Header) }
    }

    /// The arena's first address: the first 2 MiB boundary after the header, at most `UNIT`
    /// past `base`, so that the arena ends within the mapping.
    fn arena_start(&self) -> usize {
        (self.base + 1).next_multiple_of(UNIT)
    }

    /// The arena's length in bytes (whole units).
    fn arena_len(&self) -> usize {
        self.arena_len
    }
}

/// The slab a session process claimed, carved into blocks.
#[derive(Debug)]
struct Arena {
    slab: Slab,
    /// Free runs: offset → length, both in bytes, merged with their neighbours.
    free: BTreeMap<usize, usize>,
    /// Blocks handed out: offset → length.
    used: BTreeMap<usize, usize>,
    /// The end of the furthest block handed out (what [`scrub`] zeroes).
    touched: usize,
}

impl Arena {
    fn new(slab: Slab) -> Arena {
        let mut free = BTreeMap::new();
        if slab.arena_len() > 0 {
            free.insert(0, slab.arena_len());
        }
        Arena {
            slab,
            free,
            used: BTreeMap::new(),
            touched: 0,
        }
    }

    /// The first free run of `len` bytes (whole units), taken.
    fn take(&mut self, len: usize) -> Option<usize> {
        let (&offset, &run) = self.free.iter().find(|&(_, &run)| run >= len)?;
        self.free.remove(&offset);
        if run > len {
            self.free.insert(offset + len, run - len);
        }
        self.used.insert(offset, len);
        self.touched = self.touched.max(offset + len);
        Some(offset)
    }

    /// Returns the block at `offset` to the free runs; false if no block starts there.
    fn give_back(&mut self, offset: usize) -> bool {
        let Some(len) = self.used.remove(&offset) else {
            return false;
        };
        let (mut start, mut end) = (offset, offset + len);
        if let Some((&before, &before_len)) = self.free.range(..offset).next_back()
            && before + before_len == offset
        {
            self.free.remove(&before);
            start = before;
        }
        if let Some(after_len) = self.free.remove(&end) {
            end += after_len;
        }
        self.free.insert(start, end - start);
        true
    }
}

/// The zygote's slabs, inherited by its children (empty in a session process once it claimed
/// one).
static SLABS: Mutex<Vec<Slab>> = Mutex::new(Vec::new());
/// This session process's arena.
static ARENA: Mutex<Option<Arena>> = Mutex::new(None);

fn slabs() -> MutexGuard<'static, Vec<Slab>> {
    SLABS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn arena() -> MutexGuard<'static, Option<Arena>> {
    ARENA.lock().unwrap_or_else(PoisonError::into_inner)
}

fn too_large(bytes: usize) -> Error {
    Error::new(
        ErrorKind::ValueError,
        format!("warm memory of {bytes} bytes is too large"),
    )
}

/// Reserves `count` slabs whose arenas hold `bytes` each (rounded up to whole 2 MiB units);
/// nothing is resident until sessions touch it. For the zygote, once, before it forks.
pub fn reserve(count: usize, bytes: usize) -> Result<()> {
    if count > MAX_SLABS {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "warm memory: {count} slabs asked for, at most {MAX_SLABS}"
        );
    }
    let arena_bytes = bytes
        .checked_next_multiple_of(UNIT)
        .ok_or_else(|| too_large(bytes))?;
    let mut slabs = slabs();
    if !slabs.is_empty() || arena().is_some() {
        tvm_ffi::bail!(
            ErrorKind::RuntimeError,
            "warm memory is already reserved in this process"
        );
    }
    if arena_bytes == 0 {
        return Ok(());
    }
    for _ in 0..count {
        match Slab::map(arena_bytes) {
            Ok(slab) => slabs.push(slab),
            Err(err) => {
                slabs.drain(..).for_each(|slab| slab.unmap());
                return Err(err);
            }
        }
    }
    Ok(())
}

/// How many slabs this process holds (the zygote's; 0 in a session).
pub fn slab_count() -> usize {
    slabs().len()
}

/// Makes a free slab this process's arena, if it has none yet, and unmaps the others, so that
/// the session sees no other session's memory; whether it has one now. For a session process.
pub fn claim() -> bool {
    let mut arena = arena();
    if arena.is_some() {
        return true;
    }
    let mut slabs = slabs();
    let Some(index) = slabs.iter().position(|slab| {
        let header = slab.header();
        let claimed = header
            .state
            .compare_exchange(CLEAN, IN_USE, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if claimed {
            header
                .owner
                .store(std::process::id() as i32, Ordering::Release);
        }
        claimed
    }) else {
        return false;
    };
    let slab = slabs.swap_remove(index);
    slabs.drain(..).for_each(|slab| slab.unmap());
    *arena = Some(Arena::new(slab));
    true
}

/// Maps up to `max_bytes` more of the part of a slab that earlier sessions touched into this
/// process's page tables, so that the session's first writes there take no page faults: of the
/// slab this process claimed, or else of the one it would claim (mapping changes no byte, so it
/// needs no claim, and a spare need not hold a slab the session before it still uses). Returns
/// whether that part is all mapped (true without slabs).
pub fn prefault(max_bytes: usize) -> bool {
    let mut arena = arena();
    let mut slabs = slabs();
    let slab = match arena.as_mut() {
        Some(arena) => &mut arena.slab,
        None => {
            let free = slabs
                .iter()
                .position(|slab| slab.header().state.load(Ordering::Acquire) == CLEAN);
            match free.or(if slabs.is_empty() { None } else { Some(0) }) {
                Some(index) => &mut slabs[index],
                None => return true,
            }
        }
    };
    let goal = usize::try_from(slab.header().touched.load(Ordering::Acquire))
        .unwrap_or(usize::MAX)
        .min(slab.arena_len());
    let end = goal.min(slab.prefaulted.saturating_add(max_bytes.max(UNIT)));
    if end > slab.prefaulted {
        populate(slab.arena_start() + slab.prefaulted, end - slab.prefaulted);
        slab.prefaulted = end;
    }
    slab.prefaulted >= goal
}

/// Faults `len` bytes at `start` in for writing.
fn populate(start: usize, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range lies in a slab this process maps; populating changes no byte.
        let status = unsafe { libc::madvise(start as *mut c_void, len, libc::MADV_POPULATE_WRITE) };
        if status == 0 {
            return;
        }
    }
    // Kernels without MADV_POPULATE_WRITE: read each page (another process may be writing the
    // slab, so nothing is written back); its first write then takes a lighter fault.
    for page in (start..start + len).step_by(4096) {
        // SAFETY: `page` lies in a slab this process maps, readable.
        unsafe { (page as *const u8).read_volatile() };
    }
}

/// A block of at least `nbytes` from the arena (claimed now if need be), aligned to
/// `alignment` (at most 2 MiB); None without a slab, for a larger alignment, or when no free
/// run is large enough.
pub fn take(nbytes: u64, alignment: u64) -> Option<u64> {
    if alignment > UNIT as u64 || nbytes == 0 {
        return None;
    }
    let len = usize::try_from(nbytes)
        .ok()?
        .checked_next_multiple_of(UNIT)?;
    if !claim() {
        return None;
    }
    let mut guard = arena();
    let arena = guard.as_mut()?;
    let offset = arena.take(len)?;
    Some((arena.slab.arena_start() + offset) as u64)
}

/// Returns a block [`take`] gave; false (and nothing done) for an address that is not one.
pub fn give_back(address: u64) -> bool {
    let mut guard = arena();
    let Some(arena) = guard.as_mut() else {
        return false;
    };
    let Some(offset) = usize::try_from(address)
        .ok()
        .and_then(|a| a.checked_sub(arena.slab.arena_start()))
    else {
        return false;
    };
    arena.give_back(offset)
}

/// Zeroes every arena byte this session touched, records how much that was for the next
/// session's [`prefault`], marks the slab free and unmaps it. For a session process, at its
/// end, when nothing uses the arena's blocks any more. Returns the bytes zeroed.
pub fn scrub() -> usize {
    let Some(arena) = arena().take() else {
        return 0;
    };
    let start = arena.slab.arena_start() as *mut u8;
    // SAFETY: the touched part of this process's arena mapping; the session is over, so no
    // request reads or writes it any more.
    unsafe { std::ptr::write_bytes(start, 0, arena.touched) };
    let header = arena.slab.header();
    header
        .touched
        .fetch_max(arena.touched as u64, Ordering::AcqRel);
    header.owner.store(0, Ordering::Relaxed);
    header.state.store(CLEAN, Ordering::Release);
    arena.slab.unmap();
    arena.touched
}

/// After process `pid` ended: drops the pages of every slab it held in use (it died before
/// [`scrub`]), which leaves them zero and free for the next claim (cold: their memory went back
/// to the system). Returns how many there were. For the zygote.
pub fn release_dead(pid: u32) -> usize {
    let slabs = slabs();
    let mut dropped = 0;
    for slab in slabs.iter() {
        let header = slab.header();
        if header.state.load(Ordering::Acquire) == IN_USE
            && header.owner.load(Ordering::Acquire) == pid as i32
        {
            // SAFETY: the whole of a shared anonymous mapping this process made; dropping its
            // backing pages zeroes it for every process that maps it, and the only process that
            // used it is gone.
            unsafe { libc::madvise(slab.base as *mut c_void, slab.len, libc::MADV_REMOVE) };
            dropped += 1;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// An arena over a slab that is never mapped (the carving does not touch memory).
    fn arena(units: usize) -> Arena {
        Arena::new(Slab {
            base: 0x7000_0000_0000,
            len: (units + 2) * UNIT,
            arena_len: units * UNIT,
            prefaulted: 0,
        })
    }

    #[test]
    fn blocks_are_whole_units_first_fit() {
        let mut arena = arena(8);
        assert_eq!(arena.take(2 * UNIT), Some(0));
        assert_eq!(arena.take(3 * UNIT), Some(2 * UNIT));
        assert_eq!(arena.take(4 * UNIT), None, "3 units are left");
        assert_eq!(arena.take(3 * UNIT), Some(5 * UNIT));
        assert_eq!(arena.touched, 8 * UNIT);
        assert_eq!(arena.take(UNIT), None, "full");
    }

    #[test]
    fn freed_runs_merge_with_both_neighbours() {
        let mut arena = arena(6);
        let [a, b, c] = [2, 2, 2].map(|units| arena.take(units * UNIT).unwrap());
        assert!(arena.give_back(a));
        assert!(arena.give_back(c));
        assert!(!arena.give_back(c), "twice");
        assert!(!arena.give_back(a + UNIT), "not a block's start");
        assert_eq!(arena.take(4 * UNIT), None, "two runs of 2 units, apart");
        assert!(arena.give_back(b));
        assert_eq!(arena.free.len(), 1, "{:?}", arena.free);
        assert_eq!(arena.take(6 * UNIT), Some(0));
        assert_eq!(arena.touched, 6 * UNIT);
    }

    #[test]
    fn the_arena_starts_on_a_unit_boundary_after_the_header() {
        for base in [0x1000_0000, 0x1000_1000, 0x101f_f000] {
            let slab = Slab {
                base,
                len: 64 * MIB + 2 * UNIT,
                arena_len: 64 * MIB,
                prefaulted: 0,
            };
            let start = slab.arena_start();
            assert!(start > base && start <= base + UNIT && start.is_multiple_of(UNIT));
            assert!(start + slab.arena_len() <= base + slab.len);
        }
    }
}
