//! Locks for the shared-mutable containers (`ffi.List`, `ffi.Dict`).
//!
//! Python threads share these objects and a native function may run without the interpreter
//! lock while another thread mutates its argument, so every access through this crate's safe
//! API holds the object's lock for the length of one operation. The lock lives outside the
//! object (a stripe chosen by address), so the C layout the header defines is unchanged. The
//! locks themselves are process state, kept once by the runtime library
//! (`tvm/ffi/extra/shared_state.h`): every library built with this crate has a copy of its code,
//! and all of them must take the same lock for the same container.
//!
//! Under a lock only short, self-contained work runs: reading or writing slots and taking
//! references. Values that leave a container are dropped after the lock is released, because
//! dropping may run arbitrary code (a Python object's destructor). Key hashing and equality
//! hooks may run under the lock; the lock is reentrant, so a hook that reads the same container
//! on the same thread does not deadlock, and a hook that mutates it is refused with a panic
//! (which every C and Python boundary turns into an error).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// Number of container locks (stripes of addresses): enough that unrelated containers rarely
/// share one.
pub const CONTAINER_LOCK_STRIPES: usize = 64;

/// Times a thread retries a held lock before it sleeps (a container operation is short).
const SPINS: u32 = 100;

/// A lock that the thread holding it may take again (the std library's is unstable). It guards
/// no data of its own: holders protect what they agree it protects.
///
/// Taking and releasing a free lock is one atomic exchange each, with no system call: only a
/// thread that finds the lock held past a short spin sleeps, on `sleep`, and only then does a
/// release wake anyone.
pub struct ReentrantLock {
    /// The token of the holding thread ([`crate::thread::current_token`]), 0 when free.
    owner: AtomicUsize,
    /// How many times the holder holds it (read and written by the holder only).
    depth: AtomicU32,
    /// Threads asleep (or about to sleep) waiting for the lock.
    sleepers: AtomicU32,
    /// Where the sleepers sleep.
    sleep: Mutex<()>,
    free: Condvar,
}

/// Holds a [`ReentrantLock`] until dropped.
pub struct ReentrantGuard<'a> {
    lock: &'a ReentrantLock,
    depth: u32,
}

impl ReentrantGuard<'_> {
    /// How many times the holding thread holds the lock, this hold included (1: outermost).
    pub fn depth(&self) -> u32 {
        self.depth
    }
}

impl Drop for ReentrantGuard<'_> {
    fn drop(&mut self) {
        self.lock.release_raw();
    }
}

impl Default for ReentrantLock {
    fn default() -> Self {
        ReentrantLock::new()
    }
}

impl ReentrantLock {
    /// An unlocked lock.
    pub const fn new() -> ReentrantLock {
        ReentrantLock {
            owner: AtomicUsize::new(0),
            depth: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            sleep: Mutex::new(()),
            free: Condvar::new(),
        }
    }

    /// Takes the lock for the calling thread: at once when it already holds it, otherwise
    /// after the holder releases it.
    pub fn lock(&self) -> ReentrantGuard<'_> {
        let depth = self.acquire_raw();
        ReentrantGuard { lock: self, depth }
    }

    /// Takes the lock for the calling thread if it is free or already this thread's; `None`
    /// when another thread holds it.
    pub fn try_lock(&self) -> Option<ReentrantGuard<'_>> {
        let me = crate::thread::current_token();
        if self.owner.load(Ordering::Relaxed) == me {
            return Some(self.lock());
        }
        if !self.try_take(me) {
            return None;
        }
        self.depth.store(1, Ordering::Relaxed);
        Some(ReentrantGuard {
            lock: self,
            depth: 1,
        })
    }

    /// Takes the lock for this thread without a guard; returns the new depth. Each call is
    /// paired with one [`ReentrantLock::release_raw`] on the same thread (the process state's
    /// container locks are taken and released through C calls, where no guard can travel).
    #[inline]
    pub fn acquire_raw(&self) -> u32 {
        let me = crate::thread::current_token();
        // Only this thread ever stores its own token, so seeing it means holding the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            let depth = self.depth.load(Ordering::Relaxed) + 1;
            self.depth.store(depth, Ordering::Relaxed);
            return depth;
        }
        if !self.try_take(me) {
            self.wait_for(me);
        }
        self.depth.store(1, Ordering::Relaxed);
        1
    }

    fn try_take(&self, me: usize) -> bool {
        self.owner
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock another thread holds: spins briefly, then sleeps until a release.
    #[cold]
    fn wait_for(&self, me: usize) {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            if self.owner.load(Ordering::Relaxed) == 0 && self.try_take(me) {
                return;
            }
        }
        let mut asleep = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        // Counted before the last try: a holder that releases after that try sees the count and
        // wakes this thread, which cannot miss it, since it holds `sleep` until it waits.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !self.try_take(me) {
            asleep = self
                .free
                .wait(asleep)
                .unwrap_or_else(PoisonError::into_inner);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Gives up one hold taken by [`ReentrantLock::acquire_raw`] on this thread.
    #[inline]
    pub fn release_raw(&self) {
        let depth = self.depth.load(Ordering::Relaxed) - 1;
        self.depth.store(depth, Ordering::Relaxed);
        if depth == 0 {
            self.owner.store(0, Ordering::SeqCst);
            if self.sleepers.load(Ordering::SeqCst) != 0 {
                self.wake_one();
            }
        }
    }

    #[cold]
    fn wake_one(&self) {
        // Taking `sleep` orders the wake after the sleeper's wait began.
        drop(self.sleep.lock().unwrap_or_else(PoisonError::into_inner));
        self.free.notify_one();
    }
}

