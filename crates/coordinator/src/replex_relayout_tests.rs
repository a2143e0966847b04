//! Live layout changes of replex spaces (`relayout`): new replexes and
//! hybrids build beside the old parts, move away from other copies of
//! their objects before they count, and the omitted parts leave only
//! while the space is whole.

use crate::layout::{LayoutChangeError, LayoutTally};
use crate::placement::{part_unsettled, replex_conflict};
use crate::state::{ClusterState, Command, CommandResult};
use tessera_protocol::AdminStatus;
use tessera_types::parse::parse_space;
use tessera_types::{DaemonId, PartId, PartState, Space, SubspaceKind};

/// Replex-3 (key, hybrid `k, a`, replex `a`) that tolerates one failure,
/// so that it may lose its hybrid.
const HYBRID: &str = "space r key k attributes a, b replex a hybrid k, a groups 3, 4 \
                      index b create 12 partitions tolerate 1 failure";
/// The same space with a replex on `b` in place of the hybrid.
const TWO_REPLEXES: &str = "space r key k attributes a, b replex a replex b index b \
                            create 12 partitions tolerate 1 failure";

fn register(state: &mut ClusterState, n: usize) -> Vec<DaemonId> {
    (0..n)
        .map(|i| {
            match state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("127.0.0.1:{}", 3000 + state.daemons.len() + i),
                metrics: None,
                installed: None,
            }) {
                CommandResult::Registered { id } => id,
                other => panic!("registration refused: {other:?}"),
            }
        })
        .collect()
}

fn cluster(daemons: usize, description: &str) -> ClusterState {
    let mut state = ClusterState::default();
    register(&mut state, daemons);
    let added = state.apply(Command::AddSpace {
        description: description.to_string(),
    });
    assert!(
        matches!(added, CommandResult::SpaceAdded { .. }),
        "{added:?}"
    );
    state
}

/// Completes every transfer, checking the invariants after each.
fn finish_transfers(state: &mut ClusterState) {
    for _ in 0..500 {
        let Some(t) = state.transfers.first().cloned() else {
            return;
        };
        state.apply(Command::TransferComplete { transfer: t.id });
        state.check_invariants().unwrap();
    }
    panic!("transfers never end: {:?}", state.transfers);
}

fn part_of(space: &Space, kind: SubspaceKind, attrs: &[usize]) -> Option<(PartId, PartState)> {
    space
        .subspaces
        .iter()
        .find(|l| l.kind == kind && l.attrs == attrs)
        .map(|l| (l.part, l.state))
}

#[test]
fn a_new_replex_builds_moves_apart_becomes_ready_and_the_omitted_hybrid_leaves() {
    let mut state = cluster(3, HYBRID);
    let old = state.spaces[0].desc.clone();
    let epoch = state.epoch;
    state.relayout("r", TWO_REPLEXES).unwrap();
    assert_eq!(state.epoch.0, epoch.0 + 1, "one epoch per change");
    state.check_invariants().unwrap();
    let space = &state.spaces[0];
    let (b, b_state) = part_of(space, SubspaceKind::Replex, &[2]).expect("a replex on b");
    assert_eq!(b_state, PartState::Building { progress: 0 });
    let (hybrid, hybrid_state) = part_of(space, SubspaceKind::Hybrid, &[0, 1]).unwrap();
    assert_eq!(
        hybrid_state,
        PartState::Ready,
        "it drops once nothing builds"
    );
    // The description names every part the space has, the new replex too.
    let decl = space.desc.replex.as_ref().unwrap();
    assert_eq!(decl.replexes, vec![vec![1], vec![2]]);
    assert_eq!(decl.hybrids, old.replex.as_ref().unwrap().hybrids);
    // Three daemons all hold regions of the key subspace or of replex a,
    // each able to share objects with every region of b: b waits beside
    // them, so it is no copy yet, and cannot become ready.
    assert!(space
        .subspaces
        .iter()
        .all(|l| l.regions.iter().all(|r| r.chain.len() == 1)));
    assert!(part_unsettled(space, b, &state.rebuilds, &state.transfers));
    assert_eq!(replex_conflict(space), None, "a building part is no copy");
    assert!(state.transfers.is_empty(), "no daemon may take b's regions");
    state.apply(Command::PartProgress {
        space: space.id,
        part: b,
        progress: 100,
        done: true,
    });
    assert!(matches!(
        state.spaces[0].part_state(b),
        Some(PartState::Building { .. })
    ));

    // A fresh daemon arrives: b's regions move to it (it holds nothing
    // else, so nothing of theirs), before any rebalancing move.
    let fresh = register(&mut state, 1)[0];
    assert!(!state.transfers.is_empty());
    assert!(state.transfers.iter().all(|t| t.to == fresh));
    finish_transfers(&mut state);
    let space = &state.spaces[0];
    assert!(!part_unsettled(space, b, &state.rebuilds, &state.transfers));
    state.apply(Command::PartProgress {
        space: space.id,
        part: b,
        progress: 100,
        done: true,
    });
    let space = &state.spaces[0];
    assert_eq!(space.part_state(b), Some(PartState::Ready));
    assert_eq!(space.part_state(hybrid), Some(PartState::Dropping));
    assert_eq!(replex_conflict(space), None);
    state.check_invariants().unwrap();

    let id = space.id;
    state.apply(Command::PartDropped {
        space: id,
        part: hybrid,
    });
    state.check_invariants().unwrap();
    let space = &state.spaces[0];
    assert_eq!(space.part_state(hybrid), None);
    assert_eq!(
        space.desc.replex,
        parse_space(TWO_REPLEXES).unwrap().replex,
        "the description is the one asked for"
    );
    // Asking again changes nothing.
    let epoch = state.epoch;
    state.relayout("r", TWO_REPLEXES).unwrap();
    assert_eq!(state.epoch, epoch);
}

