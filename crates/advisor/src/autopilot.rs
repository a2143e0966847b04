//! The autopilot (issue 14, point 6): re-advise a live space when the mix
//! of operations its daemons observe has drifted, and propose (or apply)
//! a relayout only when the model predicts a gain worth its cost.
//!
//! Pure: the caller scrapes each daemon's shape counts, which are
//! cumulative counters, and hands them to [`Autopilot::round`] once a
//! round; the autopilot keeps the previous counts to turn them into the
//! operations of the last window, and the mix it last advised on.
//!
//! A round decides in this order:
//!
//! 1. **Too few operations** in the window ([`Settings::min_ops`]): no
//!    decision; the window grows until the next round (the previous counts
//!    are kept, so nothing observed is lost).
//! 2. **Steady**: the window's mix is within [`Settings::drift`] of the mix
//!    last advised on, measured as the total variation distance between
//!    the two distributions over shapes (half the sum of the absolute
//!    differences of their probabilities: 0 for equal mixes, 1 for mixes
//!    with no shape in common). The first round has no such mix and
//!    always advises.
//! 3. **Advise** on the window's workload: the best layout Tessera builds
//!    against the space's current one. The gain is the predicted
//!    throughput of the best over the current, minus one. At least
//!    [`Settings::min_gain`]: **propose** it; otherwise **keep** the
//!    current layout. Either way the window's mix becomes the mix last
//!    advised on, so that one drift gives one proposal, not one a round.
//!
//! Why a drift threshold *and* a gain threshold: the gain alone would
//! re-run the optimizer every round and propose on noise whenever two
//! layouts are predicted close; the drift alone would relayout on a change
//! the current layout already serves well. A relayout rebuilds a part
//! while the cluster serves, which costs more than a few percent of a
//! window's throughput, so the default gain asked is 20 %.
//!
//! Counters go back to zero when a daemon restarts: a count below the
//! previous one is taken as a restart, and the window holds the new count.

use crate::layout::Layout;
use crate::model::{predict, Prediction};
use crate::observed::{observed_workload, Observed, ObservedError, ShapeLabel};
use crate::optimize::{advise, AdviseError, Options, Ranked};
use crate::params::Params;
use crate::workload::Held;
use std::collections::BTreeMap;
use tessera_types::{DaemonId, SpaceDesc};
use thiserror::Error;

/// When the autopilot advises and what it asks of a layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// The total variation distance between the window's mix and the mix
    /// last advised on from which the autopilot advises again.
    pub drift: f64,
    /// The predicted gain (best ÷ current − 1) from which it proposes.
    pub min_gain: f64,
    /// Fewer operations than this in a window decide nothing.
    pub min_ops: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            drift: 0.2,
            min_gain: 0.2,
            min_ops: 1000,
        }
    }
}

/// Why a round could not decide.
#[derive(Debug, Error)]
pub enum AutopilotError {
    /// A threshold is negative or not a number, or the drift is above 1.
    #[error("autopilot setting {what} is {value}: {why}")]
    BadSetting {
        /// The setting's name.
        what: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        why: &'static str,
    },
    /// The window's counts make no workload.
    #[error("the observed operations make no workload: {0}")]
    Observed(#[source] ObservedError),
    /// The optimizer gave no advice.
    #[error("no advice: {0}")]
    Advise(#[source] AdviseError),
}

/// The operations of one window, shape by shape.
pub type Mix = BTreeMap<ShapeLabel, f64>;

/// What a round decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The window holds fewer operations than asked; it grows.
    TooFew {
        /// Operations counted in the window.
        ops: u64,
    },
    /// The mix is close to the one last advised on.
    Steady {
        /// Its distance from that mix.
        drift: f64,
    },
    /// Advised; the current layout stays.
    Keep(Advised),
    /// Advised; the best layout is worth a relayout.
    Propose(Advised),
}

/// What the optimizer said on a window's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Advised {
    /// The window's distance from the mix last advised on (`None` in the
    /// first round).
    pub drift: Option<f64>,
    /// Operations in the window.
    pub ops: u64,
    /// The current layout's prediction.
    pub current: Prediction,
    /// The best layout Tessera builds, and its prediction.
    pub best: Ranked,
    /// `best ÷ current − 1`, in predicted throughput.
    pub gain: f64,
}

