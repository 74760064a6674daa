//! `TVMBackendParallelLaunch` and `TVMBackendParallelBarrier` on the process's [`ThreadPool`].
//!
//! One pool serves the process; launches from several threads take turns. A launch from inside
//! a task (a nested parallel loop) runs serially on the calling thread as one task, so it never
//! waits for threads that are busy running its parent. A task's non-zero return fails the launch
//! with the error that task raised (its kind and message), and releases the tasks waiting at a
//! barrier.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Mutex, Once, PoisonError};

use tvm_ffi::{Error, ErrorKind, Result};

use super::affinity::{Affinity, PoolConfig};
use super::thread_pool::{ThreadPool, in_task, set_in_task};

/// The group of tasks of one launch, as compiled kernels see it.
#[repr(C)]
pub struct TVMParallelGroupEnv {
    /// The launch's barrier (for `TVMBackendParallelBarrier`); NULL for a serial run.
    pub sync_handle: *mut c_void,
    /// The number of tasks of the launch.
    pub num_task: i32,
}

/// One task of a parallel loop: `flambda(task_id, penv, cdata)`, 0 on success.
pub type FTVMParallelLambda = unsafe extern "C" fn(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
    cdata: *mut c_void,
) -> c_int;

/// The process's pool, created on first use. A forked child gets a new one (its parent's
/// workers do not exist in the child; the old pool, whose lock may be held, is leaked).
static POOL: AtomicPtr<Mutex<PoolState>> = AtomicPtr::new(std::ptr::null_mut());

struct PoolState {
    config: PoolConfig,
    pool: Option<ThreadPool>,
}

