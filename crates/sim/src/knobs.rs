//! What a seed decides before anything runs: the random generator every
//! choice draws from, and the knobs that shape the run.

use tessera_types::Value;

/// A small deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// What a seed chose.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Messages lost, per thousand.
    pub drop_per_mille: u64,
    /// Messages delivered twice, per thousand.
    pub dup_per_mille: u64,
    /// Largest one-way delay; delays are uniform from 1 ms.
    pub delay_max_ms: u64,
    /// `tolerate f failures` of the space.
    pub f: usize,
    /// Non-key subspaces (on `a`, then `b`).
    pub subspaces: usize,
    /// Whether the nemesis crashes daemons, cuts them off, and takes the
    /// coordinator away.
    pub crashes: bool,
    pub partitions: bool,
    pub coordinator_outages: bool,
    /// Whether the nemesis makes daemons' disks fill up or fail.
    pub disk_faults: bool,
    /// Whether the nemesis pauses daemons, and coordinator members.
    pub pauses: bool,
    pub coordinator_pauses: bool,
    /// Whether half the nemesis's cuts drop messages in one direction only.
    pub one_way_partitions: bool,
    pub clients: usize,
    pub ops_per_client: usize,
    pub keys: i64,
    /// The coordinator's tombstone grace, and ticks between the daemons'
    /// collection rounds. With a short grace, some crashes last long
    /// enough for the tombstones of deletes made meanwhile to be collected
    /// before the daemon returns with its stale disk.
    pub tombstone_grace_ms: u64,
    pub collect_ticks: u64,
    /// A layout change made once, mid-run, under the nemesis.
    pub layout_change: LayoutChange,
    /// The space is declared with a global index on `a` (two indexlets:
    /// negative values and the rest), so every write's chain also passes
    /// through an indexlet, and a write that changes `a`'s sign moves the
    /// object's entry from one to the other.
    pub global_index: bool,
    /// Clients also search (`crate::searches`): by equalities and ranges
    /// on `a` and `b`, through the subspaces (or the replexes and
    /// hybrids) and the regions' indexes. Half the seeds.
    pub searches: bool,
    /// The space is a replex space instead of the subspace space (about one
    /// seed in five; see [`ReplexSpace`]).
    pub replex: Option<ReplexSpace>,
    /// In a replex seed, whether the nemesis also loses daemons for good
    /// (`crate::loss`), so that the coordinator rebuilds their regions.
    pub losses: bool,
    /// In a replex seed, how long a daemon may stay offline and silent,
    /// while its replex regions wait for it, before the coordinator's
    /// leader declares it lost (`Command::DaemonLost`) and rebuilds them:
    /// within reach of the longer crashes, pauses and cuts.
    pub lost_timeout_ms: Option<u64>,
}

/// A replex space (issue 13): the key subspace and one replex, Replex-2,
/// or with a hybrid between them as well, Replex-3; one daemon per region.
/// The replex's attribute is one the clients' updates change, and its
/// values straddle zero, where the replex's regions split, so updates
/// relocate objects between regions of the replex (and of the hybrid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplexSpace {
    /// The replex's attribute: 1 (`a`, which puts and adds change) or 2
    /// (`b`, which puts and conditional puts change).
    pub attr: usize,
    /// Replex-3: `hybrid k, <attr> groups N1, N2`, with these group counts
    /// (each divides the space's 4 partitions).
    pub hybrid: Option<(u32, u32)>,
}

impl ReplexSpace {
    /// The copies of every object: the key subspace, the replex and the
    /// hybrid if any.
    pub fn copies(self) -> usize {
        2 + usize::from(self.hybrid.is_some())
    }
}

