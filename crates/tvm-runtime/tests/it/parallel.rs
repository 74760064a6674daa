//! Parallel launches and barriers through the runtime's own API (the C functions compiled kernels
//! reach through their slots): every task once, errors, barriers released by a failure, nested
//! launches, and the pool's settings. Tests run concurrently and share the one pool, so only the
//! settings test changes it, and the others read the task count from `penv`.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use tvm_ffi::Error;
use tvm_runtime::backend::{self, Affinity, TVMParallelGroupEnv};

/// Serializes the tests that change the pool against those that count its threads.
static POOL_SETTINGS: Mutex<()> = Mutex::new(());

struct Counts {
    runs: [AtomicUsize; 64],
    num_task: AtomicI32,
}

unsafe extern "C" fn count_task(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
    cdata: *mut c_void,
) -> c_int {
    // SAFETY: the launch passes the `Counts` below and a valid environment.
    let (counts, env) = unsafe { (&*cdata.cast::<Counts>(), &*penv) };
    counts.runs[task_id as usize].fetch_add(1, Ordering::SeqCst);
    counts.num_task.store(env.num_task, Ordering::SeqCst);
    // SAFETY: the environment of this task.
    unsafe { backend::parallel_barrier(task_id, penv) }.map_or(-1, |()| 0)
}

fn launch_counting(num_task: i32) -> (i32, Vec<usize>) {
    let counts = Counts {
        runs: std::array::from_fn(|_| AtomicUsize::new(0)),
        num_task: AtomicI32::new(0),
    };
    let cdata = (&raw const counts).cast_mut().cast();
    backend::parallel_launch(count_task, cdata, num_task).unwrap();
    let runs = counts
        .runs
        .iter()
        .map(|r| r.load(Ordering::SeqCst))
        .collect();
    (counts.num_task.load(Ordering::SeqCst), runs)
}

#[test]
fn every_task_runs_once() {
    let _settings = POOL_SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    let threads = backend::num_threads().unwrap() as i32;
    for requested in [0, 1, 2, threads, 64] {
        let (num_task, runs) = launch_counting(requested);
        let expected = if requested == 0 {
            threads
        } else {
            requested.min(threads)
        };
        assert_eq!(num_task, expected, "asked for {requested}");
        assert!(
            runs[..num_task as usize].iter().all(|&r| r == 1),
            "{runs:?}"
        );
        assert!(
            runs[num_task as usize..].iter().all(|&r| r == 0),
            "{runs:?}"
        );
    }
    let err = backend::parallel_launch(count_task, std::ptr::null_mut(), -4).unwrap_err();
    assert!(err.message().contains("got -4"), "{err}");
}

unsafe extern "C" fn fail_last(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
    _: *mut c_void,
) -> c_int {
    // SAFETY: a valid environment.
    let num_task = unsafe { (*penv).num_task };
    if task_id == num_task - 1 {
        Error::raise_from_str("KeyError", "the last task had no key");
        return -1;
    }
    // The others wait for a task that never arrives: the failure releases them.
    // SAFETY: the environment of this task.
    match unsafe { backend::parallel_barrier(task_id, penv) } {
        Ok(()) => 0,
        Err(err) => {
            err.set_raised();
            -1
        }
    }
}

unsafe extern "C" fn fail_silently(_: c_int, _: *mut TVMParallelGroupEnv, _: *mut c_void) -> c_int {
    7
}

#[test]
fn a_failed_task_fails_the_launch_with_its_error() {
    for _ in 0..20 {
        let err = backend::parallel_launch(fail_last, std::ptr::null_mut(), 0).unwrap_err();
        assert_eq!(err.kind(), "KeyError", "{err}");
        assert_eq!(err.message(), "the last task had no key");
    }
    let err = backend::parallel_launch(fail_silently, std::ptr::null_mut(), 0).unwrap_err();
    assert_eq!(err.kind(), "RuntimeError");
    assert!(
        err.message().contains("returned 7 without raising"),
        "{err}"
    );
    assert!(
        Error::take_raised().is_none(),
        "nothing is left in this thread's slot"
    );
}

