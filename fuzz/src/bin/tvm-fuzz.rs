//! The stable fuzz driver.
//!
//! ```text
//! tvm-fuzz [run] [--mutations N | --seconds S] [TARGET...]   seeds + mutations of each target
//! tvm-fuzz minimize TARGET HEX|FILE [OUT]                   shrink a failing input
//! tvm-fuzz list                                             the targets
//! ```
//!
//! `run` prints one line per target (inputs, time, slowest input) and every distinct panic with
//! its input in hex, and exits with status 1 if any target panicked; failing inputs are also
//! written to `target/fuzz-findings/`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tvm_fuzz::driver::{self, Budget};

fn usage() -> ExitCode {
    eprintln!(
        "usage: tvm-fuzz [run] [--mutations N | --seconds S] [TARGET...]\n       \
         tvm-fuzz minimize TARGET HEX|FILE [OUT]\n       tvm-fuzz list"
    );
    ExitCode::from(2)
}

fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn findings_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-findings")
}

fn run(args: &[String]) -> ExitCode {
    let mut budget = Budget::MutationsPerSeed(driver::mutations_from_env());
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--mutations" => match it.next().and_then(|v| v.parse().ok()) {
                Some(n) => budget = Budget::MutationsPerSeed(n),
                None => return usage(),
            },
            "--seconds" => match it.next().and_then(|v| v.parse::<f64>().ok()) {
                Some(s) if s >= 0.0 => budget = Budget::Time(Duration::from_secs_f64(s)),
                _ => return usage(),
            },
            name if tvm_fuzz::target(name).is_some() => names.push(name.to_owned()),
            other => {
                eprintln!("unknown target or option {other:?}");
                return usage();
            }
        }
    }
    if names.is_empty() {
        names = tvm_fuzz::TARGETS
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .collect();
    }
    // With a time budget, each target gets an equal share.
    if let Budget::Time(total) = budget {
        budget = Budget::Time(total / names.len() as u32);
    }
    let _ = driver::quiet_panics();
    let start = std::time::Instant::now();
    let mut failed = false;
    for name in &names {
        let f = tvm_fuzz::target(name).expect("checked above");
        let seeds = match driver::load_corpus(&tvm_fuzz::corpus_dir(), name) {
            Ok(seeds) => seeds,
            Err(e) => {
                eprintln!("{name}: cannot read its corpus: {e}");
                return ExitCode::FAILURE;
            }
        };
        let report = driver::run_target(name, f, &seeds, budget);
        println!(
            "{name}: {} inputs ({} seeds), {:.2?}, slowest {:.2?}, {} finding(s)",
            report.inputs,
            seeds.len(),
            report.elapsed,
            report.slowest,
            report.findings.len()
        );
        for finding in &report.findings {
            failed = true;
            let dir = findings_dir();
            let file = dir.join(format!("{name}-{:016x}", driver::fnv1a(&finding.input)));
            let saved =
                std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, &finding.input));
            println!("  FINDING: {}", finding.message);
            println!("  input: {}", driver::hex(&finding.input));
            if saved.is_ok() {
                println!("  saved: {}", file.display());
            }
        }
    }
    println!("total: {:.2?}", start.elapsed());
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn minimize(args: &[String]) -> ExitCode {
    let [name, input, rest @ ..] = args else {
        return usage();
    };
    let Some(f) = tvm_fuzz::target(name) else {
        eprintln!("unknown target {name:?}");
        return usage();
    };
    let data = match std::fs::read(input) {
        Ok(bytes) => bytes,
        Err(_) => match parse_hex(input) {
            Some(bytes) => bytes,
            None => {
                eprintln!("{input:?} is neither a file nor hex");
                return usage();
            }
        },
    };
    let _ = driver::quiet_panics();
    let Some(message) = driver::run_one(f, &data) else {
        println!("the input does not fail");
        return ExitCode::FAILURE;
    };
    let small = driver::minimize(f, &data);
    println!("panic: {message}");
    println!(
        "minimized from {} to {} bytes: {}",
        data.len(),
        small.len(),
        driver::hex(&small)
    );
    if let Some(out) = rest.first() {
        if let Err(e) = std::fs::write(out, &small) {
            eprintln!("cannot write {out}: {e}");
            return ExitCode::FAILURE;
        }
        println!("written to {out}");
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("minimize") => minimize(&args[1..]),
        Some("list") => {
            for (name, _) in tvm_fuzz::TARGETS {
                println!("{name}");
            }
            ExitCode::SUCCESS
        }
        Some("run") => run(&args[1..]),
        Some("-h" | "--help") => usage(),
        _ => run(&args),
    }
}
