//! The optimizer: candidate layouts, an exhaustive or a beam search over
//! them within the budgets, the top K, and the thesis's five heuristics.
//!
//! Candidates (RESEARCH.md A.4 #10): a subspace is a set of at most
//! `dims_max` attributes that some search narrows (equality on a hashable
//! type, a range on an ordered one); a subspace of other attributes could
//! serve no search and only adds write cost. A local index or a global
//! index is on one such attribute. A layout is any set of candidate
//! subspaces, plus local indexes on attributes no chosen subspace has,
//! plus (with `future`) global indexes. A layout is of the space's kind —
//! subspaces, or replexes for a replex space — and with `future` of
//! either kind; a replex layout must be declarable ([`Layout::declarable`]:
//! at least f replexes, no global index).
//!
//! When the candidates make at most `exhaustive_max` layouts, every one is
//! predicted. Otherwise a beam search runs: start from the layout with no
//! subspace and the heuristics' layouts; each round, every layout in the
//! beam tries every single move (add a candidate subspace, drop one,
//! replace one by another candidate, add or drop a local or global index,
//! switch replex mode) and the `beam_width` best layouts seen so far
//! become the next beam; stop when the beam no longer changes. Every
//! layout predicted on the way competes for the top K. The heuristics'
//! layouts are always predicted and compete when they fit the budgets and
//! are of a kind considered, so for a space of subspaces the best layout
//! returned is never worse than a heuristic that fits. A replex space's
//! search starts from the same layouts with their subspaces as replexes.
//! The space's own layout is always predicted and competes too, so advice
//! never ranks below keeping what the space has, and a space whose
//! candidates make no declarable layout (a replex space of f greater
//! than the attributes its searches narrow) is still answered.
//!
//! Hybrids (Replex's recovery parts): every replex layout is predicted
//! with the space's hybrids whose sides it keeps, as applying it keeps
//! them ([`Layout::keeping`]). With a recovery budget, a replex layout
//! over it gains hybrids one at a time, each time the one that shortens
//! its predicted recovery most, until it fits or none helps
//! ([`hybrid_options`]): a hybrid costs a copy and a hop per write, so
//! without a budget it is never proposed.

use crate::layout::Hybrid;
use crate::layout::Layout;
use crate::model::{predict_with, rebuild_read_amplification, Model, Prediction};
use crate::params::Params;
use crate::workload::{narrows, SearchOp, Workload};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// What the optimizer may do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// The cost model.
    pub model: Model,
    /// How many layouts to return.
    pub top: usize,
    /// At most this many bytes stored per object.
    pub storage_budget: Option<f64>,
    /// At most this many seconds to rebuild a lost daemon.
    pub recovery_budget_s: Option<f64>,
    /// At most this many dimensions per candidate subspace.
    pub dims_max: usize,
    /// Also consider global indexes, and layouts of the other kind than
    /// the space's (replex layouts for a space of subspaces, and the other
    /// way round), which a space takes only by being created anew
    /// ([`Layout::converts`]).
    pub future: bool,
    /// Search exhaustively when there are at most this many layouts.
    pub exhaustive_max: u64,
    /// Layouts kept per round of the beam search.
    pub beam_width: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            model: Model::Tessera,
            top: 5,
            storage_budget: None,
            recovery_budget_s: None,
            dims_max: 3,
            future: false,
            exhaustive_max: 1 << 16,
            beam_width: 8,
        }
    }
}

/// Why no advice could be given.
#[derive(Debug, Error)]
pub enum AdviseError {
    /// `top` is 0.
    #[error("asked for no layout (top 0)")]
    NoTop,
    /// A budget is negative or not a number.
    #[error("the {what} budget {value} is not a non-negative number")]
    BadBudget {
        /// Which budget.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// No layout of a kind considered fits the budgets.
    #[error("no layout fits the budgets: the smallest needs {bytes_per_object:.0} bytes per object, the quickest to rebuild {recovery_s:.1} s of recovery")]
    NothingFits {
        /// The fewest bytes per object of any declarable layout of a kind
        /// considered that was predicted.
        bytes_per_object: f64,
        /// The shortest recovery time of any such layout (a replex
        /// layout's, with hybrids where a recovery budget asked for them).
        recovery_s: f64,
    },
}

/// The layouts the thesis compares against (§5.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Heuristic {
    /// The key subspace only.
    NoSubspace,
    /// One subspace of every attribute the searches narrow.
    Hyperspace,
    /// One 1-D subspace per such attribute.
    SubspacesAll,
    /// One 1-D subspace of the most common searched attribute.
    Dominant,
    /// 1-D subspaces picked one at a time by the attribute that occurs in
    /// the most remaining search classes (A.4 #9: weighted by
    /// probability, ties by name).
    Greedy,
}

impl Heuristic {
    /// All five, in the thesis's order.
    pub const ALL: [Heuristic; 5] = [
        Heuristic::NoSubspace,
        Heuristic::Hyperspace,
        Heuristic::SubspacesAll,
        Heuristic::Dominant,
        Heuristic::Greedy,
    ];

