//! Every target, briefly, with fixed seeds: the seeds are valid, mutation
//! reaches both accepted and refused inputs, and nothing crashes.

use tessera_fuzz::{run, TARGETS};

#[test]
fn every_target_survives_a_short_run() {
    for target in &TARGETS {
        for seed in [1, 2] {
            let report = run(target, 5_000, seed);
            let name = target.name;
            assert_eq!(report.executions, 5_000, "{name}");
            assert_eq!(report.seeds_rejected, 0, "{name}: a seed was refused");
            assert_eq!(
                report.crash_count, 0,
                "{name}, seed {seed}: {:?}",
                report.crashes
            );
            // Mutation must leave the seeds' shapes in both directions,
            // or the target tests nothing beyond them.
            assert!(report.accepted > (target.seeds)().len() as u64, "{name}");
            assert!(report.accepted < report.executions, "{name}");
            assert!(report.features > (target.seeds)().len(), "{name}");
        }
    }
}

#[test]
fn targets_have_distinct_names() {
    let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), TARGETS.len());
    assert!(tessera_fuzz::target("frame").is_some());
    assert!(tessera_fuzz::target("nope").is_none());
}
