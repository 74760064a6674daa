//! Warm memory across processes: a zygote's slab adopted by forked sessions, scrubbed between
//! them and replaced after a session that died dirty. One test: the slabs are process state.

// The process state the library links against.
use tvm_ffi_capi as _;
use tvm_rpc::session::warm_memory;

const UNIT: usize = 2 << 20;

/// Runs `child` in a forked process; returns its exit status (or minus the signal).
fn in_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only touches the warm-memory statics (no other thread of this test
    // binary holds their locks) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
        // SAFETY: ends the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    }
}

/// Fills a block of `units` from the arena with `byte`; returns its address.
fn fill(units: usize, byte: u8) -> usize {
    let address = warm_memory::take((units * UNIT) as u64, 64).expect("a block") as usize;
    assert_eq!(address % UNIT, 0);
    // SAFETY: a block of `units` units of this process's arena, taken just now.
    unsafe { std::ptr::write_bytes(address as *mut u8, byte, units * UNIT) };
    address
}

/// Whether the `units` at `address` are all zero.
fn all_zero(address: usize, units: usize) -> bool {
    // SAFETY: a block of this process's arena, taken by the caller.
    let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, units * UNIT) };
    bytes.iter().all(|&b| b == 0)
}

/// A pipe: (read end, write end).
fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn send_word(fd: i32, word: u64) {
    // SAFETY: writes the 8 bytes of `word` to an open pipe.
    let written = unsafe { libc::write(fd, (&raw const word).cast(), 8) };
    assert_eq!(written, 8);
}

fn receive_word(fd: i32) -> u64 {
    let mut word = 0u64;
    // SAFETY: reads 8 bytes into `word` from an open pipe.
    let read = unsafe { libc::read(fd, (&raw mut word).cast(), 8) };
    assert_eq!(read, 8);
    word
}

#[test]
fn sessions_share_slabs_but_never_their_data() {
    assert!(warm_memory::reserve(65, UNIT).is_err(), "too many slabs");
    warm_memory::reserve(2, 4 * UNIT - 1).expect("reserve");
    assert_eq!(warm_memory::slab_count(), 2);
    assert!(warm_memory::reserve(1, UNIT).is_err(), "reserved twice");

    // A session fills a slab, frees a block, reuses it, and scrubs at its end.
    let (first_address, report) = pipe();
    let first = in_child(|| {
        assert!(
            warm_memory::prefault(UNIT),
            "nothing touched yet: nothing to do"
        );
        assert_eq!(warm_memory::slab_count(), 2, "prefaulting claims nothing");
        assert!(warm_memory::claim());
        assert!(warm_memory::claim(), "claimed already");
        assert_eq!(warm_memory::slab_count(), 0, "the other slab is unmapped");
        assert!(warm_memory::prefault(UNIT), "nothing touched before");
        assert_eq!(
            warm_memory::take(1, 4 * UNIT as u64),
            None,
            "alignment over 2 MiB"
        );
        let a = fill(1, 0xAB);
        let b = fill(3, 0xCD);
        assert_eq!(warm_memory::take(1, 64), None, "the arena is full");
        assert!(warm_memory::give_back(a as u64));
        assert!(!warm_memory::give_back(a as u64), "twice");
        assert!(!warm_memory::give_back(0x1000), "not the arena's");
        assert_eq!(fill(1, 0xEF), a, "the freed block serves again");
        assert_eq!(b, a + UNIT);
        send_word(report, a as u64);
        assert_eq!(warm_memory::scrub(), 4 * UNIT);
        assert_eq!(warm_memory::take(1, 64), None, "nothing after the scrub");
        0
    });
    assert_eq!(first, 0);
    let first_address = receive_word(first_address) as usize;

    // Two sessions at once hold different slabs; the first one claims the scrubbed slab and
    // finds it zero, prefaults what the first session touched, and dies without scrubbing.
    let (held_read, held_write) = pipe();
    let (done_read, done_write) = pipe();
    // SAFETY: forks a child that only uses the warm-memory statics and pipes, then `_exit`s.
    let holder = unsafe { libc::fork() };
    if holder == 0 {
        let code = std::panic::catch_unwind(|| {
            while !warm_memory::prefault(UNIT) {}
            let whole = warm_memory::take((4 * UNIT) as u64, 64).unwrap() as usize;
            assert_eq!(
                whole, first_address,
                "the first session's slab, claimed first"
            );
            assert!(all_zero(whole, 4), "the first session's data is scrubbed");
            // SAFETY: the whole arena was just taken by this process.
            unsafe { std::ptr::write_bytes(whole as *mut u8, 0x5A, 4 * UNIT) };
            send_word(held_write, whole as u64);
            receive_word(done_read);
        })
        .map_or(99, |()| 0);
        if code == 0 {
            // SAFETY: ends this process as a crash would, before any scrub.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let held = receive_word(held_read) as usize;
    let other = in_child(|| {
        let block = warm_memory::take(UNIT as u64, 64).expect("the other slab") as usize;
        i32::from(block == held || !all_zero(block, 1))
    });
    assert_eq!(other, 0, "the second slab, fresh");
    send_word(done_write, 1);
    let mut status = 0;
    // SAFETY: waits for the holder forked above.
    unsafe { libc::waitpid(holder, &mut status, 0) };
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
    assert_eq!(
        warm_memory::release_dead(holder as u32),
        1,
        "it died holding a slab"
    );
    assert_eq!(warm_memory::release_dead(holder as u32), 0);

    let third = in_child(|| {
        assert!(warm_memory::claim());
        assert!(
            warm_memory::prefault(UNIT),
            "a dropped slab: nothing to prefault"
        );
        let whole = warm_memory::take((4 * UNIT) as u64, 64).unwrap() as usize;
        i32::from(whole != held || !all_zero(whole, 4))
    });
    assert_eq!(third, 0, "the dead session's data is gone");
}