    /// Its name in output.
    pub fn name(self) -> &'static str {
        match self {
            Heuristic::NoSubspace => "no-subspace",
            Heuristic::Hyperspace => "hyperspace",
            Heuristic::SubspacesAll => "subspaces-all",
            Heuristic::Dominant => "dominant",
            Heuristic::Greedy => "greedy",
        }
    }

    /// The layout it chooses for `workload`.
    pub fn choose(self, workload: &Workload) -> Layout {
        let attrs = workload.narrowing_attrs();
        let subspaces = match self {
            Heuristic::NoSubspace => Vec::new(),
            Heuristic::Hyperspace if attrs.is_empty() => Vec::new(),
            Heuristic::Hyperspace => vec![attrs],
            Heuristic::SubspacesAll => attrs.into_iter().map(|a| vec![a]).collect(),
            Heuristic::Dominant => most_occurring(workload, &[])
                .into_iter()
                .map(|a| vec![a])
                .collect(),
            Heuristic::Greedy => {
                let mut chosen: Vec<usize> = Vec::new();
                while let Some(a) = most_occurring(workload, &chosen) {
                    chosen.push(a);
                }
                chosen.into_iter().map(|a| vec![a]).collect()
            }
        };
        Layout::of_subspaces(subspaces)
    }
}

/// The narrowed attribute with the largest summed probability over the
/// search classes containing none of `taken`; ties to the name first in
/// order. `None` when no such class narrows any attribute.
fn most_occurring(workload: &Workload, taken: &[usize]) -> Option<usize> {
    let mut weight: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (p, search) in workload.searches() {
        let narrowed: Vec<usize> = search
            .checks
            .iter()
            .filter(|&&(a, op)| a != 0 && narrows(&workload.space, a, op))
            .map(|&(a, _)| a)
            .collect();
        if narrowed.iter().any(|a| taken.contains(a)) {
            continue;
        }
        for a in narrowed {
            weight
                .entry(workload.space.attrs[a].name.as_str())
                .or_insert((0.0, a))
                .0 += p;
        }
    }
    // BTreeMap order is by name, and `max_by` keeps the last of equals, so
    // scan in reverse to keep the first name on a tie.
    weight
        .values()
        .rev()
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .map(|&(_, a)| a)
}

/// A layout with its prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// The layout.
    pub layout: Layout,
    /// What the model predicts for it.
    pub prediction: Prediction,
}

/// A heuristic's choice, predicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeuristicChoice {
    /// Which heuristic.
    pub heuristic: Heuristic,
    /// Its layout and prediction.
    pub ranked: Ranked,
    /// Whether it fits the budgets.
    pub within_budget: bool,
}

/// How the optimizer searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SearchKind {
    /// Every layout was predicted.
    Exhaustive,
    /// A beam search (see the module docs).
    Beam,
}

/// The optimizer's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The best layouts within the budgets, best first, distinct.
    pub layouts: Vec<Ranked>,
    /// What each heuristic chooses.
    pub heuristics: Vec<HeuristicChoice>,
    /// How the layouts were searched.
    pub search: SearchKind,
    /// How many layouts were predicted.
    pub predicted: usize,
}

/// The candidates of `workload` under `options`.
struct Candidates {
    subspaces: Vec<Vec<usize>>,
    indexes: Vec<usize>,
    globals: Vec<usize>,
    /// The kinds of layout considered: `false` subspaces, `true` replexes.
    modes: Vec<bool>,
    /// The space's f: a replex layout needs at least f replexes (and
    /// hybrids).
    f: u32,
    /// The space, whose hybrids a replex layout keeps when applied.
    space: tessera_types::SpaceDesc,
}

impl Candidates {
    fn new(workload: &Workload, options: &Options) -> Candidates {
        let attrs = workload.narrowing_attrs();
        let mut subspaces = Vec::new();
        for mask in 1u64..(1u64 << attrs.len().min(20)) {
            if (mask.count_ones() as usize) <= options.dims_max {
                subspaces.push(
                    attrs
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, &a)| a)
                        .collect(),
                );
            }
        }
        subspaces.sort();
        // A global index orders strings too, so a range on one uses it.
        let globals = if options.future {
            let mut g: Vec<usize> = workload
                .searches()
                .flat_map(|(_, s)| s.checks.iter())
                .filter(|&&(a, op)| {
                    a != 0
                        && workload.space.attrs[a].dtype.is_hashable()
                        && matches!(op, SearchOp::Eq | SearchOp::Range)
                })
                .map(|&(a, _)| a)
                .collect();
            g.sort_unstable();
            g.dedup();
            g
        } else {
            Vec::new()
        };
        Candidates {
            subspaces,
            indexes: if options.model == Model::Tessera {
                attrs
            } else {
                // The thesis's model has no local index to gain from.
                Vec::new()
            },
            globals,
            modes: Candidates::modes(workload, options),
            f: workload.space.fault_tolerance,
            space: workload.space.clone(),
        }
    }

    /// The space's own kind of layout, and with `future` the other too.
    fn modes(workload: &Workload, options: &Options) -> Vec<bool> {
        let own = workload.space.replex.is_some();
        if options.future {
            vec![own, !own]
        } else {
            vec![own]
        }
    }

    /// An upper bound on the number of layouts.
    fn count(&self) -> u64 {
        let bits =
            self.subspaces.len() + self.indexes.len() + self.globals.len() + (self.modes.len() - 1);
        if bits >= 63 {
            u64::MAX
        } else {
            1 << bits
        }
    }

    /// Every layout, canonical and once each.
    fn every(&self) -> BTreeSet<Layout> {
        let mut out = BTreeSet::new();
        let subsets = |n: usize| 0u64..(1u64 << n);
        let pick = |items: &[usize], mask: u64| -> Vec<usize> {
            items
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, &a)| a)
                .collect()
        };
        for s in subsets(self.subspaces.len()) {
            let subspaces: Vec<Vec<usize>> = self
                .subspaces
                .iter()
                .enumerate()
                .filter(|(i, _)| s & (1 << i) != 0)
                .map(|(_, sub)| sub.clone())
                .collect();
            let free: Vec<usize> = self
                .indexes
                .iter()
                .copied()
                .filter(|a| !subspaces.iter().any(|sub| sub.contains(a)))
                .collect();
            for i in subsets(free.len()) {
                for g in subsets(self.globals.len()) {
                    for &replex in &self.modes {
                        let layout = Layout::new(
                            subspaces.clone(),
                            pick(&free, i),
                            pick(&self.globals, g),
                            replex,
                        );
                        if self.declarable(&layout) {
                            out.insert(layout);
                        }
                    }
                }
            }
        }
        out
    }

    /// Every layout one move away from `layout`.
    fn neighbours(&self, layout: &Layout) -> Vec<Layout> {
        let mut out = Vec::new();
        let with_subspaces = |subspaces: Vec<Vec<usize>>| {
            Layout::new(
                subspaces,
                layout.indexes.clone(),
                layout.global_indexes.clone(),
                layout.replex,
            )
        };
        for (i, _) in layout.subspaces.iter().enumerate() {
            let mut fewer = layout.subspaces.clone();
            fewer.remove(i);
            out.push(with_subspaces(fewer.clone()));
            for c in &self.subspaces {
                let mut swapped = fewer.clone();
                swapped.push(c.clone());
                out.push(with_subspaces(swapped));
            }
        }
        for c in &self.subspaces {
            let mut more = layout.subspaces.clone();
            more.push(c.clone());
            out.push(with_subspaces(more));
        }
        let toggle = |list: &[usize], a: usize| -> Vec<usize> {
            if list.contains(&a) {
                list.iter().copied().filter(|&x| x != a).collect()
            } else {
                list.iter().copied().chain([a]).collect()
            }
        };
        for &a in &self.indexes {
            out.push(Layout::new(
                layout.subspaces.clone(),
                toggle(&layout.indexes, a),
                layout.global_indexes.clone(),
                layout.replex,
            ));
        }
        for &a in &self.globals {
            out.push(Layout::new(
                layout.subspaces.clone(),
                layout.indexes.clone(),
                toggle(&layout.global_indexes, a),
                layout.replex,
            ));
        }
        if self.modes.len() > 1 {
            out.push(
                Layout {
                    replex: !layout.replex,
                    ..layout.clone()
                }
                .with_hybrids([]),
            );
        }
        out.retain(|n| n != layout && self.declarable(n));
        out
    }

    /// Whether `layout` is declarable as applying it would leave the
    /// space (with the space's hybrids whose sides it keeps).
    fn declarable(&self, layout: &Layout) -> bool {
        layout.keeping(&self.space).declarable(self.f)
    }
}

