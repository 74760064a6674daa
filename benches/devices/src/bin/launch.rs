//! Kernel launch overhead: `add_one` on one work group launched through the runtime's packed
//! call (the Vulkan and WebGPU backends) against a bare `ash` or `wgpu` program dispatching the
//! same shader on the same device, in interleaved rounds of the same run. Each run launches
//! `--launches` times and waits for the last; the table gives microseconds per launch (best and
//! median of `--rounds`) and the ratio (issue 12's target: at most 1.2x).
//!
//! `cargo run --release -p device-bench --bin launch [-- --launches 2048 --rounds 7 --backend all]`

use device_bench::bare_vulkan::BareVulkan;
use device_bench::bare_wgpu::BareWgpu;
use device_bench::{
    Summary, Timings, add_one_info, add_one_spirv, add_one_wgsl, interleaved, micros_per,
};
use tvm_ffi::{Any, AnyView, DataType, Device, Function, Tensor};
use tvm_runtime::device::{TensorDeviceExt, empty_on, sync_stream};

/// Floats per buffer: one work group of 64.
const ELEMENTS: usize = 64;

struct Options {
    launches: usize,
    rounds: usize,
    backends: Vec<String>,
    /// Run one side only (`runtime` or `baseline`), for counting instructions with callgrind.
    only: Option<String>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        launches: 2048,
        rounds: 7,
        backends: vec!["vulkan".into(), "webgpu".into()],
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--launches" => options.launches = value()?.parse().map_err(|e| format!("{e}"))?,
            "--rounds" => options.rounds = value()?.parse().map_err(|e| format!("{e}"))?,
            "--backend" => {
                options.backends = match value()?.as_str() {
                    "all" => options.backends,
                    b @ ("vulkan" | "webgpu") => vec![b.to_owned()],
                    other => {
                        return Err(format!("unknown backend '{other}' (vulkan, webgpu, all)"));
                    }
                }
            }
            "--only" => {
                options.only = match value()?.as_str() {
                    side @ ("runtime" | "baseline") => Some(side.to_owned()),
                    other => {
                        return Err(format!("--only takes runtime or baseline, not '{other}'"));
                    }
                }
            }
            other => {
                return Err(format!(
                    "unknown option '{other}' (--launches, --rounds, --backend, --only)"
                ));
            }
        }
    }
    if options.launches == 0 || options.rounds == 0 {
        return Err("--launches and --rounds must be positive".into());
    }
    Ok(options)
}

/// `add_one` through the runtime on `device`: the kernel and its two tensors.
struct RuntimeKernel {
    device: Device,
    function: Function,
    a: Tensor,
    b: Tensor,
}

impl RuntimeKernel {
    fn new(device: Device, module: tvm_runtime::Module) -> tvm_ffi::Result<RuntimeKernel> {
        let function = module.get_function_required("add_one")?;
        let a = empty_on(&[ELEMENTS as i64], DataType::float(32), device)?;
        a.copy_from_slice(&(0..ELEMENTS).map(|i| i as f32).collect::<Vec<_>>())?;
        let b = empty_on(&[ELEMENTS as i64], DataType::float(32), device)?;
        Ok(RuntimeKernel {
            device,
            function,
            a,
            b,
        })
    }

    /// Launches `launches` times with packed arguments, as a C caller passes them, and waits.
    fn run(&self, launches: usize) {
        let args: Vec<Any> = vec![
            self.a.clone().into(),
            self.b.clone().into(),
            (ELEMENTS as i64).into(),
            1i64.into(),
            64i64.into(),
        ];
        let views: Vec<AnyView<'_>> = args.iter().map(Any::as_view).collect();
        for _ in 0..launches {
            self.function.call_packed(&views).expect("a launch");
        }
        sync_stream(self.device, None).expect("synchronize");
    }

    /// Fails unless the last launch wrote `a + 1`.
    fn check(&self) {
        let out = self.b.to_vec::<f32>().expect("read back");
        assert!(
            out.iter().enumerate().all(|(i, &v)| v == i as f32 + 1.0),
            "add_one computed {out:?}"
        );
    }
}

/// Times `ours` against `bare` (a run of `launches` dispatches of the bare program).
fn race(
    options: &Options,
    ours: &RuntimeKernel,
    bare: impl Fn(usize) -> Result<(), String>,
) -> [Timings; 2] {
    let n = options.launches;
    let mut run_ours = || ours.run(n);
    let mut run_bare = || bare(n).expect("bare launches");
    let timings = match options.only.as_deref() {
        // The other side's figures are those of this one: not compared.
        Some("runtime") => vec![interleaved(options.rounds, &mut [&mut run_ours])[0]; 2],
        Some(_) => vec![interleaved(options.rounds, &mut [&mut run_bare])[0]; 2],
        None => interleaved(options.rounds, &mut [&mut run_ours, &mut run_bare]),
    };
    ours.check();
    [timings[0], timings[1]]
}

