//! How many threads the parallel pool has and which CPUs they run on.
//!
//! The size is, first found: the `nthreads` of `runtime.config_threadpool`, `TVM_NUM_THREADS`,
//! `OMP_NUM_THREADS`, the CPUs this process may run on (its affinity mask, which also reflects
//! a container's CPU set). The affinity modes are Apache TVM's numbers: `1` pins one worker per
//! core, fastest cores first (by `cpuinfo_max_freq`, CPU order when all are alike); `-1` the
//! same, slowest first; `-2` one worker per core of a given list; `-3` every worker on all cores
//! of a given list; `0` pins nothing. Worker `i` runs task `i + 1` and takes the `(i + 1)`-th core
//! of the order; the launching thread (task 0) keeps the affinity its program gave it.

use tvm_ffi::{ErrorKind, Result};

/// The most threads a pool may have.
pub const MAX_THREADS: usize = 1024;

/// Where the workers run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Affinity {
    /// Wherever the OS schedules them (mode 0).
    Unpinned,
    /// One core per worker, fastest cores first (mode 1).
    Big,
    /// One core per worker, slowest cores first (mode -1).
    Little,
    /// One core per worker, from this list in order (mode -2).
    OneCorePerThread(Vec<usize>),
    /// Every worker on all these cores (mode -3).
    SharedCores(Vec<usize>),
}

impl Affinity {
    /// The affinity of Apache TVM's mode number, with the core list modes -2 and -3 need.
    pub fn from_mode(mode: i64, cpus: Vec<usize>) -> Result<Affinity> {
        let needs_cpus = matches!(mode, -2 | -3);
        if !needs_cpus && !cpus.is_empty() {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "config_threadpool: affinity mode {mode} takes no cpus (got {cpus:?}); modes -2 \
                 and -3 do"
            );
        }
        Ok(match mode {
            0 => Affinity::Unpinned,
            1 => Affinity::Big,
            -1 => Affinity::Little,
            -2 | -3 if cpus.is_empty() => tvm_ffi::bail!(
                ErrorKind::ValueError,
                "config_threadpool: affinity mode {mode} needs a list of cpus"
            ),
            -2 => Affinity::OneCorePerThread(cpus),
            -3 => Affinity::SharedCores(cpus),
            other => tvm_ffi::bail!(
                ErrorKind::ValueError,
                "config_threadpool: unknown affinity mode {other} (0: none, 1: big cores, -1: \
                 little cores, -2: one core per thread from cpus, -3: all threads on cpus)"
            ),
        })
    }
}

/// The pool's settings before its threads exist.
#[derive(Clone, Debug)]
pub(crate) struct PoolConfig {
    affinity: Affinity,
    /// 0: from the environment.
    nthreads: usize,
}

impl PoolConfig {
    /// Settings from the environment alone.
    pub(crate) fn from_env() -> PoolConfig {
        PoolConfig {
            affinity: Affinity::Unpinned,
            nthreads: 0,
        }
    }

    /// Checked settings: the core lists name CPUs this process may run on.
    pub(crate) fn new(affinity: Affinity, nthreads: usize) -> Result<PoolConfig> {
        if nthreads > MAX_THREADS {
            tvm_ffi::bail!(
                ErrorKind::ValueError,
                "config_threadpool: nthreads must be at most {MAX_THREADS}, got {nthreads}"
            );
        }
        if let Affinity::OneCorePerThread(cpus) | Affinity::SharedCores(cpus) = &affinity {
            let allowed = allowed_cpus();
            if let Some(cpu) = cpus.iter().find(|cpu| !allowed.contains(cpu)) {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "config_threadpool: cpu {cpu} is not one this process may run on (allowed: \
                     {allowed:?})"
                );
            }
        }
        Ok(PoolConfig { affinity, nthreads })
    }

    /// The number of threads, the launching thread included.
    pub(crate) fn threads(&self) -> Result<usize> {
        if self.nthreads > 0 {
            return Ok(self.nthreads);
        }
        for variable in ["TVM_NUM_THREADS", "OMP_NUM_THREADS"] {
            if let Some(value) = std::env::var_os(variable) {
                let text = value.to_string_lossy();
                return match text.trim().parse::<usize>() {
                    Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
                    _ => tvm_ffi::bail!(
                        ErrorKind::ValueError,
                        "{variable} must be a whole number of threads from 1 to {MAX_THREADS}, \
                         got {text:?}"
                    ),
                };
            }
        }
        Ok(match &self.affinity {
            Affinity::OneCorePerThread(cpus) => cpus.len(),
            _ => allowed_cpus().len().max(1),
        }
        .min(MAX_THREADS))
    }

    /// The core set of each worker, for a pool of `threads`.
    pub(crate) fn affinity(&self, threads: usize) -> Result<WorkerAffinity> {
        let order = match &self.affinity {
            Affinity::Unpinned => return Ok(WorkerAffinity::default()),
            Affinity::SharedCores(cpus) => {
                return Ok(WorkerAffinity {
                    per_worker: vec![cpus.clone(); threads.saturating_sub(1)],
                });
            }
            Affinity::OneCorePerThread(cpus) => cpus.clone(),
            Affinity::Big => cpus_by_speed(true),
            Affinity::Little => cpus_by_speed(false),
        };
        let per_worker = (1..threads)
            .map(|task| vec![order[task % order.len()]])
            .collect();
        Ok(WorkerAffinity { per_worker })
    }
}

/// The core set each worker pins itself to (empty: not pinned).
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkerAffinity {
    per_worker: Vec<Vec<usize>>,
}

impl WorkerAffinity {
    /// Pins the calling thread, worker `worker`, to its cores (a failure leaves it unpinned).
    pub(crate) fn pin_worker(&self, worker: usize) {
        if let Some(cpus) = self.per_worker.get(worker) {
            set_thread_affinity(cpus);
        }
    }
}

/// The CPUs the calling thread may run on, in order.
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is an empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return (0..std::thread::available_parallelism().map_or(1, usize::from)).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The CPUs the calling thread may run on, in order.
#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    (0..std::thread::available_parallelism().map_or(1, usize::from)).collect()
}

#[cfg(target_os = "linux")]
fn set_thread_affinity(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.iter().filter(|&&cpu| cpu < libc::CPU_SETSIZE as usize) {
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a cpu_set_t of the size passed; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

#[cfg(not(target_os = "linux"))]
fn set_thread_affinity(_cpus: &[usize]) {}

/// The allowed CPUs ordered by their highest clock (`fastest_first` or slowest first); CPUs
/// with the same clock, or none reported, keep their order.
fn cpus_by_speed(fastest_first: bool) -> Vec<usize> {
    let mut cpus: Vec<(usize, u64)> = allowed_cpus()
        .into_iter()
        .map(|cpu| {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq");
            let khz = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .unwrap_or(0);
            (cpu, khz)
        })
        .collect();
    if fastest_first {
        cpus.sort_by_key(|&(_, khz)| std::cmp::Reverse(khz));
    } else {
        cpus.sort_by_key(|&(_, khz)| khz);
    }
    cpus.into_iter().map(|(cpu, _)| cpu).collect()
}