/// Predictions made so far, and the budgets that decide which count.
struct Evaluator<'a> {
    workload: &'a Workload,
    params: &'a Params,
    options: &'a Options,
    seen: BTreeMap<Layout, Prediction>,
    /// [`rebuild_read_amplification`] by the parts it depends on.
    amplification: BTreeMap<CopyParts, f64>,
}

/// What a layout's rebuild reads depends on: whether it is a replex
/// layout, its replexes (or subspaces) and its hybrids.
type CopyParts = (bool, Vec<Vec<usize>>, Vec<Hybrid>);

impl Evaluator<'_> {
    /// The prediction for `layout` as applying it would leave the space:
    /// with the space's hybrids whose sides it keeps.
    fn predict(&mut self, layout: &Layout) -> &Prediction {
        let (workload, params, model) = (self.workload, self.params, self.options.model);
        let layout = layout.keeping(&workload.space);
        if !self.seen.contains_key(&layout) {
            // The rebuild's read amplification depends on the replexes
            // and hybrids only: computed once for every index variant.
            let key = (
                layout.replex,
                layout.subspaces.clone(),
                layout.hybrids.clone(),
            );
            let amplification = *self
                .amplification
                .entry(key)
                .or_insert_with(|| rebuild_read_amplification(workload, &layout));
            let p = predict_with(model, workload, &layout, params, amplification);
            self.seen.insert(layout.clone(), p);
        }
        &self.seen[&layout]
    }

    /// With a recovery budget, each replex layout seen that misses it
    /// gains hybrids, one at a time, the one that shortens its recovery
    /// most, until it fits or no hybrid shortens it.
    fn add_hybrids(&mut self) {
        let Some(budget) = self.options.recovery_budget_s else {
            return;
        };
        let f = self.workload.space.fault_tolerance;
        // The fastest replex layouts over the budget, as many as a beam
        // keeps: the others would not rank above them with a hybrid more.
        let mut over: Vec<Ranked> = self
            .seen
            .iter()
            .filter(|(l, p)| l.replex && l.declarable(f) && p.recovery_s > budget)
            .map(|(l, p)| Ranked {
                layout: l.clone(),
                prediction: p.clone(),
            })
            .collect();
        over.sort_by_key(rank_key);
        let starts: Vec<Layout> = over
            .into_iter()
            .take(self.options.beam_width.max(1))
            .map(|r| r.layout)
            .collect();
        for mut layout in starts {
            loop {
                let now = self.predict(&layout).recovery_s;
                if now <= budget {
                    break;
                }
                let mut best: Option<(f64, Layout)> = None;
                for next in hybrid_options(&layout, self.workload, self.params) {
                    let r = self.predict(&next).recovery_s;
                    if r < now && best.as_ref().is_none_or(|(b, _)| r < *b) {
                        best = Some((r, next));
                    }
                }
                match best {
                    Some((_, next)) => layout = next.keeping(&self.workload.space),
                    None => break,
                }
            }
        }
    }

    fn fits(&self, layout: &Layout, p: &Prediction) -> bool {
        layout.declarable(self.workload.space.fault_tolerance)
            && self
                .options
                .storage_budget
                .is_none_or(|b| p.bytes_per_object <= b)
            && self
                .options
                .recovery_budget_s
                .is_none_or(|b| p.recovery_s <= b)
    }

    /// Every predicted layout that fits, of a kind considered, best
    /// first (the heuristics' layouts of subspaces are predicted for a
    /// replex space too, to compare with).
    fn ranked(&self) -> Vec<Ranked> {
        let modes = Candidates::modes(self.workload, self.options);
        let mut out: Vec<Ranked> = self
            .seen
            .iter()
            .filter(|(l, p)| self.fits(l, p) && modes.contains(&l.replex))
            .map(|(l, p)| Ranked {
                layout: l.clone(),
                prediction: p.clone(),
            })
            .collect();
        out.sort_by_key(rank_key);
        out
    }
}