#[test]
fn dropping_a_replex_drops_the_hybrid_on_it_whichever_leaves_first() {
    // Replex-3 over key, a and a hybrid k, a; the new layout keeps only
    // a replex on b, so both a and the hybrid on it go.
    let mut state = cluster(3, HYBRID);
    let only_b = "space r key k attributes a, b replex b index b create 12 partitions \
                  tolerate 1 failure";
    state.relayout("r", only_b).unwrap();
    // Every daemon holds regions of the key subspace or of a: b's regions
    // move to a fresh one.
    register(&mut state, 1);
    finish_transfers(&mut state);
    let space = &state.spaces[0];
    let (b, _) = part_of(space, SubspaceKind::Replex, &[2]).unwrap();
    let (a, _) = part_of(space, SubspaceKind::Replex, &[1]).unwrap();
    let (hybrid, _) = part_of(space, SubspaceKind::Hybrid, &[0, 1]).unwrap();
    let id = space.id;
    assert!(!part_unsettled(space, b, &state.rebuilds, &state.transfers));
    state.apply(Command::PartProgress {
        space: id,
        part: b,
        progress: 100,
        done: true,
    });
    assert_eq!(state.spaces[0].part_state(a), Some(PartState::Dropping));
    assert_eq!(
        state.spaces[0].part_state(hybrid),
        Some(PartState::Dropping)
    );
    // The replex leaves first: the hybrid on it goes with it, and the
    // description never names a part the space lacks.
    state.apply(Command::PartDropped { space: id, part: a });
    state.check_invariants().unwrap();
    let space = &state.spaces[0];
    assert_eq!(space.part_state(hybrid), None);
    assert_eq!(space.subspaces.len(), 2);
    assert_eq!(space.desc.replex, parse_space(only_b).unwrap().replex);
    // Its late removal changes nothing.
    let epoch = state.epoch;
    state.apply(Command::PartDropped {
        space: id,
        part: hybrid,
    });
    assert_eq!(state.epoch, epoch);
}

#[test]
fn a_dropping_part_stays_while_a_region_of_its_space_has_no_daemon() {
    let mut state = cluster(3, HYBRID);
    register(&mut state, 2);
    finish_transfers(&mut state);
    // Dropping the hybrid builds nothing: it starts dropping at once.
    let no_hybrid = "space r key k attributes a, b replex a index b create 12 partitions \
                     tolerate 1 failure";
    state.relayout("r", no_hybrid).unwrap();
    let space = &state.spaces[0];
    let (hybrid, hybrid_state) = part_of(space, SubspaceKind::Hybrid, &[0, 1]).unwrap();
    assert_eq!(hybrid_state, PartState::Dropping);
    let id = space.id;
    // A daemon holding a key region goes offline: its regions wait for
    // it, and the hybrid may hold the only other copy of their objects
    // (with a second failure beyond f), so it stays.
    let key_daemon = space.subspaces[0].regions[0].chain[0];
    state.apply(Command::DaemonOffline { id: key_daemon });
    let mut tally = LayoutTally::default();
    for d in state.daemons.keys() {
        tally.on_epoch(*d, state.epoch);
    }
    let dropped = |commands: &[Command]| {
        commands
            .iter()
            .any(|c| matches!(c, Command::PartDropped { part, .. } if *part == hybrid))
    };
    assert!(!dropped(&tally.proposals(&state)));
    // A removal proposed before the region lost its daemon changes
    // nothing when it applies now.
    let epoch = state.epoch;
    state.apply(Command::PartDropped {
        space: id,
        part: hybrid,
    });
    assert_eq!(state.epoch, epoch);
    assert_eq!(
        state.spaces[0].part_state(hybrid),
        Some(PartState::Dropping)
    );
    // Back with its disk: the space is whole, the hybrid may go.
    let back = state.apply(Command::RegisterDaemon {
        id: Some(key_daemon),
        addr: state.daemons[&key_daemon].addr.clone(),
        metrics: None,
        installed: None,
    });
    assert!(matches!(back, CommandResult::Registered { .. }), "{back:?}");
    // The returning daemon's regions are refreshed first (a rebuild onto
    // it); the hybrid waits for those too.
    while let Some(b) = state.rebuilds.first().cloned() {
        assert!(!dropped(&tally.proposals(&state)));
        state.apply(Command::RebuildComplete { rebuild: b.id });
    }
    for d in state.daemons.keys() {
        tally.on_epoch(*d, state.epoch);
    }
    assert!(dropped(&tally.proposals(&state)));
    state.apply(Command::PartDropped {
        space: id,
        part: hybrid,
    });
    state.check_invariants().unwrap();
    assert_eq!(
        state.spaces[0].desc.replex,
        parse_space(no_hybrid).unwrap().replex
    );
}