/// A round's decision before anything is priced.
enum Assessed {
    TooFew {
        ops: u64,
    },
    Steady {
        drift: f64,
    },
    Advise {
        window: Observed,
        mix: Mix,
        drift: Option<f64>,
    },
}

/// The autopilot of one space.
#[derive(Clone, Debug)]
pub struct Autopilot {
    settings: Settings,
    /// Each daemon's counts at the end of the last decided window.
    previous: BTreeMap<DaemonId, Observed>,
    /// The mix of the last window advised on.
    advised_on: Option<Mix>,
}

impl Autopilot {
    /// An autopilot with `settings`, refused if a threshold is out of
    /// range.
    pub fn new(settings: Settings) -> Result<Autopilot, AutopilotError> {
        let bad = |what, value: f64, why| Err(AutopilotError::BadSetting { what, value, why });
        if !(0.0..=1.0).contains(&settings.drift) {
            return bad("drift", settings.drift, "between 0 and 1");
        }
        if settings.min_gain.is_nan() || settings.min_gain < 0.0 {
            return bad("min_gain", settings.min_gain, "at least 0");
        }
        Ok(Autopilot {
            settings,
            previous: BTreeMap::new(),
            advised_on: None,
        })
    }

    /// Whether a round on the counts `now` would advise (rather than wait
    /// for more operations or find the mix steady). Changes nothing: a
    /// caller asks before it measures what the space holds, which costs a
    /// pass over its keys, and measures only for a round that prices.
    pub fn would_advise(&self, now: &BTreeMap<DaemonId, Observed>) -> bool {
        matches!(self.assess(now), Assessed::Advise { .. })
    }

    /// One round on every daemon's cumulative counts `now` (daemons whose
    /// page could not be read are left out: their counts then wait for a
    /// later round), for `space` (its current layout is the one it has),
    /// holding `held`.
    pub fn round(
        &mut self,
        now: &BTreeMap<DaemonId, Observed>,
        space: &SpaceDesc,
        held: &Held,
        params: &Params,
        options: &Options,
    ) -> Result<Verdict, AutopilotError> {
        let (window, mix, drift) = match self.assess(now) {
            Assessed::TooFew { ops } => return Ok(Verdict::TooFew { ops }),
            Assessed::Steady { drift } => {
                self.decided(now);
                return Ok(Verdict::Steady { drift });
            }
            Assessed::Advise { window, mix, drift } => (window, mix, drift),
        };
        self.decided(now);
        let ops = window.total();
        self.advised_on = Some(mix);
        let mut workload = observed_workload(&window, space, held.objects)
            .map_err(AutopilotError::Observed)?
            .workload;
        held.size(&mut workload);
        let current = Layout::of_space(space);
        let current_prediction = predict(options.model, &workload, &current, params);
        let advice = advise(
            &workload,
            params,
            &Options {
                future: false,
                ..options.clone()
            },
        )
        .map_err(AutopilotError::Advise)?;
        let best = advice
            .layouts
            .into_iter()
            .find(|r| !r.layout.converts(space))
            .unwrap_or_else(|| Ranked {
                layout: current.clone(),
                prediction: current_prediction.clone(),
            });
        let same = best.layout == current;
        let gain = if same {
            0.0
        } else {
            best.prediction.ops_per_s / current_prediction.ops_per_s.max(f64::MIN_POSITIVE) - 1.0
        };
        let advised = Advised {
            drift,
            ops,
            current: current_prediction,
            best,
            gain,
        };
        Ok(if gain >= self.settings.min_gain && !same {
            Verdict::Propose(advised)
        } else {
            Verdict::Keep(advised)
        })
    }

    /// What a round on `now` decides before pricing anything.
    fn assess(&self, now: &BTreeMap<DaemonId, Observed>) -> Assessed {
        let window = self.window(now);
        let ops = window.total();
        if ops < self.settings.min_ops.max(1) {
            return Assessed::TooFew { ops };
        }
        let mix = mix_of(&window);
        let drift = self.advised_on.as_ref().map(|last| drift(last, &mix));
        match drift.filter(|&d| d < self.settings.drift) {
            Some(drift) => Assessed::Steady { drift },
            None => Assessed::Advise { window, mix, drift },
        }
    }

