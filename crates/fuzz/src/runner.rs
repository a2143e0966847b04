//! The fuzzing loop: mutate a corpus entry, run the target on it, count
//! panics and oversized allocations as crashes, and keep inputs that
//! reached an outcome not seen before.
//!
//! Without compiler instrumentation there is no edge coverage; the
//! target's [`Outcome::feature`] (the shape of what it decoded, or the kind
//! of error it refused with) stands in for it, so inputs that get further
//! into a decoder become parents of later inputs.

use crate::alloc_guard;
use crate::mutate::Mutator;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, Instant};

/// The most inputs the corpus holds; past it a new find replaces a random
/// non-seed entry.
const CORPUS_MAX: usize = 4096;

/// How many crashing inputs a report keeps (all are counted).
const CRASHES_KEPT_MAX: usize = 8;

/// The largest single allocation a decoder may make: the default frame
/// maximum, the bound the protocol crate promises for any input.
pub const ALLOCATION_BYTES_MAX: usize = tessera_protocol::FRAME_BYTES_MAX_DEFAULT;

/// What one execution found, when it did not crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The decoder accepted the input (and every property held).
    pub accepted: bool,
    /// A hash of the outcome's shape; a new value keeps the input.
    pub feature: u64,
}

/// One fuzz target.
pub struct Target {
    /// The name given on the command line.
    pub name: &'static str,
    /// What it feeds and what it checks, one line.
    pub about: &'static str,
    /// Valid inputs to start from; each must be accepted.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens the mutator inserts.
    pub dictionary: &'static [&'static [u8]],
    /// Mutated inputs are cut to this length.
    pub input_bytes_max: usize,
    /// Runs the code under test on one input; panics when a property fails.
    pub run: fn(&[u8]) -> Outcome,
}

/// An input that crashed a target, and how.
#[derive(Clone, Debug)]
pub struct Crash {
    pub input: Vec<u8>,
    /// The panic message and location, or the oversized allocation.
    pub message: String,
}

/// What a run of one target did.
#[derive(Debug)]
pub struct Report {
    pub executions: u64,
    /// Executions whose input the decoder accepted.
    pub accepted: u64,
    /// Seeds the decoder refused (a broken seed, not a crash).
    pub seeds_rejected: usize,
    pub crash_count: u64,
    /// The first [`CRASHES_KEPT_MAX`] crashes.
    pub crashes: Vec<Crash>,
    /// Distinct outcome shapes seen.
    pub features: usize,
    pub corpus_len: usize,
    /// The slowest execution and its input (not a failure: for reading).
    pub slowest: (Duration, Vec<u8>),
    pub elapsed: Duration,
    /// Whether oversized allocations were watched (the guard is the binary's
    /// global allocator; in unit tests it is not).
    pub allocations_watched: bool,
}

thread_local! {
    /// The message of the panic caught on this thread, while fuzzing.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
    static CAPTURING: RefCell<bool> = const { RefCell::new(false) };
}

/// Installs, once, a panic hook that records a fuzzed execution's panic
/// instead of printing it (millions of executions may panic alike), and
/// defers to the previous hook otherwise.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(|c| *c.borrow()) {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let text = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                CAUGHT.with(|c| *c.borrow_mut() = Some(format!("{text}{at}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `target` once on `input`: `Ok` with its outcome, or `Err` with the
/// crash.
pub fn execute(target: &Target, input: &[u8]) -> Result<Outcome, String> {
    install_panic_hook();
    CAPTURING.with(|c| *c.borrow_mut() = true);
    alloc_guard::reset();
    let result = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let largest = alloc_guard::largest();
    CAPTURING.with(|c| *c.borrow_mut() = false);
    match result {
        Err(_) => Err(CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| "a panic".into())),
        Ok(_) if largest > ALLOCATION_BYTES_MAX => Err(format!(
            "one allocation of {largest} bytes (more than {ALLOCATION_BYTES_MAX}) from {} input bytes",
            input.len()
        )),
        Ok(outcome) => Ok(outcome),
    }
}

/// Runs `target` for `runs` executions (its seeds first), deterministically
/// for a given `seed`.
pub fn run(target: &Target, runs: u64, seed: u64) -> Report {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let mutator = Mutator {
        dictionary: target.dictionary,
        input_bytes_max: target.input_bytes_max,
    };
    let mut corpus = Corpus::new((target.seeds)());
    let mut features = HashSet::new();
    let mut report = Report {
        executions: 0,
        accepted: 0,
        seeds_rejected: 0,
        crash_count: 0,
        crashes: Vec::new(),
        features: 0,
        corpus_len: 0,
        slowest: (Duration::ZERO, Vec::new()),
        elapsed: Duration::ZERO,
        allocations_watched: alloc_guard::active(),
    };
    while report.executions < runs {
        let (input, is_seed) = match corpus.next_seed() {
            Some(s) => (s, true),
            None => match corpus.pick(&mut rng) {
                None => break,
                Some((parent, other)) => {
                    let mut input = parent.to_vec();
                    mutator.mutate(&mut rng, &mut input, other);
                    (input, false)
                }
            },
        };
        let began = Instant::now();
        let result = execute(target, &input);
        let took = began.elapsed();
        report.executions += 1;
        if took > report.slowest.0 {
            report.slowest = (took, input.clone());
        }
        match result {
            Ok(outcome) => {
                report.accepted += u64::from(outcome.accepted);
                if is_seed && !outcome.accepted {
                    report.seeds_rejected += 1;
                }
                if features.insert(outcome.feature) || is_seed {
                    corpus.keep(&mut rng, input, outcome.accepted);
                }
            }
            Err(message) => {
                report.crash_count += 1;
                if report.crashes.len() < CRASHES_KEPT_MAX {
                    report.crashes.push(Crash { input, message });
                }
            }
        }
    }
    report.features = features.len();
    report.corpus_len = corpus.accepted.len() + corpus.refused.len();
    report.elapsed = started.elapsed();
    report
}