/// The layout change a seed makes while the clients run (issue 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutChange {
    None,
    /// A subspace on `b` (a new one: the space has `a` and maybe `b`; with
    /// both, on `b, a`).
    AddSubspace,
    /// The last declared subspace goes.
    RmSubspace,
    /// A local index on `b`.
    AddIndex,
    /// The space moves to subspaces `b` then `a, b`: both new.
    Relayout,
    /// A global index on `b`, two indexlets, built live.
    AddGlobalIndex,
    /// The global index on `a` is split at -1 and 1 (four indexlets),
    /// live: a new part builds, then the old one drops.
    SplitGlobalIndex,
    /// A replex space gains the hybrid `k, <attr> groups 2, 2` it lacks,
    /// or drops the one it has (`relayout`).
    ToggleHybrid,
    /// A replex space's replex moves to the other attribute, its hybrid
    /// with it (`relayout`): the new parts build, then the old ones drop.
    SwapReplex,
}

impl Knobs {
    pub fn from_seed(rng: &mut Rng) -> Knobs {
        // Drawn from a generator of its own, so that every other knob and
        // every later choice of a seed stays what it was before this knob.
        let mut own = Rng::new(rng.clone().next_u64() ^ 0x1A70_u64);
        let layout_change = own.pick(&[
            LayoutChange::None,
            LayoutChange::AddSubspace,
            LayoutChange::RmSubspace,
            LayoutChange::AddIndex,
            LayoutChange::Relayout,
            LayoutChange::AddGlobalIndex,
            LayoutChange::SplitGlobalIndex,
        ]);
        let global_index = Rng::new(rng.clone().next_u64() ^ 0x61_0BA1).chance(500);
        let searches = Rng::new(rng.clone().next_u64() ^ 0x005E_A2C4).chance(500);
        let mut own = Rng::new(rng.clone().next_u64() ^ 0x4E_91E5);
        let replex = if own.chance(200) {
            Some(ReplexSpace {
                attr: own.pick(&[1, 2]),
                hybrid: if own.chance(500) {
                    Some(own.pick(&[(2, 2), (4, 2), (2, 4)]))
                } else {
                    None
                },
            })
        } else {
            None
        };
        let knobs = Knobs {
            layout_change,
            global_index,
            searches,
            drop_per_mille: rng.pick(&[0, 0, 5, 30, 100]),
            dup_per_mille: rng.pick(&[0, 10, 50]),
            delay_max_ms: rng.pick(&[2, 10, 40, 150]),
            f: rng.pick(&[1, 1, 2]),
            subspaces: rng.pick(&[1, 2]),
            crashes: rng.chance(700),
            partitions: rng.chance(600),
            coordinator_outages: rng.chance(400),
            disk_faults: rng.chance(400),
            clients: rng.pick(&[2, 3, 4]),
            ops_per_client: rng.pick(&[10, 20, 30]),
            keys: rng.pick(&[3, 5, 8]),
            pauses: rng.chance(500),
            coordinator_pauses: rng.chance(400),
            one_way_partitions: rng.chance(500),
            tombstone_grace_ms: rng.pick(&[1_500, 3_000, 60_000]),
            collect_ticks: rng.pick(&[2, 8]),
            replex: None,
            losses: false,
            lost_timeout_ms: None,
        };
        match replex {
            Some(replex) => knobs.into_replex(replex, &mut own),
            None => knobs,
        }
    }

    /// These knobs on `replex` instead of the subspace space. A replex
    /// space has no subspaces or global indexes
    /// (`LayoutChangeError::ReplexSpace`); its layout changes are a local
    /// index or a relayout of its replexes. It tolerates at most one
    /// failure fewer than it has copies, so a space that tolerates two
    /// keeps its hybrid: it moves its replex instead.
    fn into_replex(self, replex: ReplexSpace, rng: &mut Rng) -> Knobs {
        let f = self.f.min(replex.copies() - 1);
        let layout_change = match rng.pick(&[
            LayoutChange::None,
            LayoutChange::AddIndex,
            LayoutChange::ToggleHybrid,
            LayoutChange::SwapReplex,
        ]) {
            LayoutChange::ToggleHybrid if replex.hybrid.is_some() && f == 2 => {
                LayoutChange::SwapReplex
            }
            other => other,
        };
        Knobs {
            replex: Some(replex),
            f,
            subspaces: 0,
            global_index: false,
            layout_change,
            losses: rng.chance(750),
            lost_timeout_ms: Some(rng.pick(&[2_500, 4_000, 6_000])),
            ..self
        }
    }

