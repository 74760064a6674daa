//! What the device benchmarks share: timing in interleaved rounds, and the add-one kernel they
//! launch (the shaders of the backends' own tests, with the metadata the runtime reads).
//!
//! Binaries: `copy` (64 MiB copies against `memcpy`) and `launch` (launch overhead against bare
//! `ash` and `wgpu` programs). Run with `cargo run --release -p device-bench --bin <name>`.

pub mod bare_vulkan;
pub mod bare_wgpu;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use device_kit::kernel::FunctionInfo;
use tvm_ffi::DataType;

// The binaries link the runtime's process state through this library.
use tvm_ffi_capi as _;

/// Best and median of a set of timings.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// The fastest run.
    pub best: Duration,
    /// The middle run.
    pub median: Duration,
}

impl Summary {
    /// The summary of `times` (not empty).
    pub fn of(mut times: Vec<Duration>) -> Summary {
        times.sort();
        Summary {
            best: times[0],
            median: times[times.len() / 2],
        }
    }
}

/// Wall-clock and processor time of a set of runs.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// Elapsed time.
    pub wall: Summary,
    /// Processor time of the whole process (every thread, the driver's included): less
    /// sensitive than wall time to other programs on a shared machine.
    pub cpu: Summary,
}

/// Processor time used so far by every thread of this process.
pub fn process_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Runs each contender once to warm up, then `rounds` rounds in which every contender runs once
/// in turn (A B A B ...), so that slow phases of a shared machine hit all of them alike. A
/// contender's run should end with its work done (waited for), so that processor time counts
/// it all.
pub fn interleaved(rounds: usize, contenders: &mut [&mut dyn FnMut()]) -> Vec<Timings> {
    for run in contenders.iter_mut() {
        run();
    }
    let mut wall = vec![Vec::with_capacity(rounds); contenders.len()];
    let mut cpu = wall.clone();
    for _ in 0..rounds {
        for (i, run) in contenders.iter_mut().enumerate() {
            let (start, start_cpu) = (Instant::now(), process_cpu_time());
            run();
            cpu[i].push(process_cpu_time().saturating_sub(start_cpu));
            wall[i].push(start.elapsed());
        }
    }
    wall.into_iter()
        .zip(cpu)
        .map(|(wall, cpu)| Timings {
            wall: Summary::of(wall),
            cpu: Summary::of(cpu),
        })
        .collect()
}

/// The directory of this workspace's crates.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates")
}

/// The metadata of `add_one(a, b, n)`, launched with `blockIdx.x` and `threadIdx.x` (64).
pub fn add_one_info() -> FunctionInfo {
    FunctionInfo {
        name: "add_one".into(),
        arg_types: vec![DataType::handle(), DataType::handle(), DataType::int(32)],
        launch_param_tags: vec!["blockIdx.x".into(), "threadIdx.x".into()],
        arg_extra_tags: vec![],
    }
}

/// The WGSL source of `add_one` (the WebGPU backend's test shader).
pub fn add_one_wgsl() -> std::io::Result<String> {
    std::fs::read_to_string(crates_dir().join("device-webgpu/tests/shaders/add_one.wgsl"))
}

/// The SPIR-V words of `add_one` (the Vulkan backend's test shader), compiled with
/// `glslangValidator` (Debian: glslang-tools) into `scratch`.
pub fn add_one_spirv(scratch: &Path) -> Result<Vec<u32>, String> {
    let source = crates_dir().join("device-vulkan/tests/shaders/add_one.comp");
    let out = scratch.join("add_one.spv");
    let output = Command::new("glslangValidator")
        .args(["-V", "--target-env", "vulkan1.1", "-e", "add_one"])
        .args(["--source-entrypoint", "main", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
        .map_err(|e| format!("glslangValidator is needed (Debian: glslang-tools): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "glslangValidator failed on {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stdout)
        ));
    }
    let bytes = std::fs::read(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

/// Microseconds per operation of `d` over `ops` operations.
pub fn micros_per(d: Duration, ops: usize) -> f64 {
    d.as_secs_f64() * 1e6 / ops as f64
}