/// The inputs mutations start from, split by whether the decoder accepted
/// them: most parents are accepted inputs, so that mutations probe the
/// decoder's depths rather than re-mutate what it refused at the first
/// byte; refused ones still mutate back into valid shapes now and then.
struct Corpus {
    pending_seeds: std::vec::IntoIter<Vec<u8>>,
    accepted: Vec<Vec<u8>>,
    refused: Vec<Vec<u8>>,
    /// The first entries of `accepted` are the seeds; they stay.
    seed_count: usize,
}

impl Corpus {
    fn new(seeds: Vec<Vec<u8>>) -> Corpus {
        Corpus {
            seed_count: seeds.len(),
            pending_seeds: seeds.into_iter(),
            accepted: Vec::new(),
            refused: Vec::new(),
        }
    }

    fn next_seed(&mut self) -> Option<Vec<u8>> {
        self.pending_seeds.next()
    }

    /// A parent to mutate and a second entry to splice from.
    fn pick(&self, rng: &mut StdRng) -> Option<(&[u8], &[u8])> {
        let any = |rng: &mut StdRng| -> Option<&[u8]> {
            let from_refused = self.accepted.is_empty() || rng.gen_ratio(1, 4);
            let list = if from_refused && !self.refused.is_empty() {
                &self.refused
            } else {
                &self.accepted
            };
            list.get(rng.gen_range(0..list.len().max(1)))
                .map(Vec::as_slice)
        };
        Some((any(rng)?, any(rng)?))
    }

    /// Keeps a new find; past [`CORPUS_MAX`] it replaces a random entry
    /// of its kind (never a seed).
    fn keep(&mut self, rng: &mut StdRng, input: Vec<u8>, accepted: bool) {
        let (list, fixed) = if accepted {
            (&mut self.accepted, self.seed_count)
        } else {
            (&mut self.refused, 0)
        };
        if list.len() < CORPUS_MAX / 2 {
            list.push(input);
        } else if list.len() > fixed {
            let at = rng.gen_range(fixed..list.len());
            list[at] = input;
        }
    }
}

/// A hash of the structure of a `Debug` or error text: letters, `_` and
/// brackets outside quotes, so that two values differing only in numbers
/// or string contents have the same shape.
pub fn shape(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    let mut quoted: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quoted {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quoted = None,
            Some(_) => {}
            None if c == '"' || c == '`' => quoted = Some(c),
            None if c.is_ascii_alphabetic() || "_{}()[]".contains(c) => c.hash(&mut hasher),
            None => {}
        }
    }
    hasher.finish()
}

/// An outcome from a decode result: accepted values by their `Debug` shape,
/// refusals by their message's shape (a different hash family, so the two
/// never collide by construction of the texts).
pub fn outcome_of<T: std::fmt::Debug, E: std::fmt::Display>(result: &Result<T, E>) -> Outcome {
    match result {
        Ok(value) => Outcome {
            accepted: true,
            feature: shape(&format!("{value:?}")),
        },
        Err(e) => Outcome {
            accepted: false,
            feature: !shape(&e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_ignores_numbers_and_string_contents() {
        assert_eq!(
            shape(r#"Int(5) String("a\"b") "#),
            shape(r#"Int(70) String("zz")"#)
        );
        assert_ne!(shape("Int(5)"), shape("Float(5)"));
        assert_ne!(shape("List([Int(1)])"), shape("List([])"));
    }

    fn picky(input: &[u8]) -> Outcome {
        // Panics on one three-byte prefix: the runner must find and count it.
        assert!(!input.starts_with(b"BUG"), "found the bug");
        Outcome {
            accepted: input.first() == Some(&b'B'),
            feature: input.iter().take(3).map(|&b| u64::from(b)).sum(),
        }
    }

    #[test]
    fn the_runner_counts_and_keeps_crashes() {
        let target = Target {
            name: "picky",
            about: "",
            seeds: || vec![b"BUx".to_vec()],
            dictionary: &[b"G"],
            input_bytes_max: 8,
            run: picky,
        };
        let report = run(&target, 20_000, 1);
        assert_eq!(report.executions, 20_000);
        assert_eq!(report.seeds_rejected, 0);
        assert!(report.crash_count > 0);
        let crash = &report.crashes[0];
        assert!(crash.input.starts_with(b"BUG"), "{:?}", crash.input);
        assert!(crash.message.contains("found the bug"), "{}", crash.message);
        // The same seed replays the same run.
        assert_eq!(run(&target, 20_000, 1).crash_count, report.crash_count);
    }
}
