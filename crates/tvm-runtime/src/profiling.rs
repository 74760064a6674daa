//! Timing a function the way tuners do (`runtime.RPCTimeEvaluator`): a warm-up call, then
//! `repeat` measurements of `number` back-to-back calls each, with the device synchronized
//! around every measurement. The result is `repeat` native-endian `f64` seconds per call, as
//! bytes, which is what Apache TVM's Python side unpacks.

use std::time::{Duration, Instant};

use tvm_ffi::{
    Any, AnyView, Bytes, DataType, Device, Error, ErrorKind, Function, Result, Tensor,
    TryFromAnyView,
};

use crate::Module;
use crate::device::{RPC_SESSION_DEVICE_TYPES, copy_tensor, empty_on, sync_stream};

/// How a [`time_evaluator`] measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    /// Calls per measurement (grown to reach `min_repeat_ms`).
    pub number: u32,
    /// Measurements, each one `f64` of the result.
    pub repeat: u32,
    /// The least time a measurement takes; `number` grows until a measurement lasts this long.
    pub min_repeat_ms: u32,
    /// How many measurements of zero nanoseconds are tolerated before giving up on
    /// `min_repeat_ms`.
    pub limit_zero_time_iterations: u32,
    /// A pause after every `repeats_to_cooldown` measurements, in milliseconds.
    pub cooldown_interval_ms: u32,
    /// Measurements between pauses.
    pub repeats_to_cooldown: u32,
    /// Bytes copied on the device before each measurement to evict its caches (0: none).
    pub cache_flush_bytes: usize,
}

impl Default for TimerConfig {
    fn default() -> TimerConfig {
        TimerConfig {
            number: 10,
            repeat: 1,
            min_repeat_ms: 0,
            limit_zero_time_iterations: 100,
            cooldown_interval_ms: 0,
            repeats_to_cooldown: 1,
            cache_flush_bytes: 0,
        }
    }
}

impl TimerConfig {
    fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("number", self.number),
            ("repeat", self.repeat),
            ("repeats_to_cooldown", self.repeats_to_cooldown),
        ] {
            if value == 0 {
                tvm_ffi::bail!(
                    ErrorKind::ValueError,
                    "time evaluator {name} must be at least 1, got 0"
                );
            }
        }
        Ok(())
    }
}

/// The least growth of `number` between two measurements that were too short.
const GROWTH: f64 = 1.618;

/// A function that times `function` on `device` as `config` says and returns the seconds per
/// call of each measurement as bytes (`repeat` native-endian `f64`). `preprocess`, when given,
/// runs with the same arguments before each measurement (a cache flush, say).
pub fn time_evaluator(
    function: Function,
    device: Device,
    config: TimerConfig,
    preprocess: Option<Function>,
) -> Result<Function> {
    config.validate()?;
    if device.device_type() >= RPC_SESSION_DEVICE_TYPES {
        tvm_ffi::bail!(
            ErrorKind::ValueError,
            "device {device} belongs to an RPC session: time the function through a module of that session"
        );
    }
    Ok(Function::from_packed(move |args: &[AnyView<'_>]| {
        let seconds = measure(&function, device, &config, preprocess.as_ref(), args)?;
        let bytes: Vec<u8> = seconds.iter().flat_map(|s| s.to_ne_bytes()).collect();
        Ok(Bytes::from_bytes(&bytes).into_any())
    }))
}

/// The time evaluator of function `name` of `module` (a global function when `module` is
/// `None`); modules that live elsewhere (over RPC) time it where they live.
pub fn module_time_evaluator(
    module: Option<&Module>,
    name: &str,
    device: Device,
    config: TimerConfig,
    preprocess: &str,
) -> Result<Function> {
    if let Some(module) = module
        && let Some(remote) = module.remote_time_evaluator(name, device, &config, preprocess)?
    {
        return Ok(remote);
    }
    let function = match module {
        Some(module) => module.get_function(name, true)?,
        None => Function::get_global(name),
    }
    .ok_or_else(|| {
        let place = if module.is_some() {
            "the module"
        } else {
            "the global registry"
        };
        Error::new(
            ErrorKind::AttributeError,
            format!("cannot time {name:?}: {place} has no such function"),
        )
    })?;
    let preprocess = match preprocess {
        "" => None,
        name => Some(Function::get_global(name).ok_or_else(|| {
            Error::new(
                ErrorKind::ValueError,
                format!("time evaluator preprocessor {name:?} is not a global function"),
            )
        })?),
    };
    time_evaluator(function, device, config, preprocess)
}

