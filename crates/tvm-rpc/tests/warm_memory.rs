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

#[test]
fn sessions_share_a_slab_but_never_its_data() {
    assert!(warm_memory::reserve(65, UNIT).is_err(), "too many slabs");
    warm_memory::reserve(2, 4 * UNIT - 1).expect("reserve");
    assert_eq!(warm_memory::slab_count(), 2);
    assert!(warm_memory::reserve(1, UNIT).is_err(), "reserved twice");
    assert!(warm_memory::adopt(Some(2)).is_err(), "no slab 2");
    assert_eq!(
        warm_memory::take(UNIT as u64, 64),
        None,
        "the zygote has no arena"
    );

    // A session fills the slab, frees a block, reuses it, and scrubs at its end.
    let first = in_child(|| {
        warm_memory::adopt(Some(0)).unwrap();
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
        assert_eq!(warm_memory::scrub(), 4 * UNIT);
        assert_eq!(warm_memory::take(1, 64), None, "nothing after the scrub");
        0
    });
    assert_eq!(first, 0);
    assert!(warm_memory::release(0).unwrap(), "left clean");

    // The next session finds it zeroed and prefaults what the first one touched; then it dies
    // without scrubbing.
    let second = in_child(|| {
        warm_memory::adopt(Some(0)).unwrap();
        while !warm_memory::prefault(UNIT) {}
        assert_eq!(warm_memory::take(0, 64), None, "an empty request");
        let whole = warm_memory::take((4 * UNIT) as u64, 64).unwrap() as usize;
        assert!(all_zero(whole, 4), "the first session's data is scrubbed");
        // SAFETY: the whole arena was just taken by this process.
        unsafe { std::ptr::write_bytes(whole as *mut u8, 0x5A, 4 * UNIT) };
        // SAFETY: ends this process as a crash would, before any scrub.
        unsafe { libc::raise(libc::SIGKILL) };
        1
    });
    assert_eq!(second, -libc::SIGKILL);
    assert!(!warm_memory::release(0).unwrap(), "left dirty: replaced");
    assert!(warm_memory::release(1).unwrap(), "never adopted");
    assert!(warm_memory::release(2).is_err());

    let third = in_child(|| {
        warm_memory::adopt(Some(0)).unwrap();
        assert!(
            warm_memory::prefault(UNIT),
            "a fresh slab: nothing to prefault"
        );
        let whole = warm_memory::take((4 * UNIT) as u64, 64).unwrap() as usize;
        i32::from(!all_zero(whole, 4))
    });
    assert_eq!(third, 0, "the dead session's data is gone");
}
