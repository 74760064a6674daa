//! The bounded fuzz pass: every target over its committed seed corpus plus
//! `TVM_FUZZ_MUTATIONS` deterministic mutations per seed (default
//! [`tvm_fuzz::driver::DEFAULT_MUTATIONS`], a few under valgrind). A panic in a target fails the
//! test with the input in hex; `cargo run -p tvm-fuzz -- minimize TARGET HEX` shrinks it.

use tvm_fuzz::driver::{self, Budget};

#[test]
fn every_target_survives_its_corpus_and_mutations() {
    let mutations = driver::mutations_from_env();
    // Panics are caught and reported below; keep their messages out of the output.
    let hook = driver::quiet_panics();
    let mut failures = Vec::new();
    let start = std::time::Instant::now();
    for (name, f) in tvm_fuzz::TARGETS {
        let seeds = driver::load_corpus(&tvm_fuzz::corpus_dir(), name)
            .unwrap_or_else(|e| panic!("corpus of {name}: {e}"));
        assert!(!seeds.is_empty(), "{name} has no seeds");
        let report = driver::run_target(name, *f, &seeds, Budget::MutationsPerSeed(mutations));
        println!(
            "{name}: {} inputs ({} seeds), {:.2?}, slowest {:.2?}",
            report.inputs,
            seeds.len(),
            report.elapsed,
            report.slowest
        );
        failures.extend(report.findings);
    }
    std::panic::set_hook(hook);
    println!("all targets: {:.2?}", start.elapsed());
    for f in &failures {
        println!(
            "FINDING {}: {}\n  input: {}",
            f.target,
            f.message,
            driver::hex(&f.input)
        );
    }
    assert!(
        failures.is_empty(),
        "{} target(s) failed; inputs above",
        failures.len()
    );
}