#[test]
fn relayout_keeps_a_replex_space_a_replex_space_and_what_its_copies_need() {
    let mut state = cluster(3, HYBRID);
    let plain = "space p key k attributes a, b subspace a create 12 partitions";
    assert!(matches!(
        state.apply(Command::AddSpace {
            description: plain.to_string()
        }),
        CommandResult::SpaceAdded { .. }
    ));
    let before = state.clone();
    let refused = |state: &mut ClusterState, space: &str, description: &str| {
        let e = state.relayout(space, description).unwrap_err();
        let status = e.status();
        (e, status)
    };
    let (e, status) = refused(
        &mut state,
        "r",
        "space r key k attributes a, b subspace a create 12 partitions tolerate 1 failure",
    );
    assert!(
        matches!(
            &e,
            LayoutChangeError::ReplexConversion {
                to_replex: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(status, AdminStatus::BadSpace);
    assert!(e.to_string().contains("create a new space"), "{e}");
    let (e, _) = refused(
        &mut state,
        "p",
        "space p key k attributes a, b replex a create 12 partitions",
    );
    assert!(
        matches!(
            &e,
            LayoutChangeError::ReplexConversion {
                to_replex: true,
                ..
            }
        ),
        "{e:?}"
    );
    let (e, _) = refused(
        &mut state,
        "r",
        "space r key k attributes a, b replex a hybrid k, a groups 3, 4 index b \
         create 24 partitions tolerate 1 failure",
    );
    assert!(
        matches!(
            &e,
            LayoutChangeError::RelayoutChangesSpace {
                what: "partitions",
                ..
            }
        ),
        "{e:?}"
    );
    let (e, _) = refused(
        &mut state,
        "r",
        "space r key k attributes a, b replex a hybrid k, a groups 3, 4 index b \
         create 12 partitions tolerate 1 failure with relaxed placement",
    );
    assert!(
        matches!(&e, LayoutChangeError::RelayoutChangesSpace { what, .. } if what.contains("placement")),
        "{e:?}"
    );
    // Two copies cannot tolerate two failures: the parser says so.
    let (e, _) = refused(
        &mut state,
        "r",
        "space r key k attributes a, b replex a create 12 partitions tolerate 2 failures",
    );
    assert!(matches!(&e, LayoutChangeError::BadDescription(_)), "{e:?}");
    assert_eq!(state, before, "a refused relayout changes nothing");

    // Subspaces and global indexes stay refused in a replex space, with
    // the way to change its parts in the message.
    let e = state.add_subspace("r", &["b".to_string()]).unwrap_err();
    assert!(e.to_string().contains("relayout"), "{e}");
}

#[test]
fn a_space_that_tolerates_two_failures_keeps_three_copies() {
    let mut state = cluster(
        3,
        "space r key k attributes a, b replex a hybrid k, a groups 3, 4 \
                                create 12 partitions",
    );
    assert_eq!(state.spaces[0].desc.fault_tolerance, 2);
    // Without `tolerate`, two copies would tolerate one failure.
    let e = state
        .relayout(
            "r",
            "space r key k attributes a, b replex a create 12 partitions",
        )
        .unwrap_err();
    assert!(
        matches!(
            &e,
            LayoutChangeError::RelayoutChangesSpace {
                what: "fault tolerance",
                ..
            }
        ),
        "{e:?}"
    );
    // The message says how to keep the space's.
    let text = e.to_string();
    assert!(
        text.contains("the space tolerates 2, the description 1")
            && text.contains("write `tolerate 2 failures`"),
        "{text}"
    );
}