/// The container lock (of [`CONTAINER_LOCK_STRIPES`]) that guards the object at `object`.
pub fn stripe_of(object: *const ()) -> usize {
    // Objects are at least 8-byte aligned; mix the bits above that.
    let address = object as usize >> 4;
    (address ^ (address >> 6) ^ (address >> 12)) % CONTAINER_LOCK_STRIPES
}

/// The lock of one container object, held until dropped.
pub(crate) struct ObjectLock {
    object: *const (),
    depth: u32,
}

impl ObjectLock {
    /// Locks the container at `object` for the calling thread (reentrant).
    pub(crate) fn acquire(object: *const ()) -> ObjectLock {
        // SAFETY: the function only hashes the address; any value is accepted.
        let depth = unsafe { crate::abi::TVMFFIExtContainerLock(object.cast()) };
        // Fails only by a panic inside the runtime, which it has reported in the error slot.
        let depth = u32::try_from(depth).expect("the runtime failed to take a container lock");
        ObjectLock { object, depth }
    }

    /// Locks two containers without deadlocking against a thread that locks them the other
    /// way round (stripes are always taken in increasing order).
    pub(crate) fn acquire_pair(a: *const (), b: *const ()) -> (ObjectLock, ObjectLock) {
        if stripe_of(a) <= stripe_of(b) {
            let first = ObjectLock::acquire(a);
            (first, ObjectLock::acquire(b))
        } else {
            let second = ObjectLock::acquire(b);
            (ObjectLock::acquire(a), second)
        }
    }

    /// Asserts that this is the outermost hold of the lock on this thread: a mutation from
    /// inside a hook that runs while the same container is being read would invalidate the
    /// reader's position.
    pub(crate) fn for_mutation(self, what: &str) -> ObjectLock {
        assert!(
            self.depth == 1,
            "{what}: the container was mutated by a hash or equality hook while it was in use"
        );
        self
    }
}

impl Drop for ObjectLock {
    fn drop(&mut self) {
        // SAFETY: this thread holds the lock of `object`, taken in `acquire`.
        unsafe { crate::abi::TVMFFIExtContainerUnlock(self.object.cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reentrant_on_one_thread_exclusive_across_threads() {
        let address = 0x1000usize;
        let outer = ObjectLock::acquire(address as *const ());
        let inner = ObjectLock::acquire(address as *const ());
        assert_eq!((outer.depth, inner.depth), (1, 2));
        let acquired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (started, start) = std::sync::mpsc::channel();
        let other = {
            let acquired = std::sync::Arc::clone(&acquired);
            std::thread::spawn(move || {
                started.send(()).unwrap();
                let _lock = ObjectLock::acquire(address as *const ());
                acquired.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        // However late the other thread runs, it cannot hold the lock while this one does.
        start.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!acquired.load(std::sync::atomic::Ordering::SeqCst));
        drop(inner);
        drop(outer);
        other.join().unwrap();
        assert!(acquired.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn try_lock_takes_a_free_or_own_lock_and_refuses_another_threads() {
        let lock = std::sync::Arc::new(ReentrantLock::new());
        let outer = lock.try_lock().expect("a free lock");
        let inner = lock.try_lock().expect("this thread's own lock");
        assert_eq!((outer.depth(), inner.depth()), (1, 2));
        let other = std::sync::Arc::clone(&lock);
        assert!(
            std::thread::spawn(move || other.try_lock().is_none())
                .join()
                .unwrap()
        );
        drop(inner);
        drop(outer);
        let other = std::sync::Arc::clone(&lock);
        assert!(
            std::thread::spawn(move || other.try_lock().is_some())
                .join()
                .unwrap()
        );
    }

    #[test]
    fn contended_holders_exclude_each_other_and_none_sleeps_forever() {
        use std::sync::atomic::AtomicU64;
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 20_000;
        let lock = std::sync::Arc::new(ReentrantLock::new());
        // A read and a separate write: a second holder at the same time would lose counts.
        let count = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (lock, count) = (lock.clone(), count.clone());
                std::thread::spawn(move || {
                    for round in 0..ROUNDS {
                        let _held = lock.lock();
                        let seen = count.load(Ordering::Relaxed);
                        if round % 1000 == 0 {
                            // Long enough that the others give up spinning and sleep.
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        count.store(seen + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), THREADS * ROUNDS);
        assert_eq!(lock.sleepers.load(Ordering::Relaxed), 0);
        assert_eq!(lock.lock().depth(), 1, "free again");
    }

    #[test]
    #[should_panic(expected = "mutated by a hash or equality hook")]
    fn nested_mutation_is_refused() {
        let object = 0x2000 as *const ();
        let _reader = ObjectLock::acquire(object);
        let _ = ObjectLock::acquire(object).for_mutation("test");
    }

    #[test]
    fn pairs_locked_in_opposite_orders_do_not_deadlock() {
        let a = 0x3000usize;
        let b = (1..)
            .map(|i| a + 16 * i)
            .find(|&b| stripe_of(b as *const ()) != stripe_of(a as *const ()))
            .unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        for (first, second) in [(a, b), (b, a)] {
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let pair = ObjectLock::acquire_pair(first as *const (), second as *const ());
                    assert_eq!(pair.0.depth + pair.1.depth, 2);
                }
                done.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            finished
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("two threads locking the same pair in opposite orders deadlocked");
        }
    }
}
