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

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Number of container locks (stripes of addresses): enough that unrelated containers rarely
/// share one.
pub const CONTAINER_LOCK_STRIPES: usize = 64;

/// A lock that the thread holding it may take again (the std library's is unstable). It guards
/// no data of its own: holders protect what they agree it protects.
pub struct ReentrantLock {
    state: Mutex<Owner>,
    free: Condvar,
}

/// Which thread holds a lock, and how many times.
#[derive(Clone, Copy)]
struct Owner {
    thread: usize,
    depth: u32,
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
            state: Mutex::new(Owner {
                thread: 0,
                depth: 0,
            }),
            free: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, Owner> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock for the calling thread: at once when it already holds it, otherwise
    /// after the holder releases it.
    pub fn lock(&self) -> ReentrantGuard<'_> {
        let depth = self.acquire_raw();
        ReentrantGuard { lock: self, depth }
    }

    /// Takes the lock for this thread without a guard; returns the new depth. Each call is
    /// paired with one [`ReentrantLock::release_raw`] on the same thread (the process state's
    /// container locks are taken and released through C calls, where no guard can travel).
    pub fn acquire_raw(&self) -> u32 {
        let me = crate::thread::current_token();
        let mut state = self.state();
        if state.thread != me {
            while state.thread != 0 {
                state = self
                    .free
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            state.thread = me;
        }
        state.depth += 1;
        state.depth
    }

    /// Gives up one hold taken by [`ReentrantLock::acquire_raw`] on this thread.
    pub fn release_raw(&self) {
        let mut state = self.state();
        state.depth -= 1;
        if state.depth == 0 {
            state.thread = 0;
            drop(state);
            self.free.notify_one();
        }
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