    /// The window ending at `now` is decided: later windows start from
    /// these counts.
    fn decided(&mut self, now: &BTreeMap<DaemonId, Observed>) {
        for (daemon, counts) in now {
            self.previous.insert(*daemon, counts.clone());
        }
    }

    /// The operations since the last decided window, over every daemon.
    fn window(&self, now: &BTreeMap<DaemonId, Observed>) -> Observed {
        let mut window = Observed::default();
        for (daemon, counts) in now {
            let before = self.previous.get(daemon);
            for (label, &n) in &counts.counts {
                let earlier = before.and_then(|b| b.counts.get(label)).copied();
                let delta = match earlier {
                    // A smaller count: the daemon restarted and counts anew.
                    Some(e) if e <= n => n - e,
                    _ => n,
                };
                if delta > 0 {
                    *window.counts.entry(label.clone()).or_default() += delta;
                }
            }
        }
        window
    }
}

/// Each shape's share of the operations in `observed`.
pub fn mix_of(observed: &Observed) -> Mix {
    let total = observed.total().max(1) as f64;
    observed
        .counts
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(label, &n)| (label.clone(), n as f64 / total))
        .collect()
}

/// The total variation distance between two mixes: half the sum over
/// shapes of the difference of their shares.
pub fn drift(a: &Mix, b: &Mix) -> f64 {
    let shapes: std::collections::BTreeSet<&ShapeLabel> = a.keys().chain(b.keys()).collect();
    let sum: f64 = shapes
        .into_iter()
        .map(|s| (a.get(s).unwrap_or(&0.0) - b.get(s).unwrap_or(&0.0)).abs())
        .sum();
    sum / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    fn space(text: &str) -> SpaceDesc {
        parse_space(text).expect("a space")
    }

    const HOTELS: &str =
        "space hotels key int id attributes string city, string name, int price create 8 partitions";

    fn label(kind: &str, shape: &str) -> ShapeLabel {
        ShapeLabel {
            kind: kind.to_string(),
            shape: shape.to_string(),
        }
    }

    fn counts(items: &[(&str, &str, u64)]) -> Observed {
        Observed {
            counts: items.iter().map(|&(k, s, n)| (label(k, s), n)).collect(),
        }
    }

    fn daemons(per_daemon: &[Observed]) -> BTreeMap<DaemonId, Observed> {
        per_daemon
            .iter()
            .enumerate()
            .map(|(i, o)| (DaemonId(i as u64 + 1), o.clone()))
            .collect()
    }

    const OBJECTS: u64 = 100_000;

    fn pilot(settings: Settings) -> Autopilot {
        Autopilot::new(settings).expect("valid settings")
    }

    fn run(
        pilot: &mut Autopilot,
        now: &BTreeMap<DaemonId, Observed>,
        space: &SpaceDesc,
    ) -> Verdict {
        pilot
            .round(
                now,
                space,
                &Held::count(OBJECTS),
                &Params::default(),
                &Options::default(),
            )
            .expect("a round")
    }

    #[test]
    fn drift_is_the_total_variation_distance() {
        let a: Mix = [(label("get", ""), 0.5), (label("insert", ""), 0.5)].into();
        let b: Mix = [(label("get", ""), 0.8), (label("search", "city:eq"), 0.2)].into();
        // |0.5-0.8| + |0.5-0| + |0-0.2| = 1.0, halved.
        assert!((drift(&a, &b) - 0.5).abs() < 1e-12);
        assert_eq!(drift(&a, &a), 0.0);
        let c: Mix = [(label("modify", "price"), 1.0)].into();
        assert!((drift(&a, &c) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bad_settings_are_refused() {
        for settings in [
            Settings {
                drift: 1.5,
                ..Settings::default()
            },
            Settings {
                drift: f64::NAN,
                ..Settings::default()
            },
            Settings {
                min_gain: -0.1,
                ..Settings::default()
            },
        ] {
            assert!(matches!(
                Autopilot::new(settings),
                Err(AutopilotError::BadSetting { .. })
            ));
        }
    }

    #[test]
    fn a_search_heavy_drift_proposes_a_layout_that_serves_it_once() {
        let hotels = space(HOTELS);
        let mut pilot = pilot(Settings::default());
        // Gets and inserts only: the key subspace serves them best.
        let mut d1 = counts(&[("get", "", 3000), ("insert", "", 1000)]);
        let first = run(&mut pilot, &daemons(&[d1.clone()]), &hotels);
        let Verdict::Keep(advised) = &first else {
            panic!("gets and inserts keep the key subspace: {first:?}");
        };
        assert_eq!(advised.drift, None);
        assert_eq!(advised.best.layout, Layout::of_space(&hotels));
        // The same mix again: steady.
        d1 = counts(&[("get", "", 6000), ("insert", "", 2000)]);
        match run(&mut pilot, &daemons(&[d1.clone()]), &hotels) {
            Verdict::Steady { drift } => assert!(drift < 1e-9, "{drift}"),
            other => panic!("the same mix is steady: {other:?}"),
        }
        // Now searches by city dominate the window.
        let mut d2 = d1.clone();
        d2.counts.insert(label("search", "city:eq"), 9000);
        *d2.counts.get_mut(&label("get", "")).expect("gets") += 500;
        let Verdict::Propose(advised) = run(&mut pilot, &daemons(&[d2.clone()]), &hotels) else {
            panic!("a search-heavy window proposes a layout");
        };
        let drift = advised.drift.expect("a drift from the first mix");
        assert!(drift > 0.8, "{drift}");
        assert_eq!(advised.ops, 9500);
        assert!(advised.gain >= 0.2, "{}", advised.gain);
        let best = &advised.best.layout;
        let city = hotels.attr_index("city").expect("city");
        assert!(
            best.subspaces.iter().any(|s| s.contains(&city)) || best.indexes.contains(&city),
            "the proposal serves city searches: {best:?}"
        );
        assert!(
            (advised.gain - (advised.best.prediction.ops_per_s / advised.current.ops_per_s - 1.0))
                .abs()
                < 1e-12
        );
        // The same search-heavy mix in the next window: no second proposal.
        let mut d3 = d2.clone();
        *d3.counts.get_mut(&label("search", "city:eq")).expect("s") += 9000;
        *d3.counts.get_mut(&label("get", "")).expect("gets") += 500;
        assert!(matches!(
            run(&mut pilot, &daemons(&[d3]), &hotels),
            Verdict::Steady { .. }
        ));
    }

    #[test]
    fn a_small_gain_keeps_the_layout() {
        let hotels = space(HOTELS);
        // No gain is enough: every round that advises keeps.
        let mut pilot = pilot(Settings {
            min_gain: f64::INFINITY,
            ..Settings::default()
        });
        let window = counts(&[("search", "city:eq", 5000), ("get", "", 100)]);
        match run(&mut pilot, &daemons(&[window]), &hotels) {
            Verdict::Keep(advised) => assert!(advised.gain > 0.0, "{advised:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn windows_count_since_the_last_decision_across_daemons_and_restarts() {
        let hotels = space(HOTELS);
        let mut pilot = pilot(Settings {
            min_ops: 100,
            ..Settings::default()
        });
        let a = counts(&[("get", "", 80)]);
        let b = counts(&[("get", "", 30)]);
        // 110 operations over two daemons: enough.
        assert!(matches!(
            run(&mut pilot, &daemons(&[a.clone(), b.clone()]), &hotels),
            Verdict::Keep(_)
        ));
        // 50 more on one daemon: too few, and the window keeps growing.
        let a2 = counts(&[("get", "", 130)]);
        assert_eq!(
            run(&mut pilot, &daemons(&[a2.clone(), b.clone()]), &hotels),
            Verdict::TooFew { ops: 50 }
        );
        // The second daemon restarted (its count fell from 30 to 25): the
        // window holds its 25, with the first's 80 since the last decision.
        let a3 = counts(&[("get", "", 160)]);
        let b3 = counts(&[("get", "", 25)]);
        match run(&mut pilot, &daemons(&[a3, b3]), &hotels) {
            Verdict::Steady { drift } => assert_eq!(drift, 0.0),
            other => panic!("105 gets since the last decision: {other:?}"),
        }
        assert_eq!(
            pilot.window(&daemons(&[
                counts(&[("get", "", 161)]),
                counts(&[("get", "", 27)])
            ])),
            counts(&[("get", "", 3)])
        );
    }

    /// `would_advise` says what the round on the same counts then does,
    /// and changes nothing itself.
    #[test]
    fn would_advise_agrees_with_the_round() {
        let hotels = space(HOTELS);
        let mut pilot = pilot(Settings {
            min_ops: 100,
            ..Settings::default()
        });
        let few = daemons(&[counts(&[("get", "", 40)])]);
        assert!(!pilot.would_advise(&few));
        assert!(!pilot.would_advise(&few), "asking twice changes nothing");
        assert!(matches!(
            run(&mut pilot, &few, &hotels),
            Verdict::TooFew { .. }
        ));
        let first = daemons(&[counts(&[("get", "", 400)])]);
        assert!(pilot.would_advise(&first));
        assert!(matches!(run(&mut pilot, &first, &hotels), Verdict::Keep(_)));
        let same = daemons(&[counts(&[("get", "", 800)])]);
        assert!(!pilot.would_advise(&same), "the same mix is steady");
        assert!(matches!(
            run(&mut pilot, &same, &hotels),
            Verdict::Steady { .. }
        ));
        let drifted = daemons(&[counts(&[("get", "", 800), ("search", "city:eq", 900)])]);
        assert!(pilot.would_advise(&drifted));
        assert!(matches!(
            run(&mut pilot, &drifted, &hotels),
            Verdict::Propose(_)
        ));
    }

    /// The measured sizes of a stored copy and of an index entry are what
    /// the model prices the space's storage on.
    #[test]
    fn the_measured_sizes_reach_the_model() {
        let hotels = space(
            "space hotels key int id attributes string city, string name, int price \
             index price create 8 partitions",
        );
        let window = daemons(&[counts(&[("get", "", 5000)])]);
        let priced = |object_bytes, index_entry_bytes| {
            let mut pilot = pilot(Settings::default());
            let held = Held {
                objects: OBJECTS,
                object_bytes,
                index_entry_bytes,
                ..Held::default()
            };
            let verdict = pilot
                .round(
                    &window,
                    &hotels,
                    &held,
                    &Params::default(),
                    &Options::default(),
                )
                .expect("a round");
            let (Verdict::Keep(a) | Verdict::Propose(a)) = verdict else {
                panic!("the first round advises: {verdict:?}");
            };
            a.current.bytes_per_object
        };
        let small = priced(Some(100.0), Some(10.0));
        let large = priced(Some(10_000.0), Some(10.0));
        assert!(
            large > small * 10.0,
            "10,000-byte objects against 100-byte ones: {large} against {small}"
        );
        // One index (price) on at least one copy: 990 bytes more per
        // object at least.
        let wide = priced(Some(100.0), Some(1_000.0));
        assert!(
            wide - small >= 990.0,
            "1,000-byte entries against 10-byte ones: {wide} against {small}"
        );
    }

    /// A replex space is advised among replex layouts (`relayout` changes
    /// its replexes live, never its kind): searches by stars on a space
    /// replicated by city propose a replex on stars.
    #[test]
    fn a_replex_space_is_proposed_replexes() {
        let replex = space(
            "space r key id attributes string city, int stars replex city tolerate 1 failure create 4 partitions",
        );
        let mut pilot = pilot(Settings::default());
        let current = Layout::of_space(&replex);
        assert!(current.replex && current.subspaces == vec![vec![1]]);
        let window = counts(&[("get", "", 500), ("search", "stars:eq", 4500)]);
        let verdict = pilot
            .round(
                &daemons(&[window]),
                &replex,
                &Held::count(OBJECTS),
                &Params::default(),
                &Options::default(),
            )
            .expect("advised");
        let Verdict::Propose(advised) = verdict else {
            panic!("searches by stars alone propose a layout: {verdict:?}");
        };
        let best = &advised.best.layout;
        assert!(best.replex, "a replex layout: {best:?}");
        assert!(
            best.subspaces.iter().any(|s| s[0] == 2),
            "a replex on stars: {best:?}"
        );
        assert!(!best.converts(&replex));
        let described = parse_space(&best.describe(&replex)).expect("the proposal parses");
        assert!(described.replex.is_some());
    }
}