unsafe extern "C" fn inner(
    task_id: c_int,
    penv: *mut TVMParallelGroupEnv,
    cdata: *mut c_void,
) -> c_int {
    // SAFETY: the launch passes an AtomicUsize and a valid environment.
    let (count, env) = unsafe { (&*cdata.cast::<AtomicUsize>(), &*penv) };
    assert!(task_id == 0 && env.num_task == 1 && env.sync_handle.is_null());
    count.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the environment of this task.
    unsafe { backend::parallel_barrier(task_id, penv) }.map_or(-1, |()| 0)
}

unsafe extern "C" fn outer(_: c_int, _: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> c_int {
    backend::parallel_launch(inner, cdata, 0).map_or(-1, |()| 0)
}

#[test]
fn nested_launches_run_serially_as_one_task() {
    let count = AtomicUsize::new(0);
    let cdata = (&raw const count).cast_mut().cast();
    let _settings = POOL_SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    backend::parallel_launch(outer, cdata, 0).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        backend::num_threads().unwrap()
    );
}

#[test]
fn a_barrier_refuses_what_no_launch_passed() {
    // SAFETY: NULL is allowed and refused.
    let err = unsafe { backend::parallel_barrier(0, std::ptr::null()) }.unwrap_err();
    assert!(err.message().contains("penv is NULL"), "{err}");
    let mut not_a_barrier = [0u64; 4];
    let env = TVMParallelGroupEnv {
        sync_handle: not_a_barrier.as_mut_ptr().cast(),
        num_task: 2,
    };
    // SAFETY: the handle points at readable memory that is not a barrier.
    let err = unsafe { backend::parallel_barrier(0, &env) }.unwrap_err();
    assert!(
        err.message().contains("not the barrier of a launch"),
        "{err}"
    );
    let single = TVMParallelGroupEnv {
        sync_handle: std::ptr::null_mut(),
        num_task: 1,
    };
    // SAFETY: a single task's barrier touches nothing.
    unsafe { backend::parallel_barrier(0, &single) }.unwrap();
}

#[test]
fn pool_settings_take_effect_and_pin_workers() {
    let _settings = POOL_SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    let cpus: Vec<usize> = (0..std::thread::available_parallelism().unwrap().get()).collect();
    let first = cpus[0];
    for (affinity, threads) in [
        (Affinity::Unpinned, 3),
        (Affinity::Big, 2),
        (Affinity::Little, 2),
        (Affinity::OneCorePerThread(vec![first]), 0),
        (Affinity::SharedCores(vec![first]), 3),
    ] {
        let expected = match (&affinity, threads) {
            (Affinity::OneCorePerThread(list), 0) => list.len(),
            _ => threads,
        };
        backend::config_threadpool(affinity.clone(), threads).unwrap();
        assert_eq!(backend::num_threads().unwrap(), expected, "{affinity:?}");
        let (num_task, runs) = launch_counting(0);
        assert_eq!(num_task as usize, expected);
        assert!(
            runs[..expected].iter().all(|&r| r == 1),
            "{affinity:?}: {runs:?}"
        );
    }
    backend::config_threadpool(Affinity::Unpinned, 0).unwrap();
}

#[test]
fn workspaces_are_aligned_reused_and_checked() {
    use tvm_ffi::abi::{kDLCPU, kDLFloat};
    let (before_live, _) = backend::thread_workspace_blocks();
    let blocks: Vec<*mut c_void> = [1u64, 100, 5000, 1 << 20]
        .iter()
        .map(|&n| backend::backend_alloc_workspace(kDLCPU, 0, n, kDLFloat as i32, 32))
        .collect();
    assert!(
        blocks
            .iter()
            .all(|b| !b.is_null() && (*b as usize).is_multiple_of(backend::WORKSPACE_ALIGNMENT))
    );
    assert_eq!(backend::thread_workspace_blocks().0, before_live + 4);
    for block in blocks.iter().rev() {
        assert_eq!(backend::backend_free_workspace(kDLCPU, 0, *block), 0);
    }
    assert_eq!(backend::thread_workspace_blocks(), (before_live, 4));
    assert_eq!(backend::backend_free_workspace(kDLCPU, 0, blocks[0]), -1);
    assert!(
        Error::take_raised()
            .unwrap()
            .message()
            .contains("freed already")
    );
    assert!(backend::backend_alloc_workspace(kDLCPU, 0, u64::MAX, kDLFloat as i32, 32).is_null());
    assert_eq!(Error::take_raised().unwrap().kind(), "MemoryError");
}
