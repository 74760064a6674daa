//! The stable driver: every seed of a target's corpus, then deterministic mutations of the seeds
//! (bit flips, byte changes, inserts, deletes, splices, interesting integers), from a small
//! xorshift generator. Needs no nightly compiler and no libFuzzer; `cargo fuzz` does the long,
//! coverage-guided runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::input::INTERESTING_I64;

/// Mutations per seed when `TVM_FUZZ_MUTATIONS` is not set (the bounded pass of the test suite).
pub const DEFAULT_MUTATIONS: u64 = 1500;
/// Mutations per seed under valgrind (scripts/memcheck.sh runs every test binary there).
pub const VALGRIND_MUTATIONS: u64 = 10;
/// Longest input the mutator makes.
pub const MAX_INPUT_LEN: usize = 4096;

/// A xorshift64* generator: deterministic, seedable, good enough to pick mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        // SplitMix-style scrambling keeps nearby seeds apart and the state non-zero.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// A stable 64-bit hash of bytes (FNV-1a), to seed generators and name findings.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Applies one to four random mutations to `data`; `seeds` provides splice partners.
pub fn mutate(data: &mut Vec<u8>, seeds: &[Vec<u8>], rng: &mut Rng) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        match rng.below(10) {
            // Flip one bit.
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            // Set one byte to a random or boundary value.
            1 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] = match rng.below(4) {
                    0 => 0,
                    1 => 0xff,
                    2 => 0x80,
                    _ => rng.next_u64() as u8,
                };
            }
            // Add or subtract a little from one byte.
            2 if !data.is_empty() => {
                let i = rng.below(data.len());
                let delta = 1 + rng.below(16) as u8;
                data[i] = if rng.below(2) == 0 {
                    data[i].wrapping_add(delta)
                } else {
                    data[i].wrapping_sub(delta)
                };
            }
            // Insert random bytes.
            3 => {
                let at = rng.below(data.len() + 1);
                let n = 1 + rng.below(8);
                for k in 0..n {
                    data.insert(at + k, rng.next_u64() as u8);
                }
            }
            // Delete a run of bytes.
            4 if !data.is_empty() => {
                let at = rng.below(data.len());
                let n = (1 + rng.below(8)).min(data.len() - at);
                data.drain(at..at + n);
            }
            // Overwrite with an interesting integer of 1, 2, 4 or 8 bytes.
            5 | 6 => {
                let value = INTERESTING_I64[rng.below(INTERESTING_I64.len())];
                let width = [1usize, 2, 4, 8][rng.below(4)];
                let bytes = &value.to_le_bytes()[..width];
                let at = rng.below(data.len() + 1);
                for (k, b) in bytes.iter().enumerate() {
                    match data.get_mut(at + k) {
                        Some(slot) => *slot = *b,
                        None => data.push(*b),
                    }
                }
            }
            // Splice: a prefix of this input, then a suffix of another seed.
            7 => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let cut = rng.below(data.len() + 1);
                    let from = rng.below(other.len());
                    data.truncate(cut);
                    data.extend_from_slice(&other[from..]);
                }
            }
            // Duplicate a chunk of the input elsewhere in it.
            8 if !data.is_empty() => {
                let from = rng.below(data.len());
                let n = (1 + rng.below(16)).min(data.len() - from);
                let chunk = data[from..from + n].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, chunk);
            }
            // Truncate.
            _ => {
                let keep = rng.below(data.len() + 1);
                data.truncate(keep);
            }
        }
    }
    data.truncate(MAX_INPUT_LEN);
}

/// Reads the seed corpus of `target` from `corpus_root/<target>/` (sorted by file name).
pub fn load_corpus(corpus_root: &Path, target: &str) -> std::io::Result<Vec<Vec<u8>>> {
    let dir = corpus_root.join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    paths.retain(|p| p.is_file());
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}

/// An input that made a target panic.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The target's name.
    pub target: String,
    /// The input.
    pub input: Vec<u8>,
    /// The panic message.
    pub message: String,
}

/// What one run of a target did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Inputs fed to the target (seeds and mutations).
    pub inputs: u64,
    /// Time spent.
    pub elapsed: Duration,
    /// The slowest input and its time (a hang shows up here first).
    pub slowest: Duration,
    /// Inputs that panicked (at most a few are kept).
    pub findings: Vec<Finding>,
}

/// When a run stops.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// This many mutations of every seed.
    MutationsPerSeed(u64),
    /// Mutations round-robin over the seeds until this much time has passed.
    Time(Duration),
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

thread_local! {
    /// Where the last panic on this thread happened (recorded by [`quiet_panics`]' hook).
    static PANIC_LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Replaces the panic hook with one that prints nothing and records where each panic happened,
/// so that [`run_one`] can name the location; returns the previous hook.
#[allow(clippy::type_complexity)]
pub fn quiet_panics() -> Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()));
        PANIC_LOCATION.with(|slot| *slot.borrow_mut() = location);
    }));
    previous
}

