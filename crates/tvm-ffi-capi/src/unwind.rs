//! A stack walker that interprets each return address's call-frame information once.
//!
//! The system unwinder (libgcc's `_Unwind_Backtrace`, behind the `backtrace` crate) finds and
//! interprets the DWARF call-frame information (CFI) of every frame on every walk, which was
//! most of the cost of a raise even without any symbolization (the figures are in
//! `docs/benchmarks-c-abi.md`). On x86-64 Linux this walker interprets the CFI of an address once (with
//! `gimli`, from the `.eh_frame_hdr` and `.eh_frame` sections of the loaded object that holds
//! it), keeps the resulting rule in a per-thread cache, and afterwards needs a few loads a
//! frame.
//!
//! It keeps only the rules compilers emit for ordinary code: the canonical frame address (CFA)
//! is RSP or RBP plus an offset, the return address is saved at an offset from the CFA, and RBP
//! is saved at an offset from the CFA or left alone. A frame with any other rule (a signal
//! trampoline, hand-written assembly, realigned stacks), or an address that no loaded object's
//! `.eh_frame_hdr` covers, makes the walk report [`Walk::Unsupported`]: the caller then walks
//! the stack again with the system unwinder, so what is captured never depends on this walker
//! being able to handle a frame. A return address whose rule says that it is undefined ends the
//! stack (`_start`, thread entry), as it does for the system unwinder.
//!
//! Cached rules are keyed by absolute address, which a library unloaded and replaced by another
//! at the same address would make stale: each walk first compares the loader's count of
//! unloaded objects with the one the cache was filled under, and empties the cache when it
//! changed.
//!
//! Elsewhere (other architectures and systems) [`walk`] always reports `Unsupported`.

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// The outermost frame was reached, or the visitor asked to stop.
    Done,
    /// A frame needs what this walker does not handle: walk again with the system unwinder.
    Unsupported,
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) use imp::{loader_unloads, walk};

/// Walks nothing: this system has no fast walker.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) fn walk(_visit: &mut dyn FnMut(usize, usize, usize) -> bool) -> Walk {
    Walk::Unsupported
}

