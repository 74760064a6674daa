//! 64 MiB copies host→device and device→host through the runtime's device registry on
//! `vulkan:0` and `webgpu:0`, against a `memcpy` of the same size in the same process, in
//! interleaved rounds (GB/s, median and best). Issue 12's target: at least 0.8x `memcpy`.
//!
//! `cargo run --release -p device-bench --bin copy [-- --rounds 9 --backend all]`

use device_bench::{Summary, interleaved};
use tvm_ffi::abi::DLTensor;
use tvm_ffi::{DataType, Device, Tensor};
use tvm_runtime::device::{TensorDeviceExt, copy_tensor, empty_on};

const BYTES: usize = 64 << 20;
const FLOATS: usize = BYTES / 4;

/// A device tensor and host buffers written before (as `memcpy`'s are), not fresh pages.
struct Copies {
    tensor: Tensor,
    host: Vec<f32>,
    back: Vec<f32>,
    shape: [i64; 1],
}

impl Copies {
    fn new(device: Device) -> tvm_ffi::Result<Copies> {
        Ok(Copies {
            tensor: empty_on(&[FLOATS as i64], DataType::float(32), device)?,
            host: (0..FLOATS).map(|i| i as f32).collect(),
            back: vec![0f32; FLOATS],
            shape: [FLOATS as i64],
        })
    }

    fn copy_to_device(&self) {
        self.tensor
            .copy_from_slice(&self.host)
            .expect("host to device");
    }

    fn copy_to_host(&mut self) {
        let into_back = DLTensor {
            data: self.back.as_mut_ptr().cast(),
            device: Device::cpu(0).0,
            ndim: 1,
            dtype: DataType::float(32).0,
            shape: self.shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        // SAFETY: both tensors are alive for the synchronous copy; `back` holds FLOATS floats.
        unsafe { copy_tensor(self.tensor.dltensor(), &into_back, None, true) }
            .expect("device to host");
    }
}

fn register(backend: &str) -> tvm_ffi::Result<Device> {
    Ok(match backend {
        "vulkan" => {
            device_vulkan::register()?;
            Device::vulkan(0)
        }
        _ => {
            device_webgpu::register()?;
            Device::webgpu(0)
        }
    })
}

fn parse_options() -> Result<(usize, Vec<&'static str>), String> {
    let (mut rounds, mut backends) = (9, vec!["vulkan", "webgpu"]);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rounds" => rounds = value.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--backend" => {
                backends = match value.as_str() {
                    "all" => backends,
                    "vulkan" => vec!["vulkan"],
                    "webgpu" => vec!["webgpu"],
                    other => {
                        return Err(format!("unknown backend '{other}' (vulkan, webgpu, all)"));
                    }
                }
            }
            other => return Err(format!("unknown option '{other}' (--rounds, --backend)")),
        }
    }
    if rounds == 0 {
        return Err("--rounds must be positive".into());
    }
    Ok((rounds, backends))
}

fn main() {
    let (rounds, backends) = parse_options().unwrap_or_else(|e| {
        eprintln!("copy: {e}");
        std::process::exit(2);
    });
    println!(
        "64 MiB float32, GB/s: median (best) of {rounds} interleaved rounds with a memcpy of the \
         same size; target >= 0.80x memcpy"
    );
    let rate = |s: Summary| {
        let per = |d: std::time::Duration| BYTES as f64 / d.as_secs_f64() / 1e9;
        (per(s.median), per(s.best))
    };
    let mut failed = false;
    for backend in backends {
        let mut copies = match register(backend).and_then(Copies::new) {
            Ok(copies) => copies,
            Err(e) => {
                println!("{backend:<7} not measured: {e}");
                failed = true;
                continue;
            }
        };
        let mut sink = vec![0f32; FLOATS];
        let source = copies.host.clone();
        let timings = {
            let copies = std::cell::RefCell::new(&mut copies);
            interleaved(
                rounds,
                &mut [
                    &mut || {
                        sink.copy_from_slice(&source);
                        std::hint::black_box(&mut sink);
                    },
                    &mut || copies.borrow().copy_to_device(),
                    &mut || copies.borrow_mut().copy_to_host(),
                ],
            )
        };
        assert!(
            copies.back == copies.host,
            "the round trip changed the data"
        );
        let memcpy = rate(timings[0].wall);
        println!(
            "{backend:<7} memcpy        {:6.2} ({:6.2})",
            memcpy.0, memcpy.1
        );
        for (name, timing) in [("host->device", timings[1]), ("device->host", timings[2])] {
            let (median, best) = rate(timing.wall);
            let ratio = median / memcpy.0;
            println!(
                "{backend:<7} {name:<13} {median:6.2} ({best:6.2})  {ratio:.2}x ({:.2}x) memcpy: {}",
                best / memcpy.1,
                if ratio >= 0.8 { "pass" } else { "MISS" }
            );
        }
    }
    if failed {
        std::process::exit(1);
    }
}