/// Runs `f` on `input`; if it panicked, the panic message and, under [`quiet_panics`], where.
pub fn run_one(f: fn(&[u8]), input: &[u8]) -> Option<String> {
    PANIC_LOCATION.with(|slot| slot.borrow_mut().take());
    let payload = catch_unwind(AssertUnwindSafe(|| f(input))).err()?;
    let message = panic_message(&*payload);
    Some(match PANIC_LOCATION.with(|slot| slot.borrow_mut().take()) {
        Some(location) => format!("{message} (at {location})"),
        None => message,
    })
}

/// Feeds `f` every seed, then mutations of the seeds within `budget`. Panics are caught and
/// recorded (the first few), so that one run reports every distinct failure.
pub fn run_target(name: &str, f: fn(&[u8]), seeds: &[Vec<u8>], budget: Budget) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    let mut rng = Rng::new(fnv1a(name.as_bytes()));
    let fallback = [Vec::new()];
    let seeds = if seeds.is_empty() {
        &fallback[..]
    } else {
        seeds
    };
    let feed = |input: &[u8], report: &mut Report| {
        let t = Instant::now();
        let outcome = run_one(f, input);
        report.slowest = report.slowest.max(t.elapsed());
        report.inputs += 1;
        if let Some(message) = outcome {
            // One finding per panic location (the message may name the input).
            let key = |m: &str| {
                m.rsplit_once(" (at ")
                    .map_or(m.to_owned(), |(_, at)| at.to_owned())
            };
            let new_kind = !report
                .findings
                .iter()
                .any(|f| key(&f.message) == key(&message));
            if new_kind && report.findings.len() < 8 {
                report.findings.push(Finding {
                    target: name.to_owned(),
                    input: input.to_vec(),
                    message,
                });
            }
        }
    };
    for seed in seeds {
        feed(seed, &mut report);
    }
    let mut round = 0u64;
    loop {
        match budget {
            Budget::MutationsPerSeed(n) if round >= n => break,
            Budget::Time(limit) if start.elapsed() >= limit => break,
            _ => {}
        }
        for seed in seeds {
            let mut data = seed.clone();
            mutate(&mut data, seeds, &mut rng);
            // Every few rounds, mutate a mutation further (deeper into the input space).
            if rng.below(4) == 0 {
                mutate(&mut data, seeds, &mut rng);
            }
            feed(&data, &mut report);
        }
        round += 1;
    }
    report.elapsed = start.elapsed();
    report
}

/// Shrinks an input that makes `f` panic: deletes chunks, then zeroes bytes, while it still
/// panics with the same message. Returns the smallest input found.
pub fn minimize(f: fn(&[u8]), input: &[u8]) -> Vec<u8> {
    let Some(message) = run_one(f, input) else {
        return input.to_vec();
    };
    let still_fails = |candidate: &[u8]| run_one(f, candidate).as_deref() == Some(&*message);
    let mut best = input.to_vec();
    let mut chunk = best.len().max(1);
    while chunk >= 1 {
        let mut at = 0;
        while at < best.len() {
            let mut candidate = best.clone();
            candidate.drain(at..(at + chunk).min(best.len()));
            if still_fails(&candidate) {
                best = candidate;
            } else {
                at += chunk;
            }
        }
        if chunk == 1 {
            break;
        }
        chunk /= 2;
    }
    for i in 0..best.len() {
        if best[i] != 0 {
            let mut candidate = best.clone();
            candidate[i] = 0;
            if still_fails(&candidate) {
                best = candidate;
            }
        }
    }
    best
}

/// Whether this process runs under valgrind (its preloaded core library is in `LD_PRELOAD`).
pub fn under_valgrind() -> bool {
    std::env::var("LD_PRELOAD").is_ok_and(|v| v.contains("vgpreload"))
}

/// Mutations per seed for the bounded pass: `TVM_FUZZ_MUTATIONS` if set, else
/// [`VALGRIND_MUTATIONS`] under valgrind, else [`DEFAULT_MUTATIONS`].
pub fn mutations_from_env() -> u64 {
    match std::env::var("TVM_FUZZ_MUTATIONS") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("TVM_FUZZ_MUTATIONS must be a count, got {v:?}")),
        Err(_) if under_valgrind() => VALGRIND_MUTATIONS,
        Err(_) => DEFAULT_MUTATIONS,
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic_and_mutations_stay_bounded() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_ne!(Rng::new(0).next_u64(), 0);
        let seeds = vec![vec![1u8; 100], Vec::new()];
        let mut rng = Rng::new(1);
        let mut data = seeds[0].clone();
        for _ in 0..10_000 {
            mutate(&mut data, &seeds, &mut rng);
            assert!(data.len() <= MAX_INPUT_LEN);
        }
    }

    fn panics_on_two_sevens(data: &[u8]) {
        assert!(data.iter().filter(|b| **b == 7).count() < 2, "two sevens");
    }

    #[test]
    fn minimize_keeps_the_failure() {
        let input = [1, 7, 2, 3, 7, 9, 9];
        let hook = quiet_panics();
        let small = minimize(panics_on_two_sevens, &input);
        std::panic::set_hook(hook);
        assert_eq!(small, [7, 7]);
    }
}