/// The loader's count of unloaded objects: unknown here, so always 0.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(crate) fn loader_unloads() -> u64 {
    0
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod imp {
    use std::cell::RefCell;
    use std::ffi::{c_int, c_void};

    use gimli::{
        BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Pointer, RegisterRule,
        UnwindContext, UnwindSection, X86_64,
    };

    use super::Walk;

    /// Number of cached rules per thread (a power of two).
    const CACHE_SIZE: usize = 512;
    /// Rules per set: an address may sit in any way of the set its hash picks, so that a few
    /// addresses of one walk that hash alike do not evict each other on every walk (what that
    /// cost a direct-mapped cache is in `docs/benchmarks-c-abi.md`).
    const WAYS: usize = 4;
    /// Number of sets (a power of two).
    const SETS: usize = CACHE_SIZE / WAYS;

    /// Where a frame's caller state is, for one code address.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Rule {
        /// An ordinary frame.
        Frame {
            /// Whether the CFA is RBP (rather than RSP) plus `cfa_offset`.
            cfa_from_rbp: bool,
            /// The CFA's offset from its register.
            cfa_offset: i32,
            /// Where the return address is, from the CFA; `None`: undefined, the outermost frame.
            ra_offset: Option<i32>,
            /// Where the caller's RBP is saved, from the CFA; `None`: RBP is unchanged.
            rbp_offset: Option<i32>,
            /// The start of the function (the first address its CFI covers).
            function: usize,
        },
        /// A frame this walker does not handle.
        Unsupported,
    }

    /// One cached rule.
    #[derive(Debug, Clone, Copy)]
    struct Entry {
        /// The address looked up (0: an empty slot).
        key: usize,
        rule: Rule,
    }

    /// The rules of the addresses this thread has walked through.
    struct Cache {
        /// [`SETS`] sets of [`WAYS`] rules, most recently used first; allocated on the first
        /// walk.
        sets: Vec<[Entry; WAYS]>,
        /// The loader's count of unloaded objects when the entries were filled.
        unloads: u64,
    }

    thread_local! {
        static CACHE: RefCell<Cache> = const {
            RefCell::new(Cache { sets: Vec::new(), unloads: 0 })
        };
    }

    impl Cache {
        /// Empties the cache if an object was unloaded since it was filled.
        fn check_unloads(&mut self) {
            let unloads = loader_unloads();
            if self.sets.is_empty() || self.unloads != unloads {
                self.sets.clear();
                self.sets.resize(
                    SETS,
                    [Entry {
                        key: 0,
                        rule: Rule::Unsupported,
                    }; WAYS],
                );
                self.unloads = unloads;
            }
        }

        /// The rule of `address`, interpreted from the CFI on a miss.
        fn rule(&mut self, address: usize) -> Rule {
            self.rule_with(address, rule_of)
        }

        /// The rule of `address`, from `resolve` on a miss. The ways of a set are kept most
        /// recently used first; a miss evicts the least recently used.
        fn rule_with(&mut self, address: usize, resolve: impl FnOnce(usize) -> Rule) -> Rule {
            let ways = &mut self.sets[set_of(address)];
            if ways[0].key == address {
                return ways[0].rule;
            }
            let (used, entry) = match ways.iter().position(|entry| entry.key == address) {
                Some(way) => (way, ways[way]),
                None => (
                    WAYS - 1,
                    Entry {
                        key: address,
                        rule: resolve(address),
                    },
                ),
            };
            for way in (1..=used).rev() {
                ways[way] = ways[way - 1];
            }
            ways[0] = entry;
            entry.rule
        }
    }

    /// The set an address is cached in: the top bits of a multiplicative hash.
    fn set_of(address: usize) -> usize {
        (address.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SETS.trailing_zeros())) % SETS
    }

    /// The registers the walk starts from: an address inside [`walk`], RSP and RBP there.
    #[inline(always)]
    fn registers() -> (usize, usize, usize) {
        let (ip, sp, bp): (usize, usize, usize);
        // SAFETY: reads three registers into outputs; touches no memory and no flags.
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        (ip, sp, bp)
    }

    /// Walks the calling thread's stack, innermost frame first (this function's own).
    ///
    /// `visit(ip, sp, function)` sees each frame's instruction pointer (a return address, but
    /// for this function's frame), its stack pointer (the CFA of the frame it called, as the
    /// system unwinder's `_Unwind_GetCFA` reports it) and the start of its function; it returns
    /// whether to go on. A frame whose rule is undefined is visited and ends the walk.
    #[inline(never)]
    pub(crate) fn walk(visit: &mut dyn FnMut(usize, usize, usize) -> bool) -> Walk {
        let (mut ip, mut sp, mut bp) = registers();
        let walked = CACHE.try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return Walk::Unsupported;
            };
            cache.check_unloads();
            // The first address is inside this function; the others are return addresses,
            // whose call instruction (the byte before) is what their rule must describe.
            let mut lookup = ip;
            loop {
                let Rule::Frame {
                    cfa_from_rbp,
                    cfa_offset,
                    ra_offset,
                    rbp_offset,
                    function,
                } = cache.rule(lookup)
                else {
                    return Walk::Unsupported;
                };
                if !visit(ip, sp, function) {
                    return Walk::Done;
                }
                let Some(ra_offset) = ra_offset else {
                    return Walk::Done;
                };
                let base = if cfa_from_rbp { bp } else { sp };
                let cfa = base.wrapping_add_signed(cfa_offset as isize);
                // The stack grows down, in 8-byte slots: anything else is a rule we misread.
                if cfa <= sp || cfa % 8 != 0 || cfa - sp > (1 << 30) {
                    return Walk::Unsupported;
                }
                // SAFETY: the CFI of the frame's code says that its caller's return address
                // (and RBP, when saved) are stored at these offsets from the CFA, inside the
                // frame, which is live on this thread's stack below the current call.
                unsafe {
                    ip =
                        std::ptr::read(cfa.wrapping_add_signed(ra_offset as isize) as *const usize);
                    if let Some(offset) = rbp_offset {
                        bp = std::ptr::read(
                            cfa.wrapping_add_signed(offset as isize) as *const usize
                        );
                    }
                }
                if ip == 0 {
                    return Walk::Done;
                }
                sp = cfa;
                lookup = ip - 1;
            }
        });
        walked.unwrap_or(Walk::Unsupported)
    }

    /// The loader's count of unloaded objects (`dlpi_subs`), 0 if it does not report one.
    pub(crate) fn loader_unloads() -> u64 {
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            size: usize,
            data: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader passes a valid record of `size` bytes; `data` is the `u64`
            // below. `dlpi_subs` is read only when the record is long enough to hold it.
            unsafe {
                let end = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + size_of::<u64>();
                if size >= end {
                    *data.cast::<u64>() = (*info).dlpi_subs;
                }
            }
            1
        }
        let mut unloads = 0u64;
        // SAFETY: the callback matches the loader's signature and writes only `unloads`.
        unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut unloads).cast()) };
        unloads
    }

    /// Interprets the rule of `address` from the CFI of the loaded object that holds it.
    fn rule_of(address: usize) -> Rule {
        struct Search {
            address: usize,
            rule: Rule,
        }
        unsafe extern "C" fn visit_object(
            info: *mut libc::dl_phdr_info,
            _size: usize,
            data: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader passes a valid record whose program headers stay mapped (and
            // the object loaded) while the callback runs; `data` is the `Search` below.
            unsafe {
                let info = &*info;
                let search = &mut *data.cast::<Search>();
                let headers = if info.dlpi_phdr.is_null() {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum))
                };
                let base = info.dlpi_addr as usize;
                if rest_of_segment(base, headers, search.address).is_none() {
                    return 0;
                }
                search.rule =
                    rule_in_object(base, headers, search.address).unwrap_or(Rule::Unsupported);
                1
            }
        }
        let mut search = Search {
            address,
            rule: Rule::Unsupported,
        };
        // SAFETY: the callback matches the loader's signature and writes only `search`.
        unsafe { libc::dl_iterate_phdr(Some(visit_object), (&raw mut search).cast()) };
        search.rule
    }

    /// How many bytes from `address` to the end of the loaded segment that holds it, among the
    /// program `headers` of the object loaded at `base`; `None` if none holds it.
    fn rest_of_segment(base: usize, headers: &[libc::Elf64_Phdr], address: usize) -> Option<usize> {
        headers.iter().find_map(|header| {
            let start = base.wrapping_add(header.p_vaddr as usize);
            let size = header.p_memsz as usize;
            let inside =
                header.p_type == libc::PT_LOAD && address >= start && address - start < size;
            inside.then(|| start + size - address)
        })
    }

    /// The rule of `address` in the object loaded at `base` with program `headers`, or `None`
    /// where its CFI has none this walker handles.
    ///
    /// # Safety
    /// The object is loaded (the loader's lock is held) and `headers` are its program headers.
    unsafe fn rule_in_object(
        base: usize,
        headers: &[libc::Elf64_Phdr],
        address: usize,
    ) -> Option<Rule> {
        let hdr = headers.iter().find(|h| h.p_type == libc::PT_GNU_EH_FRAME)?;
        let hdr_address = base.wrapping_add(hdr.p_vaddr as usize);
        // SAFETY: the segment is mapped for as long as the object is loaded.
        let hdr_bytes =
            unsafe { std::slice::from_raw_parts(hdr_address as *const u8, hdr.p_memsz as usize) };
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_address as u64);
        let parsed = EhFrameHdr::new(hdr_bytes, NativeEndian)
            .parse(&bases, 8)
            .ok()?;
        let Pointer::Direct(eh_frame_address) = parsed.eh_frame_ptr() else {
            return None;
        };
        let eh_frame_address = usize::try_from(eh_frame_address).ok()?;
        // `.eh_frame_hdr` does not give the length of `.eh_frame`: the rest of the loaded
        // segment that holds it bounds what the parser may read.
        let eh_frame_len = rest_of_segment(base, headers, eh_frame_address)?;
        // SAFETY: as above: the rest of a mapped segment.
        let eh_frame_bytes =
            unsafe { std::slice::from_raw_parts(eh_frame_address as *const u8, eh_frame_len) };
        let eh_frame = EhFrame::new(eh_frame_bytes, NativeEndian);
        let bases = bases
            .set_eh_frame(eh_frame_address as u64)
            .set_text(base as u64);
        let table = parsed.table()?;
        let fde = table
            .fde_for_address(&eh_frame, &bases, address as u64, EhFrame::cie_from_offset)
            .ok()?;
        let mut context = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(&eh_frame, &bases, &mut context, address as u64)
            .ok()?;
        rule_of_row(row, usize::try_from(fde.initial_address()).ok()?)
    }

    /// The [`Rule`] of an interpreted CFI row, where it is one this walker handles.
    fn rule_of_row(row: &gimli::UnwindTableRow<usize>, function: usize) -> Option<Rule> {
        let offset = |offset: i64| i32::try_from(offset).ok();
        let (cfa_from_rbp, cfa_offset) = match row.cfa() {
            CfaRule::RegisterAndOffset {
                register,
                offset: o,
            } if *register == X86_64::RSP => (false, offset(*o)?),
            CfaRule::RegisterAndOffset {
                register,
                offset: o,
            } if *register == X86_64::RBP => (true, offset(*o)?),
            _ => return None,
        };
        let ra_offset = match row.register(X86_64::RA) {
            RegisterRule::Offset(o) => Some(offset(o)?),
            RegisterRule::Undefined => None,
            _ => return None,
        };
        let rbp_offset = match row.register(X86_64::RBP) {
            RegisterRule::Offset(o) => Some(offset(o)?),
            RegisterRule::Undefined | RegisterRule::SameValue => None,
            _ => return None,
        };
        Some(Rule::Frame {
            cfa_from_rbp,
            cfa_offset,
            ra_offset,
            rbp_offset,
            function,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn frame(function: usize) -> Rule {
            Rule::Frame {
                cfa_from_rbp: false,
                cfa_offset: 16,
                ra_offset: Some(-8),
                rbp_offset: None,
                function,
            }
        }

        #[test]
        fn addresses_of_one_set_stay_cached_side_by_side() {
            let mut cache = Cache {
                sets: Vec::new(),
                unloads: 0,
            };
            cache.check_unloads();
            let set = set_of(0x1000);
            let alike: Vec<usize> = (0x1000..)
                .step_by(16)
                .filter(|&a| set_of(a) == set)
                .take(WAYS + 1)
                .collect();
            let mut resolved = Vec::new();
            // Two rounds over WAYS addresses of one set: each is resolved once.
            for _ in 0..2 {
                for &address in &alike[..WAYS] {
                    let rule = cache.rule_with(address, |a| {
                        resolved.push(a);
                        frame(a)
                    });
                    assert_eq!(rule, frame(address));
                }
            }
            assert_eq!(resolved, alike[..WAYS]);
            // One more evicts the least recently used (the first), and only that one.
            cache.rule_with(alike[WAYS], frame);
            resolved.clear();
            for &address in alike[1..].iter().rev() {
                cache.rule_with(address, |a| {
                    resolved.push(a);
                    frame(a)
                });
            }
            assert!(resolved.is_empty(), "re-resolved {resolved:x?}");
            cache.rule_with(alike[0], |a| {
                resolved.push(a);
                frame(a)
            });
            assert_eq!(resolved, [alike[0]]);
        }
    }
}