/// Best first: throughput descending, with predictions that agree to nine
/// digits tied (A.4 #7); ties to fewer subspaces, fewer dimensions, fewer
/// indexes, then layout order. The throughput is quantised on a log scale
/// so that the order is total.
fn rank_key(r: &Ranked) -> (i64, usize, usize, usize, Layout) {
    let t = r.prediction.ops_per_s.max(f64::MIN_POSITIVE);
    let quantised = (t.ln() * 1e9).round() as i64;
    (
        -quantised,
        r.layout.subspaces.len(),
        r.layout.dimensions(),
        r.layout.indexes.len() + r.layout.global_indexes.len(),
        r.layout.clone(),
    )
}

/// The top layouts for `workload` under `options`, and the heuristics'.
pub fn advise(
    workload: &Workload,
    params: &Params,
    options: &Options,
) -> Result<Advice, AdviseError> {
    if options.top == 0 {
        return Err(AdviseError::NoTop);
    }
    for (what, budget) in [
        ("storage", options.storage_budget),
        ("recovery", options.recovery_budget_s),
    ] {
        if let Some(value) = budget.filter(|b| b.is_nan() || *b < 0.0) {
            return Err(AdviseError::BadBudget { what, value });
        }
    }
    let candidates = Candidates::new(workload, options);
    let mut eval = Evaluator {
        workload,
        params,
        options,
        seen: BTreeMap::new(),
        amplification: BTreeMap::new(),
    };
    let heuristics: Vec<(Heuristic, Layout)> = Heuristic::ALL
        .iter()
        .map(|&h| (h, h.choose(workload)))
        .collect();
    for (_, layout) in &heuristics {
        eval.predict(layout);
    }
    // The space's own layout competes whatever the candidates are: it may
    // hold a part no search narrows, and for a replex space whose f
    // exceeds the attributes its searches narrow it may be the one
    // declarable layout there is.
    eval.predict(&Layout::of_space(&workload.space));
    let search = if candidates.count() <= options.exhaustive_max {
        for layout in candidates.every() {
            eval.predict(&layout);
        }
        SearchKind::Exhaustive
    } else {
        beam(&candidates, &mut eval, &heuristics);
        SearchKind::Beam
    };
    eval.add_hybrids();
    let ranked = eval.ranked();
    if ranked.is_empty() {
        // What the layouts that could be proposed need at least: those of
        // a kind considered (a replex space's smallest layout is no
        // layout of subspaces).
        let modes = Candidates::modes(workload, options);
        let f = workload.space.fault_tolerance;
        let considered = || {
            eval.seen
                .iter()
                .filter(|(l, _)| modes.contains(&l.replex) && l.declarable(f))
                .map(|(_, p)| p)
        };
        let least = |of: fn(&Prediction) -> f64| considered().map(of).fold(f64::INFINITY, f64::min);
        let (bytes_per_object, recovery_s) = if considered().next().is_some() {
            (least(|p| p.bytes_per_object), least(|p| p.recovery_s))
        } else {
            let smallest = eval.predict(&Layout::default());
            (smallest.bytes_per_object, smallest.recovery_s)
        };
        return Err(AdviseError::NothingFits {
            bytes_per_object,
            recovery_s,
        });
    }
    let heuristics = heuristics
        .into_iter()
        .map(|(heuristic, layout)| {
            let prediction = eval.predict(&layout).clone();
            HeuristicChoice {
                heuristic,
                within_budget: eval.fits(&layout, &prediction),
                ranked: Ranked { layout, prediction },
            }
        })
        .collect();
    Ok(Advice {
        layouts: ranked.into_iter().take(options.top).collect(),
        heuristics,
        search,
        predicted: eval.seen.len(),
    })
}

/// `layout` with one more hybrid, for each pair of its sides (the key
/// subspace and its replexes) without one: groups from
/// [`hybrid_groups`]. None for a layout of subspaces, nor where the
/// cluster's daemons (`params.daemons`) would be fewer than its parts
/// with the hybrid: the placement that keeps two copies of an object off
/// one daemon needs a daemon per part (`docs/design/replex.md`).
pub fn hybrid_options(layout: &Layout, workload: &Workload, params: &Params) -> Vec<Layout> {
    if !layout.replex {
        return Vec::new();
    }
    let parts = 1 + layout.subspaces.len() + layout.hybrids.len() + 1;
    if (params.daemons as usize) < parts {
        return Vec::new();
    }
    let partitions = workload.space.partitions.max(1);
    let intervals = |side: &Vec<usize>| -> u32 {
        if *side == [0] {
            partitions
        } else {
            tessera_types::region::grid_for_partitions(partitions, side.len())[0]
        }
    };
    let sides: Vec<Vec<usize>> = std::iter::once(vec![0])
        .chain(layout.subspaces.iter().cloned())
        .collect();
    let mut out = Vec::new();
    for (i, a) in sides.iter().enumerate() {
        for b in &sides[i + 1..] {
            if layout.has_hybrid(a, b) {
                continue;
            }
            let Some(groups) = hybrid_groups(intervals(a), intervals(b), partitions) else {
                continue;
            };
            out.push(layout.clone().with_hybrids([crate::layout::Hybrid {
                sides: [a.clone(), b.clone()],
                groups,
            }]));
        }
    }
    out
}

