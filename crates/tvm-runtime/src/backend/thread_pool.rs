//! A fork-join pool of worker threads for parallel launches.
//!
//! The pool runs task 0 of a launch on the calling thread and task `i` on worker `i - 1`: a fixed
//! mapping (static partitioning), so every task of a launch runs at the same time, which a
//! barrier among the tasks needs. A work-stealing pool (rayon) gives no such guarantee, and its
//! fork-join costs several microseconds more than a posted word and a spinning reader.
//!
//! A launch posts the job by bumping each needed worker's epoch. A worker spins on its epoch for
//! [`SPIN`] after its last task, so back-to-back launches (the loops of a model) cost a cache
//! line transfer, then parks; a parked worker is woken with one `unpark`. The launcher waits for
//! the workers the same way: spin, then park until the last worker wakes it.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use tvm_ffi::{Error, ErrorKind, Result};

/// How long an idle worker (or a waiting launcher) spins before it parks.
const SPIN: Duration = Duration::from_micros(500);

/// Spin iterations between two reads of the clock.
const SPINS_PER_CLOCK_READ: u32 = 1024;

/// One task of a launch, called with its task index.
pub(crate) type Job<'a> = &'a (dyn Fn(usize) + Sync);

/// The pool: `threads - 1` workers plus the launching thread.
pub(crate) struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<Worker>,
    epoch: u64,
}

/// State the launcher and every worker see. What the hot path touches sits on cache lines of
/// its own: each worker spins on its own slot, the launcher on [`Completion`].
struct Shared {
    completion: Completion,
    /// Whether a task of the current launch panicked (the job is expected never to).
    panicked: AtomicBool,
    /// The launcher to wake, set before it parks.
    launcher: Mutex<Option<Thread>>,
}

/// How the launcher learns that the workers are done.
#[repr(align(128))]
struct Completion {
    /// Workers of the current launch that have not finished their task.
    remaining: AtomicUsize,
    /// Whether the launcher is parked waiting for `remaining` to reach zero.
    launcher_sleeping: AtomicBool,
}

/// The launcher's side of one worker.
struct Worker {
    slot: Arc<WorkerSlot>,
    thread: Thread,
    handle: Option<JoinHandle<()>>,
}

/// What a worker watches, on a cache line of its own: a new epoch means a new task for it.
#[repr(align(128))]
struct WorkerSlot {
    epoch: AtomicU64,
    /// The current job: a pointer to a [`Job`] on the launcher's stack, valid until this worker
    /// has decremented `remaining`.
    job: AtomicPtr<()>,
    sleeping: AtomicBool,
}

/// The epoch that tells a worker to exit.
const SHUTDOWN: u64 = u64::MAX;

impl ThreadPool {
    /// A pool of `threads` threads (the caller of [`ThreadPool::run`] included). `pin(i)` runs
    /// first on worker `i` (task `i + 1`), to set its CPU affinity.
    pub(crate) fn new(
        threads: usize,
        pin: impl Fn(usize) + Send + Sync + Clone + 'static,
    ) -> Result<ThreadPool> {
        let shared = Arc::new(Shared {
            completion: Completion {
                remaining: AtomicUsize::new(0),
                launcher_sleeping: AtomicBool::new(false),
            },
            panicked: AtomicBool::new(false),
            launcher: Mutex::new(None),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(threads.saturating_sub(1)),
            epoch: 0,
        };
        for index in 0..threads.saturating_sub(1) {
            let slot = Arc::new(WorkerSlot {
                epoch: AtomicU64::new(0),
                job: AtomicPtr::new(std::ptr::null_mut()),
                sleeping: AtomicBool::new(false),
            });
            let (worker_slot, shared, pin) = (slot.clone(), pool.shared.clone(), pin.clone());
            let handle = thread::Builder::new()
                .name(format!("tvm-worker-{index}"))
                .spawn(move || {
                    pin(index);
                    worker_loop(index, &worker_slot, &shared);
                })
                .map_err(|e| {
                    Error::new(
                        ErrorKind::RuntimeError,
                        format!(
                            "cannot start worker thread {} of a pool of {threads}: {e}",
                            index + 1
                        ),
                    )
                })?;
            pool.workers.push(Worker {
                slot,
                thread: handle.thread().clone(),
                handle: Some(handle),
            });
        }
        Ok(pool)
    }

    /// The number of threads a launch can use, the caller included.
    pub(crate) fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `job(0)` here and `job(1..num_task)` on the workers; returns when all have returned.
    /// `num_task` is at least 1 and at most [`ThreadPool::threads`]. Returns an error if a task
    /// panicked (the rest still ran).
    pub(crate) fn run(&mut self, num_task: usize, job: Job<'_>) -> Result<()> {
        debug_assert!((1..=self.threads()).contains(&num_task));
        let mut panicked = false;
        if num_task > 1 {
            let shared = &*self.shared;
            shared.panicked.store(false, Ordering::Relaxed);
            shared
                .completion
                .remaining
                .store(num_task - 1, Ordering::Relaxed);
            // A worker reads the job through this pointer only between seeing the new epoch and
            // decrementing `remaining`, which this function waits for before `job` goes away.
            let job_ptr = (&raw const job).cast_mut().cast::<()>();
            self.epoch += 1;
            for worker in &self.workers[..num_task - 1] {
                worker.slot.job.store(job_ptr, Ordering::Relaxed);
                worker.slot.epoch.store(self.epoch, Ordering::SeqCst);
                if worker.slot.sleeping.load(Ordering::SeqCst) {
                    worker.thread.unpark();
                }
            }
            panicked |= catch_unwind(AssertUnwindSafe(|| job(0))).is_err();
            wait_for_workers(shared);
            panicked |= shared.panicked.load(Ordering::Relaxed);
        } else {
            panicked |= catch_unwind(AssertUnwindSafe(|| job(0))).is_err();
        }
        if panicked {
            return Err(Error::new(
                ErrorKind::InternalError,
                "a task of a parallel launch panicked",
            ));
        }
        Ok(())
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.slot.epoch.store(SHUTDOWN, Ordering::SeqCst);
            worker.thread.unpark();
            if let Some(handle) = worker.handle.take() {
                let _ = handle.join();
            }
        }
    }
}

