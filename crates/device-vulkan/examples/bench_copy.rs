//! 64 MiB copies host→device and device→host through the runtime's device registry, against a
//! `memcpy` of the same size in the same process (best and median of 9 runs, in GB/s).
//!
//! `cargo run --release -p device-vulkan --example bench_copy`

use std::time::{Duration, Instant};

use tvm_ffi::abi::DLTensor;
use tvm_ffi::{DataType, Device};
use tvm_ffi_capi as _;
use tvm_runtime::device::{TensorDeviceExt, copy_tensor, empty_on};

const BYTES: usize = 64 << 20;
const RUNS: usize = 9;

/// Best and median of `RUNS` timings of `f`, in GB/s of `BYTES`.
fn measure(mut f: impl FnMut()) -> (f64, f64) {
    f(); // warm: page faults, first-use set-up
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    let rate = |d: Duration| BYTES as f64 / d.as_secs_f64() / 1e9;
    (rate(times[0]), rate(times[RUNS / 2]))
}

fn main() -> tvm_ffi::Result<()> {
    device_vulkan::register()?;
    let device = Device::vulkan(0);
    let n = BYTES / 4;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut sink = vec![0f32; n];
    let tensor = empty_on(&[n as i64], DataType::float(32), device)?;

    let memcpy = measure(|| {
        sink.copy_from_slice(&host);
        std::hint::black_box(&mut sink);
    });
    let h2d = measure(|| tensor.copy_from_slice(&host).expect("host to device"));
    // Into a buffer written before (as `memcpy`'s), not fresh pages.
    let mut back = vec![0f32; n];
    let mut shape = [n as i64];
    let into_back = DLTensor {
        data: back.as_mut_ptr().cast(),
        device: Device::cpu(0).0,
        ndim: 1,
        dtype: DataType::float(32).0,
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let d2h = measure(|| {
        // SAFETY: both tensors are alive for the synchronous copy; `back` holds `n` floats.
        unsafe { copy_tensor(tensor.dltensor(), &into_back, None, true) }.expect("device to host")
    });
    assert!(back == host, "the round trip changed the data");

    println!("64 MiB, GB/s (best / median of {RUNS}), device: {}", {
        device_vulkan::registered_backend()
            .and_then(|api| api.device_names().ok())
            .and_then(|names| names.into_iter().next())
            .unwrap_or_default()
    });
    println!("memcpy          {:6.2} / {:6.2}", memcpy.0, memcpy.1);
    for (name, (best, median)) in [("host->device", h2d), ("device->host", d2h)] {
        println!(
            "{name:<15} {best:6.2} / {median:6.2}   ({:.2}x / {:.2}x memcpy)",
            best / memcpy.0,
            median / memcpy.1
        );
    }
    Ok(())
}
