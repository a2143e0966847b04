//! The simulator in CI: determinism, and the seeds that found bugs since
//! fixed (each comment says which). The full sweep is
//! `cargo run -p tessera-sim -- --seeds 500` (see docs/ARCHITECTURE.md).

use tessera_sim::run;

fn must_pass(seed: u64) {
    if let Err(f) = run(seed) {
        panic!("{f}");
    }
}

#[test]
fn a_seed_replays_exactly() {
    let a = run(7).map(|r| format!("{r:?}")).map_err(|f| f.to_string());
    let b = run(7).map(|r| format!("{r:?}")).map_err(|f| f.to_string());
    assert_eq!(a, b);
}

/// A client's request queued twice at the point leader (it timed out and
/// sent it again) was evaluated twice: the second copy answered NOTFOUND
/// after the first had deleted the object.
#[test]
fn seed_16_queued_copies_are_answered_once() {
    must_pass(16);
}

/// An acknowledgement from the old chain let a member commit, after
/// reconfiguration, an update its new successor never received.
#[test]
fn seed_97_acknowledgements_do_not_survive_rechaining() {
    must_pass(97);
}

/// A lost restart request left a state transfer waiting forever.
#[test]
fn seed_81_lost_transfer_restarts_are_asked_again() {
    must_pass(81);
}

/// A late message of a long-finished transfer made its former target, by
/// then a chain member, clear the region.
#[test]
fn seed_130_finished_transfers_never_clear_a_region() {
    must_pass(130);
}