/// Spins, then parks, until every worker of the launch has finished.
fn wait_for_workers(shared: &Shared) {
    let completion = &shared.completion;
    let done = || completion.remaining.load(Ordering::Acquire) == 0;
    if spin_until(done) {
        return;
    }
    *shared
        .launcher
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(thread::current());
    loop {
        completion.launcher_sleeping.store(true, Ordering::SeqCst);
        if completion.remaining.load(Ordering::SeqCst) == 0 {
            break;
        }
        thread::park();
    }
    completion.launcher_sleeping.store(false, Ordering::Relaxed);
}

/// Spins for up to [`SPIN`] until `ready()`; whether it became ready.
/// The clock is first read after one round of spins: a wait that ends sooner (the common case
/// of a loop of launches) never reads it.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let mut start = None;
    loop {
        for _ in 0..SPINS_PER_CLOCK_READ {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        let start = *start.get_or_insert_with(Instant::now);
        if start.elapsed() > SPIN {
            return ready();
        }
    }
}

thread_local! {
    /// Whether this thread is running a task of a launch (a pool's workers always are).
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running a task of a launch (a launch from it runs serially).
pub(crate) fn in_task() -> bool {
    IN_TASK.with(Cell::get)
}

/// Sets whether the calling thread is running a task; returns what it was.
pub(crate) fn set_in_task(running: bool) -> bool {
    IN_TASK.with(|flag| flag.replace(running))
}

fn worker_loop(index: usize, slot: &WorkerSlot, shared: &Shared) {
    set_in_task(true);
    let completion = &shared.completion;
    let mut seen = 0;
    loop {
        seen = wait_for_epoch(slot, seen);
        if seen == SHUTDOWN {
            return;
        }
        let job = slot
            .job
            .load(Ordering::Relaxed)
            .cast_const()
            .cast::<Job<'_>>();
        // SAFETY: the launcher stored a pointer to its `Job` before publishing this epoch (the
        // acquire load of the epoch orders it) and keeps it alive until `remaining` reaches 0.
        let job = unsafe { *job };
        if catch_unwind(AssertUnwindSafe(|| job(index + 1))).is_err() {
            shared.panicked.store(true, Ordering::Relaxed);
        }
        if completion.remaining.fetch_sub(1, Ordering::SeqCst) == 1
            && completion.launcher_sleeping.load(Ordering::SeqCst)
            && let Some(launcher) = shared
                .launcher
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
        {
            launcher.unpark();
        }
    }
}

/// Waits for an epoch other than `seen` (spinning, then parked) and returns it.
fn wait_for_epoch(slot: &WorkerSlot, seen: u64) -> u64 {
    if !spin_until(|| slot.epoch.load(Ordering::Acquire) != seen) {
        loop {
            slot.sleeping.store(true, Ordering::SeqCst);
            if slot.epoch.load(Ordering::SeqCst) != seen {
                break;
            }
            thread::park();
        }
        slot.sleeping.store(false, Ordering::Relaxed);
    }
    slot.epoch.load(Ordering::Acquire)
}