    /// The key the clients call `key` (`0..keys`). In a replex space the
    /// keys are spread evenly over the key axis, so that they fall into
    /// every key region and every group of a hybrid and every daemon leads
    /// some; elsewhere the key is the number itself (all in one region,
    /// as seeds have always run).
    /// The key whose [`Knobs::key_value`] is `value`, if any.
    pub(crate) fn key_of(&self, value: &Value) -> Option<i64> {
        (0..self.keys).find(|&k| self.key_value(k) == *value)
    }

    pub(crate) fn key_value(&self, key: i64) -> Value {
        if self.replex.is_none() {
            return Value::Int(key);
        }
        // The middle of the key's share of the axis, as a coordinate, and
        // the int with that coordinate (`int_coordinate` flips the sign bit).
        let share = u64::MAX / (2 * self.keys as u64);
        let coordinate = (2 * key as u64 + 1) * share;
        Value::Int((coordinate ^ (1 << 63)) as i64)
    }
}

/// The command that makes `knobs`' layout change, if any.
pub(crate) fn layout_command(knobs: &Knobs) -> Option<tessera_coordinator::state::Command> {
    use tessera_coordinator::state::Command;
    let space = "kv".to_string();
    match knobs.layout_change {
        LayoutChange::None => None,
        LayoutChange::ToggleHybrid | LayoutChange::SwapReplex => {
            let mut replex = knobs.replex?;
            if knobs.layout_change == LayoutChange::SwapReplex {
                replex.attr = 3 - replex.attr;
            } else {
                replex.hybrid = match replex.hybrid {
                    Some(_) => None,
                    None => Some((2, 2)),
                };
            }
            let description = space_description(&Knobs {
                replex: Some(replex),
                ..knobs.clone()
            });
            Some(Command::Relayout { space, description })
        }
        LayoutChange::AddSubspace => Some(Command::AddSubspace {
            space,
            attrs: if knobs.subspaces == 2 {
                vec!["b".into(), "a".into()]
            } else {
                vec!["b".into()]
            },
        }),
        LayoutChange::RmSubspace => Some(Command::RmSubspace {
            space,
            part: tessera_types::PartId(knobs.subspaces as u64),
        }),
        LayoutChange::AddIndex => Some(Command::AddIndex {
            space,
            attr: "b".into(),
        }),
        LayoutChange::AddGlobalIndex => Some(Command::AddGlobalIndex {
            space,
            attr: "b".into(),
            partitions: Some(2),
        }),
        LayoutChange::SplitGlobalIndex => Some(Command::SplitGlobalIndex {
            space,
            attr: "a".into(),
            at: vec!["-1".into(), "1".into()],
        }),
        LayoutChange::Relayout => {
            let mut knobs = knobs.clone();
            knobs.subspaces = 0;
            let description = space_description(&knobs).replace(
                "attributes int a, int b ",
                "attributes int a, int b subspace b subspace a, b ",
            );
            Some(Command::Relayout { space, description })
        }
    }
}

pub(crate) fn space_description(knobs: &Knobs) -> String {
    let failures = if knobs.f == 1 { "failure" } else { "failures" };
    if let Some(replex) = knobs.replex {
        let attr = ["k", "a", "b"][replex.attr];
        let hybrid = replex.hybrid.map_or(String::new(), |(n1, n2)| {
            format!("hybrid k, {attr} groups {n1}, {n2} ")
        });
        return format!(
            "space kv key int k attributes int a, int b replex {attr} {hybrid}create 4 partitions tolerate {} {failures}",
            knobs.f
        );
    }
    let subspaces = ["subspace a", "subspace b"][..knobs.subspaces].join(" ");
    let split = knobs.layout_change == LayoutChange::SplitGlobalIndex;
    let global = if knobs.global_index || split {
        "global index a create 2 partitions "
    } else {
        ""
    };
    format!(
        "space kv key int k attributes int a, int b {subspaces} {global}create 4 partitions tolerate {} {failures}",
        knobs.f
    )
}