fn pool_state() -> &'static Mutex<PoolState> {
    static AT_FORK: Once = Once::new();
    AT_FORK.call_once(|| {
        extern "C" fn forget_pool_in_child() {
            POOL.store(std::ptr::null_mut(), Ordering::SeqCst);
        }
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pool_in_child)) };
    });
    let current = POOL.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a non-NULL pointer is a leaked box, never freed.
        return unsafe { &*current };
    }
    let fresh = Box::into_raw(Box::new(Mutex::new(PoolState {
        config: PoolConfig::from_env(),
        pool: None,
    })));
    match POOL.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: `fresh` was just leaked and is now the published pool.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` was never published, so this is its only owner.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: `winner` is a leaked box, never freed.
            unsafe { &*winner }
        }
    }
}

impl PoolState {
    fn pool(&mut self) -> Result<&mut ThreadPool> {
        if self.pool.is_none() {
            let threads = self.config.threads()?;
            let affinity = self.config.affinity(threads)?;
            self.pool = Some(ThreadPool::new(threads, move |worker| {
                affinity.pin_worker(worker)
            })?);
        }
        Ok(self.pool.as_mut().expect("created above"))
    }
}

/// The number of threads a launch uses (the caller included).
pub fn num_threads() -> Result<usize> {
    let mut state = pool_state().lock().unwrap_or_else(PoisonError::into_inner);
    Ok(state.pool()?.threads())
}

/// Replaces the pool: `nthreads` threads (0: the default, from `TVM_NUM_THREADS`,
/// `OMP_NUM_THREADS` or the cores this process may run on), pinned as `affinity` says. The new
/// pool's workers start at once, so a bad setting is reported here.
pub fn config_threadpool(affinity: Affinity, nthreads: usize) -> Result<()> {
    let config = PoolConfig::new(affinity, nthreads)?;
    let mut state = pool_state().lock().unwrap_or_else(PoisonError::into_inner);
    state.pool = None;
    state.config = config;
    state.pool()?;
    Ok(())
}

/// A barrier among the tasks of one launch, with a way out when a task fails.
struct Barrier {
    /// [`BARRIER_MAGIC`], to refuse a `sync_handle` that is not ours.
    magic: u64,
    num_task: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
    failed: AtomicBool,
}

const BARRIER_MAGIC: u64 = 0x7476_6d5f_6261_7272;

impl Barrier {
    /// Waits until all `num_task` tasks arrived; `false` when a task of the launch failed.
    fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.num_task {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return true;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                // More tasks than free cores: let the others reach the barrier.
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        true
    }
}

/// Runs `flambda` as a parallel loop of `num_task` tasks (0: one per thread of the pool; more
/// than the pool has runs as many as it has: `penv->num_task` tells the tasks how many).
pub fn parallel_launch(
    flambda: FTVMParallelLambda,
    cdata: *mut c_void,
    num_task: i32,
) -> Result<()> {
    if num_task < 0 {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "TVMBackendParallelLaunch: num_task must be 0 (one per thread) or positive, got {num_task}"
        );
    }
    if in_task() || num_task == 1 {
        return run_serially(flambda, cdata);
    }
    let mut state = pool_state().lock().unwrap_or_else(PoisonError::into_inner);
    let pool = state.pool()?;
    let threads = pool.threads();
    let num_task = match num_task as usize {
        0 => threads,
        requested => requested.min(threads),
    };
    if num_task == 1 {
        drop(state);
        return run_serially(flambda, cdata);
    }
    let barrier = Barrier {
        magic: BARRIER_MAGIC,
        num_task: num_task as u32,
        arrived: AtomicU32::new(0),
        generation: AtomicU32::new(0),
        failed: AtomicBool::new(false),
    };
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let sync_handle = (&raw const barrier).cast_mut().cast::<c_void>();
    let shared = SharedWithTasks { cdata, sync_handle };
    let task = |task_id: usize| {
        let (cdata, sync_handle) = shared.get();
        let rc = call_task(flambda, task_id, num_task, sync_handle, cdata);
        if rc != 0 {
            let error = task_error(task_id, num_task, rc);
            failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(error);
            barrier.failed.store(true, Ordering::Release);
        } else if barrier.failed.load(Ordering::Acquire) {
            // A task released from the barrier by another's failure that returned 0 anyway:
            // the barrier's error stays out of the thread's slot.
            drop(Error::take_raised());
        }
    };
    pool.run(num_task, &task)?;
    drop(state);
    match failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// What every task of a launch receives: the kernel's closure data and the launch's barrier.
#[derive(Clone, Copy)]
struct SharedWithTasks {
    cdata: *mut c_void,
    sync_handle: *mut c_void,
}

impl SharedWithTasks {
    fn get(self) -> (*mut c_void, *mut c_void) {
        (self.cdata, self.sync_handle)
    }
}

// SAFETY: the closure data is made by the kernel for all its tasks, which run on any thread by
// the contract of `TVMBackendParallelLaunch`; the barrier is a set of atomics.
unsafe impl Sync for SharedWithTasks {}

/// One task that does all the work: `penv->num_task` is 1 and the barrier returns at once.
fn run_serially(flambda: FTVMParallelLambda, cdata: *mut c_void) -> Result<()> {
    let rc = call_task(flambda, 0, 1, std::ptr::null_mut(), cdata);
    if rc != 0 {
        return Err(task_error(0, 1, rc));
    }
    Ok(())
}

/// Runs task `task_id` of `num_task` on the calling thread, marked as inside a task (so that a
/// launch it makes runs serially); its return code.
fn call_task(
    flambda: FTVMParallelLambda,
    task_id: usize,
    num_task: usize,
    sync_handle: *mut c_void,
    cdata: *mut c_void,
) -> c_int {
    let mut env = TVMParallelGroupEnv {
        sync_handle,
        num_task: num_task as i32,
    };
    let was_in_task = set_in_task(true);
    // SAFETY: the kernel's task function, called as its signature says, with the closure data
    // it was launched with; `env` lives for the call and the barrier (if any) for the launch.
    let rc = unsafe { flambda(task_id as c_int, &mut env, cdata) };
    set_in_task(was_in_task);
    rc
}

/// The error a failed task raised in its thread, or one naming its return code.
fn task_error(task_id: usize, num_task: usize, rc: c_int) -> Error {
    Error::take_raised().unwrap_or_else(|| {
        Error::new(
            ErrorKind::RuntimeError,
            format!(
                "task {task_id} of a parallel launch of {num_task} returned {rc} without raising \
                 an error"
            ),
        )
    })
}

/// Waits for the other tasks of the launch `penv` describes.
///
/// # Safety
/// `penv` is NULL or the environment `TVMBackendParallelLaunch` passed to the calling task.
pub unsafe fn parallel_barrier(task_id: i32, penv: *const TVMParallelGroupEnv) -> Result<()> {
    // SAFETY: per the contract.
    let Some(env) = (unsafe { penv.as_ref() }) else {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "TVMBackendParallelBarrier: penv is NULL (task {task_id})"
        );
    };
    if env.num_task <= 1 {
        return Ok(());
    }
    // SAFETY: a launch of more than one task passes its barrier as `sync_handle`; the magic
    // number refuses a handle from somewhere else before any other field is used.
    let barrier = unsafe { env.sync_handle.cast::<Barrier>().as_ref() };
    let Some(barrier) = barrier.filter(|b| b.magic == BARRIER_MAGIC) else {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "TVMBackendParallelBarrier: penv->sync_handle {:p} is not the barrier of a launch \
             (task {task_id})",
            env.sync_handle
        );
    };
    if !barrier.wait() {
        tvm_ffi::bail!(
            ErrorKind::RuntimeError,
            "TVMBackendParallelBarrier: another task of the launch failed (task {task_id} \
             stops waiting)"
        );
    }
    Ok(())
}