/// Group counts for a hybrid between sides of `m_a` and `m_b` intervals:
/// divisors of each, at least 2 (a single group would leave no daemon of
/// a side free to hold the hybrid's regions), whose product — the
/// hybrid's regions — is at most `partitions` and as large as can be,
/// then as even as can be, then with more groups on the first side. A
/// lost region of side A is then read from `m_a / N1`-th of the objects
/// rather than from all of them. None when a side has no such divisor.
pub fn hybrid_groups(m_a: u32, m_b: u32, partitions: u32) -> Option<[u32; 2]> {
    let divisors = |m: u32| (2..=m).filter(move |d| m.is_multiple_of(*d));
    divisors(m_a)
        .flat_map(|x| divisors(m_b).map(move |y| [x, y]))
        .filter(|[x, y]| u64::from(*x) * u64::from(*y) <= u64::from(partitions))
        .max_by_key(|[x, y]| (x * y, std::cmp::Reverse(x.abs_diff(*y)), *x))
}

/// The beam search of the module docs.
fn beam(candidates: &Candidates, eval: &mut Evaluator<'_>, heuristics: &[(Heuristic, Layout)]) {
    let width = eval.options.beam_width.max(1);
    // Each start in every kind considered: a replex space's search starts
    // from the heuristics' subspaces as replexes.
    let mut beam: Vec<Layout> = std::iter::once(Layout::default())
        .chain(heuristics.iter().map(|(_, l)| l.clone()))
        .flat_map(|l| {
            candidates.modes.iter().map(move |&replex| {
                Layout {
                    replex,
                    ..l.clone()
                }
                .with_hybrids([])
            })
        })
        .filter(|l| candidates.declarable(l))
        .collect();
    beam.sort();
    beam.dedup();
    loop {
        for layout in &beam {
            for next in candidates.neighbours(layout) {
                eval.predict(&next);
            }
        }
        // The next beam: the best layouts seen, fitting the budgets first
        // (a layout over budget may still lead to one within it).
        let mut all: Vec<Ranked> = eval
            .seen
            .iter()
            .filter(|(l, _)| candidates.modes.contains(&l.replex))
            .map(|(l, p)| Ranked {
                layout: l.clone(),
                prediction: p.clone(),
            })
            .collect();
        all.sort_by_key(|r| (!eval.fits(&r.layout, &r.prediction), rank_key(r)));
        let next: Vec<Layout> = all.into_iter().take(width).map(|r| r.layout).collect();
        let mut sorted = next.clone();
        sorted.sort();
        if sorted == beam {
            return;
        }
        beam = sorted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::predict;
    use crate::workload::parse_workload;
    use proptest::prelude::*;

    const SPACE: &str = "space hotels key id attributes city, addr, post, tel, int price create 256 partitions tolerate 1 failure";
    const CITY: usize = 1;
    const ADDR: usize = 2;
    const POST: usize = 3;
    const TEL: usize = 4;
    const PRICE: usize = 5;

    fn workload(classes: &str) -> Workload {
        let text = format!(r#"{{"space": "{SPACE}", "objects": 256000, "classes": [{classes}]}}"#);
        parse_workload(&text, None).expect("valid workload")
    }

    /// RESEARCH.md A.4 #5's workload A at a given modify share.
    fn workload_a(modify: f64) -> Workload {
        let s = 1.0 - modify;
        workload(&format!(
            r#"{{"p": {}, "search": {{"city": "eq"}}}},
               {{"p": {}, "search": {{"addr": "eq", "post": "eq"}}}},
               {{"p": {}, "search": {{"addr": "eq", "post": "eq", "tel": "eq"}}}},
               {{"p": {}, "search": {{"city": "eq", "addr": "eq", "post": "eq", "tel": "eq"}}}},
               {{"p": {}, "modify": ["tel"]}}, {{"p": {}, "modify": ["price"]}}"#,
            0.1 * s,
            0.2 * s,
            0.3 * s,
            0.4 * s,
            modify / 2.0,
            modify / 2.0
        ))
    }

    #[test]
    fn heuristics_choose_what_their_rules_say() {
        // Searches: ⟨city⟩ .5, ⟨addr, post⟩ .3, ⟨post⟩ .2.
        let w = workload(
            r#"{"p": 0.5, "search": {"city": "eq"}},
               {"p": 0.3, "search": {"addr": "eq", "post": "eq"}},
               {"p": 0.2, "search": {"post": "eq"}}"#,
        );
        let one = |a: usize| vec![a];
        assert_eq!(Heuristic::NoSubspace.choose(&w), Layout::default());
        assert_eq!(
            Heuristic::Hyperspace.choose(&w).subspaces,
            vec![vec![CITY, ADDR, POST]]
        );
        assert_eq!(
            Heuristic::SubspacesAll.choose(&w).subspaces,
            vec![one(CITY), one(ADDR), one(POST)]
        );
        // post occurs in .5 of the classes, like city: the name first wins.
        assert_eq!(Heuristic::Dominant.choose(&w).subspaces, vec![one(CITY)]);
        // Greedy: city (tie with post, by name), then post covers the rest.
        assert_eq!(
            Heuristic::Greedy.choose(&w).subspaces,
            vec![one(CITY), one(POST)]
        );
    }

    #[test]
    fn the_greedy_trap_costs_greedy_its_writes() {
        // A.4 #5: Q = ⟨addr, post⟩ plus frequent modifies of addr. Greedy
        // picks ⟨addr⟩ (tied with post, first by name) and moves the object
        // on every modify; ⟨post⟩ serves the search without moving it.
        let w = workload(
            r#"{"p": 0.1, "search": {"addr": "eq", "post": "eq"}},
               {"p": 0.9, "modify": ["addr"]}"#,
        );
        let options = Options {
            model: Model::Thesis,
            ..Options::default()
        };
        let advice = advise(&w, &Params::default(), &options).unwrap();
        let greedy = &advice.heuristics[4];
        assert_eq!(greedy.ranked.layout.subspaces, vec![vec![ADDR]]);
        let best = &advice.layouts[0];
        assert_eq!(best.layout.subspaces, vec![vec![POST]]);
        // Hand-derived with K = 2, α = 2.66: a modify costs 1 + 2(1 + 2α)
        // hops under greedy and 1 + 2·2 = 5 under ⟨post⟩; the search is the
        // same one-region cost under both.
        let search_s = 1_000.0 * 3.31e-7;
        let hop = 1.0 / 98_000.0;
        let greedy_t = 1.0 / (0.1 * search_s + 0.9 * (1.0 + 2.0 * (1.0 + 2.0 * 2.66)) * hop);
        let best_t = 1.0 / (0.1 * search_s + 0.9 * 5.0 * hop);
        assert!((greedy.ranked.prediction.ops_per_s - greedy_t).abs() < 1e-6 * greedy_t);
        assert!((best.prediction.ops_per_s - best_t).abs() < 1e-6 * best_t);
        assert!(best_t >= 1.3 * greedy_t);
    }

    #[test]
    fn exhaustive_and_beam_agree_on_the_thesis_workloads() {
        for model in [Model::Thesis, Model::Tessera] {
            for modify in [0.1, 0.5, 0.9] {
                let w = workload_a(modify);
                // Two dimensions at most keeps the exhaustive side small
                // (2^14 layouts with the local indexes).
                let exhaustive = Options {
                    model,
                    dims_max: 2,
                    exhaustive_max: u64::MAX,
                    ..Options::default()
                };
                let beam = Options {
                    exhaustive_max: 0,
                    ..exhaustive.clone()
                };
                let params = Params::default();
                let a = advise(&w, &params, &exhaustive).unwrap();
                let b = advise(&w, &params, &beam).unwrap();
                assert_eq!(a.search, SearchKind::Exhaustive);
                assert_eq!(b.search, SearchKind::Beam);
                assert!(b.predicted < a.predicted, "the beam predicts fewer layouts");
                assert_eq!(
                    a.layouts[0].layout, b.layouts[0].layout,
                    "{model:?} at {modify} modifies"
                );
            }
        }
    }

    #[test]
    fn four_attributes_give_the_thesis_count_of_configurations() {
        // A.4 #3 / A1: with 4 attributes and no bound on dimensions there
        // are 2^15 sets of subspaces (the thesis's model, no indexes).
        let w = workload(
            r#"{"p": 1, "search": {"city": "eq", "addr": "eq", "post": "eq", "tel": "eq"}}"#,
        );
        let options = Options {
            model: Model::Thesis,
            dims_max: 4,
            exhaustive_max: u64::MAX,
            ..Options::default()
        };
        let advice = advise(&w, &Params::default(), &options).unwrap();
        assert_eq!(advice.predicted, 1 << 15);
    }

    #[test]
    fn budgets_are_respected_and_an_impossible_one_is_refused() {
        let w = workload_a(0.1);
        let params = Params::default();
        let free = advise(&w, &params, &Options::default()).unwrap();
        let tight = free.layouts[0].prediction.bytes_per_object - 1.0;
        let options = Options {
            storage_budget: Some(tight),
            recovery_budget_s: Some(free.layouts[0].prediction.recovery_s * 2.0),
            top: 50,
            ..Options::default()
        };
        let advice = advise(&w, &params, &options).unwrap();
        assert!(!advice.layouts.is_empty());
        for r in &advice.layouts {
            assert!(r.prediction.bytes_per_object <= tight);
        }
        assert_ne!(advice.layouts[0].layout, free.layouts[0].layout);
        let none = Options {
            storage_budget: Some(10.0),
            ..Options::default()
        };
        assert!(matches!(
            advise(&w, &params, &none),
            Err(AdviseError::NothingFits { .. })
        ));
    }

    #[test]
    fn future_parts_are_proposed_only_when_asked() {
        // A search on tel alone, writes on everything else: a global index
        // on tel beats a subspace (which every insert would copy).
        let w = workload(r#"{"p": 0.5, "search": {"tel": "eq"}}, {"p": 0.5, "insert": true}"#);
        let params = Params::default();
        let now = advise(&w, &params, &Options::default()).unwrap();
        let space = &w.space;
        assert!(now
            .layouts
            .iter()
            .all(|r| !r.layout.converts(space) && r.layout.global_indexes.is_empty()));
        let later = advise(
            &w,
            &params,
            &Options {
                future: true,
                ..Options::default()
            },
        )
        .unwrap();
        let top = &later.layouts[0].layout;
        assert!(
            top.converts(space) || !top.global_indexes.is_empty(),
            "{top:?}"
        );
        assert!(later
            .layouts
            .iter()
            .all(|r| r.layout.declarable(space.fault_tolerance)));
        assert!(later.layouts[0].prediction.ops_per_s > now.layouts[0].prediction.ops_per_s);
    }

    /// A replex layout over the recovery budget gains the hybrid that
    /// brings it within; without a budget none is proposed.
    #[test]
    fn a_recovery_budget_brings_a_hybrid() {
        let text = r#"{"space": "space r key k attributes a, b replex a create 8 partitions tolerate 1 failure",
            "objects": 1000000, "classes": [{"p": 0.5, "search": {"a": "eq"}}, {"p": 0.5, "modify": ["b"]}]}"#;
        let w = parse_workload(text, None).unwrap();
        let params = Params::default();
        let free = advise(&w, &params, &Options::default()).unwrap();
        let top = &free.layouts[0];
        assert!(
            top.layout.replex && top.layout.hybrids.is_empty(),
            "{:?}",
            top.layout
        );
        assert!(free.layouts.iter().all(|r| r.layout.hybrids.is_empty()));
        // A hybrid of the key subspace and a (8 intervals each, groups
        // 4 and 2) rebuilds from a third of the reads (8/3 regions'
        // worth against 8) with half again as many copies (3 against
        // 2): half the recovery time.
        let budget = top.prediction.recovery_s * 0.6;
        let bound = Options {
            recovery_budget_s: Some(budget),
            ..Options::default()
        };
        let advice = advise(&w, &params, &bound).unwrap();
        let chosen = &advice.layouts[0];
        assert_eq!(chosen.layout.subspaces, top.layout.subspaces);
        assert_eq!(
            chosen.layout.hybrids,
            vec![crate::layout::Hybrid {
                sides: [vec![0], vec![1]],
                groups: [4, 2]
            }]
        );
        let ratio = chosen.prediction.recovery_s / top.prediction.recovery_s;
        assert!((ratio - 0.5).abs() < 1e-9, "{ratio}");
        assert!(advice
            .layouts
            .iter()
            .all(|r| r.prediction.recovery_s <= budget));
        // Its writes pay the hybrid's copy.
        assert!(chosen.prediction.ops_per_s < top.prediction.ops_per_s);
        // Below what one hybrid (the only pair) reaches: nothing fits.
        let tight = Options {
            recovery_budget_s: Some(top.prediction.recovery_s * 0.4),
            ..Options::default()
        };
        match advise(&w, &params, &tight) {
            Err(AdviseError::NothingFits { recovery_s, .. }) => {
                // The quickest to rebuild is the replex layout with the
                // hybrid, not the key subspace alone (no replex space).
                let want = chosen.prediction.recovery_s;
                assert!(
                    (recovery_s - want).abs() < 1e-9 * want,
                    "{recovery_s} vs {want}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Too few daemons to place a third part apart: no hybrid.
        let two = Params {
            daemons: 2,
            ..Params::default()
        };
        assert!(hybrid_options(&top.layout, &w, &two).is_empty());
        assert_eq!(hybrid_options(&top.layout, &w, &params).len(), 1);
    }

    /// A hybrid is a copy: a replex space of one replex and one hybrid
    /// tolerates 2 failures (its default), and advice keeps the hybrid.
    #[test]
    fn a_space_s_hybrid_counts_toward_its_fault_tolerance() {
        let text = r#"{"space": "space r key k attributes a, b replex a hybrid k, a groups 2, 4 create 8 partitions",
            "objects": 1000, "classes": [{"p": 0.5, "search": {"a": "eq"}}, {"p": 0.5, "get": true}]}"#;
        let w = parse_workload(text, None).unwrap();
        assert_eq!(w.space.fault_tolerance, 2);
        let own = Layout::of_space(&w.space);
        assert!(own.declarable(2), "{own:?}");
        let advice = advise(&w, &Params::default(), &Options::default()).expect("advice");
        for r in &advice.layouts {
            assert_eq!(r.layout.hybrids.len(), 1, "{:?}", r.layout);
            assert!(r.layout.declarable(2));
        }
    }

    #[test]
    fn hybrid_groups_divide_their_sides_and_fit_the_partitions() {
        assert_eq!(hybrid_groups(8, 8, 8), Some([4, 2]));
        assert_eq!(hybrid_groups(24, 24, 24), Some([6, 4]));
        // 7 has no divisor but itself: 7 × 2 > 8, 7 × ... none fits.
        assert_eq!(hybrid_groups(7, 8, 8), None);
        assert_eq!(hybrid_groups(1, 8, 8), None);
        for (a, b, p) in [(12, 18, 16), (256, 16, 256), (6, 6, 36)] {
            let [x, y] = hybrid_groups(a, b, p).unwrap();
            assert!(a % x == 0 && b % y == 0 && x >= 2 && y >= 2 && x * y <= p);
            // No other pair of divisors makes more regions within p.
            for u in (2..=a).filter(|u| a % u == 0) {
                for v in (2..=b).filter(|v| b % v == 0) {
                    assert!(u * v > p || u * v <= x * y, "{u} {v} against {x} {y}");
                }
            }
        }
    }

    #[test]
    fn the_space_s_own_layout_is_always_a_candidate() {
        // A replex space of f = 2 needs two replexes, but its searches
        // narrow one attribute only: no replex layout built from the
        // candidates is declarable, and the space's own layout still is.
        let text = r#"{"space": "space r key id attributes string city, int stars replex city replex stars create 8 partitions tolerate 2 failures",
                       "objects": 10000,
                       "classes": [{"p": 0.5, "search": {"city": "eq"}}, {"p": 0.5, "modify": ["city"]}]}"#;
        let w = parse_workload(text, None).expect("valid workload");
        let own = Layout::of_space(&w.space);
        assert!(own.replex && own.declarable(2));
        let advice = advise(&w, &Params::default(), &Options::default()).unwrap();
        assert!(
            advice.layouts.iter().any(|r| r.layout == own),
            "{:?}",
            advice.layouts
        );
        assert!(advice.layouts.iter().all(|r| r.layout.declarable(2)));
        // A space of subspaces keeps its own layout among those predicted
        // too, even with a subspace no search narrows.
        let w = workload(r#"{"p": 1.0, "search": {"city": "eq"}}"#);
        let mut space = w.space.clone();
        space.subspaces = vec![vec![TEL]];
        let w = Workload { space, ..w };
        let advice = advise(
            &w,
            &Params::default(),
            &Options {
                top: 100,
                ..Options::default()
            },
        )
        .unwrap();
        let own = Layout::of_space(&w.space);
        assert!(advice.layouts.iter().any(|r| r.layout == own));
    }

    fn arbitrary_workload() -> impl Strategy<Value = Workload> {
        let attrs = prop::sample::subsequence(vec!["city", "addr", "post", "price"], 1..=3);
        let op = prop::sample::select(vec!["eq", "range"]);
        let search = (prop::collection::vec((attrs.clone(), op), 1..=3)).prop_map(|qs| {
            qs.into_iter()
                .map(|(attrs, op)| {
                    let checks: Vec<String> =
                        attrs.iter().map(|a| format!(r#""{a}": "{op}""#)).collect();
                    format!(r#""search": {{{}}}"#, checks.join(","))
                })
                .collect::<Vec<String>>()
        });
        let modify = prop::collection::vec(attrs, 0..=2).prop_map(|ms| {
            ms.into_iter()
                .map(|m| {
                    let names: Vec<String> = m.iter().map(|a| format!(r#""{a}""#)).collect();
                    format!(r#""modify": [{}]"#, names.join(","))
                })
                .collect::<Vec<String>>()
        });
        (search, modify, prop::collection::vec(1u32..10, 6)).prop_map(|(s, m, weights)| {
            let bodies: Vec<String> = s.into_iter().chain(m).collect();
            let total: u32 = weights.iter().take(bodies.len()).sum();
            let classes: Vec<String> = bodies
                .iter()
                .zip(&weights)
                .map(|(b, &w)| format!(r#"{{"p": {}, {b}}}"#, f64::from(w) / f64::from(total)))
                .collect();
            workload(&classes.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn the_best_layout_is_at_least_every_heuristic_that_fits(
            w in arbitrary_workload(),
            budget in prop::option::of(600.0f64..3000.0),
        ) {
            let options = Options { storage_budget: budget, ..Options::default() };
            if let Ok(advice) = advise(&w, &Params::default(), &options) {
                let best = advice.layouts[0].prediction.ops_per_s;
                for h in advice.heuristics.iter().filter(|h| h.within_budget) {
                    prop_assert!(best >= h.ranked.prediction.ops_per_s * (1.0 - 1e-9));
                }
                for pair in advice.layouts.windows(2) {
                    prop_assert!(pair[0].prediction.ops_per_s >= pair[1].prediction.ops_per_s * (1.0 - 1e-9));
                    prop_assert_ne!(&pair[0].layout, &pair[1].layout);
                }
                for r in &advice.layouts {
                    prop_assert!(budget.is_none_or(|b| r.prediction.bytes_per_object <= b));
                }
            }
        }

        #[test]
        fn the_beam_never_beats_the_exhaustive_optimum(w in arbitrary_workload()) {
            let params = Params::default();
            let exhaustive = advise(&w, &params, &Options { exhaustive_max: u64::MAX, ..Options::default() }).unwrap();
            let beam = advise(&w, &params, &Options { exhaustive_max: 0, ..Options::default() }).unwrap();
            prop_assert!(beam.layouts[0].prediction.ops_per_s <= exhaustive.layouts[0].prediction.ops_per_s * (1.0 + 1e-9));
        }

        #[test]
        fn an_unused_subspace_never_raises_modify_throughput(
            w in arbitrary_workload(),
            extra in prop::sample::select(vec![CITY, ADDR, POST, TEL, PRICE]),
            model in prop::sample::select(vec![Model::Thesis, Model::Tessera]),
        ) {
            let params = Params::default();
            let base = Heuristic::Greedy.choose(&w);
            let mut subspaces = base.subspaces.clone();
            subspaces.push(vec![extra, TEL]);
            let more = Layout::new(subspaces, base.indexes.clone(), vec![], false);
            prop_assume!(more != base);
            let before = predict(model, &w, &base, &params);
            let after = predict(model, &w, &more, &params);
            for (class, (b, a)) in w.classes.iter().zip(before.class_costs_s.iter().zip(&after.class_costs_s)) {
                if !matches!(class.kind, crate::workload::ClassKind::Search(_)) {
                    prop_assert!(a >= b, "a write got cheaper: {b} → {a}");
                }
            }
            prop_assert!(after.bytes_per_object > before.bytes_per_object);
        }

        #[test]
        fn in_the_thesis_model_another_subspace_never_slows_a_search(
            w in arbitrary_workload(),
            extra in prop::sample::subsequence(vec![CITY, ADDR, POST, PRICE], 1..=2),
        ) {
            let params = Params::default();
            let base = Heuristic::Dominant.choose(&w);
            let mut subspaces = base.subspaces.clone();
            subspaces.push(extra);
            let more = Layout::of_subspaces(subspaces);
            let before = predict(Model::Thesis, &w, &base, &params);
            let after = predict(Model::Thesis, &w, &more, &params);
            for (class, (b, a)) in w.classes.iter().zip(before.class_costs_s.iter().zip(&after.class_costs_s)) {
                if matches!(class.kind, crate::workload::ClassKind::Search(_)) {
                    prop_assert!(a <= b);
                }
            }
        }
    }
}
