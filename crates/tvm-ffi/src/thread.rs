//! A cheap name for the calling thread.
//!
//! A thread-local variable of a library loaded at run time (the Python extension, the runtime
//! loaded by `dlopen`) is reached through `__tls_get_addr`: a call of a dozen or more
//! instructions, paid on every use. Code that only needs to tell threads apart, on every call of
//! a hot path, reads the thread pointer instead: one instruction on the targets that have one.

/// A token naming the calling thread: never 0, and different for every live thread (a thread
/// started after another one ended may get the ended one's token).
///
/// On Linux for x86-64 and AArch64 it is the thread pointer, read from its register; elsewhere
/// the address of a thread-local variable.
#[inline]
pub fn current_token() -> usize {
    thread_pointer()
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[inline(always)]
fn thread_pointer() -> usize {
    let pointer: usize;
    // SAFETY: a load through the `fs` segment, which the x86-64 ELF TLS ABI points at the
    // thread control block of the calling thread; its first word holds the block's own address
    // (the thread pointer). It reads no other memory and writes nothing.
    unsafe {
        std::arch::asm!(
            "mov {}, qword ptr fs:[0]",
            out(reg) pointer,
            options(nostack, readonly, preserves_flags, pure),
        );
    }
    pointer
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[inline(always)]
fn thread_pointer() -> usize {
    let pointer: usize;
    // SAFETY: reads the thread pointer register `TPIDR_EL0`, which the AArch64 ELF TLS ABI sets
    // to the calling thread's control block. No memory is read or written.
    unsafe {
        std::arch::asm!(
            "mrs {}, tpidr_el0",
            out(reg) pointer,
            options(nostack, nomem, preserves_flags, pure),
        );
    }
    pointer
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn thread_pointer() -> usize {
    thread_local! {
        /// Its address names the thread.
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|token| std::ptr::from_ref(token) as usize)
}

#[cfg(test)]
mod tests {
    use super::current_token;

    #[test]
    fn each_live_thread_has_its_own_nonzero_token() {
        let mine = current_token();
        assert_ne!(mine, 0);
        assert_eq!(current_token(), mine, "stable within a thread");
        let barrier = std::sync::Barrier::new(4);
        let tokens: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        // All four are alive at once while their tokens are read.
                        barrier.wait();
                        let token = current_token();
                        barrier.wait();
                        token
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = tokens.clone();
        all.push(mine);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 5, "{tokens:?} and {mine}");
        assert!(!all.contains(&0));
    }
}