fn vulkan(options: &Options, scratch: &std::path::Path) -> Result<(String, [Timings; 2]), String> {
    let words = add_one_spirv(scratch)?;
    let bare = BareVulkan::new(&words)?;
    let api = device_vulkan::register().map_err(|e| e.to_string())?;
    let shader = device_vulkan::SpirvShader { flag: 0, words };
    let bytes = device_vulkan::module_to_bytes(&[(add_one_info(), shader)]);
    let module = device_vulkan::module_from_bytes(api, &bytes).map_err(|e| e.to_string())?;
    let ours = RuntimeKernel::new(Device::vulkan(0), module).map_err(|e| e.to_string())?;
    let timings = race(options, &ours, |n| bare.run(n));
    Ok((bare.device_name().to_owned(), timings))
}

fn webgpu(options: &Options) -> Result<(String, [Timings; 2]), String> {
    let source = add_one_wgsl().map_err(|e| format!("add_one.wgsl: {e}"))?;
    let bare = BareWgpu::new(&source)?;
    let api = device_webgpu::register().map_err(|e| e.to_string())?;
    let bytes = device_webgpu::module_to_bytes(&[(add_one_info(), source)]);
    let module = device_webgpu::module_from_bytes(api, &bytes).map_err(|e| e.to_string())?;
    let ours = RuntimeKernel::new(Device::webgpu(0), module).map_err(|e| e.to_string())?;
    let timings = race(options, &ours, |n| bare.run(n));
    Ok((bare.device_name().to_owned(), timings))
}

fn main() {
    let options = parse_options().unwrap_or_else(|e| {
        eprintln!("launch: {e}");
        std::process::exit(2);
    });
    let scratch = std::env::temp_dir().join(format!("tvm-device-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    println!(
        "add_one, 1 work group of 64; {} launches per run, then a wait; µs per launch, \
         median (best) of {} interleaved rounds; cpu = processor time of all threads",
        options.launches, options.rounds
    );
    println!(
        "{:<8} {:<21} {:>15} {:>15} {:>13} {:>15} {:>15} {:>13}",
        "backend",
        "baseline",
        "wall: runtime",
        "baseline",
        "ratio",
        "cpu: runtime",
        "baseline",
        "ratio"
    );
    let mut failed = false;
    let mut misses = Vec::new();
    for backend in &options.backends {
        let (baseline, outcome) = match backend.as_str() {
            "vulkan" => ("bare ash", vulkan(&options, &scratch)),
            _ => ("bare wgpu", webgpu(&options)),
        };
        let (device, [ours, bare]) = match outcome {
            Ok(measured) => measured,
            Err(e) => {
                println!("{backend:<8} not measured: {e}");
                failed = true;
                continue;
            }
        };
        let per = |s: Summary| {
            (
                micros_per(s.median, options.launches),
                micros_per(s.best, options.launches),
            )
        };
        let cell = |(median, best): (f64, f64)| format!("{median:.2} ({best:.2})");
        let ratio = |a: (f64, f64), b: (f64, f64)| (a.0 / b.0, a.1 / b.1);
        let (wall, wall_bare) = (per(ours.wall), per(bare.wall));
        let (cpu, cpu_bare) = (per(ours.cpu), per(bare.cpu));
        let wall_ratio = ratio(wall, wall_bare);
        println!(
            "{backend:<8} {:<21} {:>15} {:>15} {:>13} {:>15} {:>15} {:>13}",
            format!("{baseline} ({})", device.split(' ').next().unwrap_or("")),
            cell(wall),
            cell(wall_bare),
            cell(wall_ratio),
            cell(cpu),
            cell(cpu_bare),
            cell(ratio(cpu, cpu_bare)),
        );
        if wall_ratio.0 > 1.2 {
            misses.push(format!("{backend}: {:.2}x", wall_ratio.0));
        }
    }
    if misses.is_empty() {
        println!("target (runtime <= 1.2x baseline, median wall time): pass");
    } else {
        println!(
            "target (runtime <= 1.2x baseline, median wall time): MISS {}",
            misses.join(", ")
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failed {
        std::process::exit(1);
    }
}