/// `runtime.RPCTimeEvaluator(module or None, name, device_type, device_id, number, repeat,
/// min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown,
/// cache_flush_bytes, preprocessor_name)`, Apache TVM's signature.
pub fn time_evaluator_from_args(args: &[AnyView<'_>]) -> Result<Any> {
    const FUNCTION: &str = "runtime.RPCTimeEvaluator";
    if args.len() != 12 {
        tvm_ffi::bail!(
            ErrorKind::TypeError,
            "{FUNCTION} expects 12 arguments (module, name, device_type, device_id, number, \
             repeat, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, \
             repeats_to_cooldown, cache_flush_bytes, f_preproc), got {}",
            args.len()
        );
    }
    let module: Option<Module> = if args[0].is_none() {
        None
    } else {
        Some(args[0].cast()?)
    };
    let count = |index: usize, name: &str| -> Result<u32> {
        let value = args[index].cast::<i64>()?;
        u32::try_from(value).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("{FUNCTION}: {name} must be a non-negative 32-bit count, got {value}"),
            )
        })
    };
    let device_type = i32::try_from(args[2].cast::<i64>()?).map_err(|_| {
        Error::new(
            ErrorKind::ValueError,
            format!("{FUNCTION}: bad device type"),
        )
    })?;
    let device = Device::new(device_type, count(3, "device_id")? as i32);
    let config = TimerConfig {
        number: count(4, "number")?,
        repeat: count(5, "repeat")?,
        min_repeat_ms: count(6, "min_repeat_ms")?,
        limit_zero_time_iterations: count(7, "limit_zero_time_iterations")?,
        cooldown_interval_ms: count(8, "cooldown_interval_ms")?,
        repeats_to_cooldown: count(9, "repeats_to_cooldown")?,
        cache_flush_bytes: usize::try_from(args[10].cast::<i64>()?).map_err(|_| {
            Error::new(
                ErrorKind::ValueError,
                format!("{FUNCTION}: cache_flush_bytes must be non-negative"),
            )
        })?,
    };
    let name: String = args[1].cast()?;
    let preprocess: String = if args[11].is_none() {
        String::new()
    } else {
        args[11].cast()?
    };
    let evaluator = module_time_evaluator(module.as_ref(), &name, device, config, &preprocess)?;
    Ok(Any::from(evaluator))
}

fn measure(
    function: &Function,
    device: Device,
    config: &TimerConfig,
    preprocess: Option<&Function>,
    args: &[AnyView<'_>],
) -> Result<Vec<f64>> {
    // The first call pays for lazy work (module loading, pipeline creation) and is not counted.
    function.call_packed(args)?;
    let flush = match config.cache_flush_bytes {
        0 => None,
        bytes => {
            let elements = i64::try_from(bytes.div_ceil(4)).unwrap_or(i64::MAX);
            let make = || empty_on(&[elements], DataType::int(32), device);
            Some((make()?, make()?))
        }
    };
    sync_stream(device, None)?;
    let mut number = config.number;
    let mut seconds = Vec::with_capacity(config.repeat as usize);
    for index in 0..config.repeat {
        if let Some(preprocess) = preprocess {
            preprocess.call_packed(args)?;
        }
        let mut elapsed = Duration::ZERO;
        let mut zero_measurements = 0;
        loop {
            if !elapsed.is_zero() {
                let per_call_ms = elapsed.as_secs_f64() * 1e3 / f64::from(number);
                let needed = f64::from(config.min_repeat_ms) / per_call_ms + 1.0;
                number = needed
                    .max(f64::from(number) * GROWTH)
                    .min(f64::from(u32::MAX)) as u32;
            }
            if let Some((from, to)) = &flush {
                // SAFETY: both tensors are alive for the synchronous copy.
                unsafe { copy_tensor(from.dltensor(), to.dltensor(), None, true)? };
            }
            sync_stream(device, None)?;
            let start = Instant::now();
            for _ in 0..number {
                function.call_packed(args)?;
            }
            sync_stream(device, None)?;
            elapsed = start.elapsed();
            if elapsed.is_zero() {
                zero_measurements += 1;
            }
            let long_enough = elapsed.as_secs_f64() * 1e3 >= f64::from(config.min_repeat_ms);
            if long_enough || zero_measurements >= config.limit_zero_time_iterations {
                break;
            }
        }
        seconds.push(elapsed.as_secs_f64() / f64::from(number));
        let cool_down = config.cooldown_interval_ms > 0 && index % config.repeats_to_cooldown == 0;
        if cool_down && index + 1 < config.repeat {
            std::thread::sleep(Duration::from_millis(u64::from(
                config.cooldown_interval_ms,
            )));
        }
    }
    Ok(seconds)
}

/// `cache_flush_cpu_non_first_arg`: evicts from the CPU caches the memory of every CPU tensor
/// argument but the first (by convention the output), so that a measurement starts cold.
pub fn flush_cpu_caches_of_inputs(args: &[AnyView<'_>]) -> Result<Any> {
    for tensor in args.iter().skip(1).filter_map(Tensor::try_from_view) {
        if tensor.device().device_type() == tvm_ffi::abi::kDLCPU {
            flush_tensor(&tensor);
        }
    }
    Ok(Any::none())
}

/// The bytes from the first to one past the last element of `tensor`.
fn byte_span(tensor: &Tensor) -> usize {
    let itemsize = tensor.dtype().itemsize();
    let strides = tensor.strides();
    let last_element: i64 = tensor
        .shape()
        .iter()
        .zip(strides.iter())
        .map(|(dim, stride)| (dim - 1).max(0) * stride.abs())
        .sum();
    if tensor.shape().contains(&0) {
        return 0;
    }
    usize::try_from(last_element).unwrap_or(0) * itemsize + itemsize
}

#[cfg(target_arch = "x86_64")]
fn flush_tensor(tensor: &Tensor) {
    const LINE: usize = 64;
    let dl = tensor.dltensor();
    let start = (dl.data as usize).wrapping_add(dl.byte_offset as usize);
    let span = byte_span(tensor);
    if dl.data.is_null() || span == 0 {
        return;
    }
    for line in (start & !(LINE - 1)..start + span).step_by(LINE) {
        // SAFETY: `line` lies in a cache line that overlaps the tensor's elements, which are
        // mapped memory of a live CPU tensor; clflush writes nothing the program can observe.
        unsafe { std::arch::x86_64::_mm_clflush(line as *const u8) };
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn flush_tensor(tensor: &Tensor) {
    // Without a portable flush instruction: evict by streaming through a buffer larger than
    // the caches, sized by the tensor (at least 64 MiB).
    let evict = vec![1u8; byte_span(tensor).max(64 << 20)];
    std::hint::black_box(evict.iter().map(|b| u64::from(*b)).sum::<u64>());
}
