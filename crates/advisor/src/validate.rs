//! Judging the model against measurements (RESEARCH.md A.1's quality
//! metrics, A.6): which layouts a validation run measures, and, once they
//! are measured, the mean absolute relative error, Kendall's τ-b between
//! the predicted and the measured rankings, and where the predicted best
//! landed. Pure: `tessera bench layouts` does the measuring.

use crate::layout::Layout;
use crate::model::{predict, Model, Prediction};
use crate::optimize::{Advice, Heuristic, Ranked};
use crate::params::Params;
use crate::workload::{ClassKind, Workload};
use serde::{Deserialize, Serialize};

/// Two throughputs closer than this, relative to the larger, are a tie
/// (the optimizer's nine digits, A.4 #7).
const TIE: f64 = 1e-9;

/// A layout a validation run measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampled {
    /// The layout.
    pub layout: Layout,
    /// What the model predicts for it.
    pub prediction: Prediction,
    /// Its rank among the optimizer's top groups of equal predictions
    /// (1 = the advice), if it represents one of them.
    pub top_rank: Option<usize>,
    /// Whether it was drawn at random from the ranking below the top.
    #[serde(default)]
    pub drawn: bool,
    /// The heuristics that choose it.
    pub heuristics: Vec<Heuristic>,
}

/// How a validation run picks the layouts it measures: the thesis's
/// (RESEARCH.md A.1) five best predicted configurations, equal
/// predictions grouped, and five drawn at random from the rest; Tessera
/// adds each heuristic's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    /// Groups taken from the top of the ranking, one layout each.
    pub top: usize,
    /// Groups drawn at random from the rest of the ranking, one layout
    /// each.
    pub random: usize,
    /// Seeds the draw: one ranking and one seed draw the same layouts.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            top: 5,
            random: 5,
            seed: 1,
        }
    }
}

/// The layouts to measure from `advice`, whose `layouts` are the
/// optimizer's whole ranking, best first. The ranking is cut into groups
/// of predictions the optimizer ties (A.4 #7): the model cannot order two
/// layouts of one group, so measuring both tests nothing of it, and each
/// group is measured through its first layout (the one with the fewest
/// subspaces, dimensions and indexes). The first `sampling.top` groups
/// come first, in order; then `sampling.random` of the other groups, drawn
/// uniformly without replacement and listed in ranking order; then each
/// heuristic's layout that is not already in the list. A layout several
/// heuristics choose appears once, naming all of them.
pub fn sampled_layouts(advice: &Advice, sampling: Sampling) -> Vec<Sampled> {
    let mut groups: Vec<&Ranked> = Vec::new();
    for r in &advice.layouts {
        match groups.last() {
            Some(first) if tied(first.prediction.ops_per_s, r.prediction.ops_per_s) => {}
            _ => groups.push(r),
        }
    }
    let top = sampling.top.min(groups.len());
    let mut rest: Vec<usize> = (top..groups.len()).collect();
    let mut state = sampling.seed;
    let mut drawn: Vec<usize> = (0..sampling.random.min(rest.len()))
        .map(|_| {
            let i = (splitmix64(&mut state) % rest.len() as u64) as usize;
            rest.swap_remove(i)
        })
        .collect();
    drawn.sort_unstable();
    let mut out: Vec<Sampled> = (0..top)
        .chain(drawn)
        .map(|g| Sampled {
            layout: groups[g].layout.clone(),
            prediction: groups[g].prediction.clone(),
            top_rank: (g < top).then_some(g + 1),
            drawn: g >= top,
            heuristics: Vec::new(),
        })
        .collect();
    for choice in &advice.heuristics {
        let layout = &choice.ranked.layout;
        match out.iter_mut().find(|s| &s.layout == layout) {
            Some(s) => s.heuristics.push(choice.heuristic),
            None => out.push(Sampled {
                layout: layout.clone(),
                prediction: choice.ranked.prediction.clone(),
                top_rank: None,
                drawn: false,
                heuristics: vec![choice.heuristic],
            }),
        }
    }
    out
}

/// SplitMix64 (Steele, Lea and Flood): a draw that depends on the seed
/// alone, so that a validation's layouts can be drawn again.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The prediction for `layout` over a mix that runs `seconds` while the
/// workload's inserts add objects to the space: for the mean count the
/// run holds, N + p_insert·T·seconds / 2, where T is the prediction at
/// that count itself. More objects never make a layout faster, so the
/// count is found by bisection between N and what T at N would insert.
/// Returns the prediction and that mean count.
pub fn predict_over_run(
    model: Model,
    workload: &Workload,
    layout: &Layout,
    params: &Params,
    seconds: f64,
) -> (Prediction, u64) {
    let at = |objects: u64| {
        let mut w = workload.clone();
        w.objects = objects.max(1);
        predict(model, &w, layout, params)
    };
    let share: f64 = workload
        .classes
        .iter()
        .filter(|c| matches!(c.kind, ClassKind::Insert))
        .map(|c| c.p)
        .sum();
    let n = workload.objects;
    let first = at(n);
    if share <= 0.0 || seconds.is_nan() || seconds <= 0.0 || !first.ops_per_s.is_finite() {
        return (first, n);
    }
    let mean = |ops_per_s: f64| n.saturating_add((share * ops_per_s * seconds / 2.0) as u64);
    // g(o) = mean(T(o)) − o falls as o grows: g(n) ≥ 0, g(high) ≤ 0.
    let (mut low, mut high) = (n, mean(first.ops_per_s));
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if mean(at(mid).ops_per_s) >= mid {
            low = mid;
        } else {
            high = mid;
        }
    }
    (at(low), low)
}

/// How well predictions matched measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Mean of |predicted − measured| / measured.
    pub mean_abs_relative_error: f64,
    /// Kendall's τ-b between predicted and measured throughputs; `None`
    /// with fewer than two layouts or when either side is all ties.
    pub kendall_tau_b: Option<f64>,
    /// Position (0-based) of the predicted best: the highest prediction,
    /// the first of equals.
    pub predicted_best: usize,
    /// Its measured rank: 1 + the layouts measured strictly faster.
    pub predicted_best_measured_rank: usize,
    /// Layouts predicted equal to the predicted best, itself included
    /// (the model cannot tell them apart: which is "the" best among them
    /// is the order they were listed in).
    pub predicted_best_ties: usize,
    /// The best measured rank among those tied layouts: equal to
    /// `predicted_best_measured_rank` without ties.
    pub tied_best_measured_rank: usize,
}

/// Compares `predicted` with `measured` (throughputs of the same layouts,
/// in the same order); `None` when empty, of different lengths, or a
/// measurement is not positive.
pub fn agreement(predicted: &[f64], measured: &[f64]) -> Option<Agreement> {
    if predicted.is_empty()
        || predicted.len() != measured.len()
        || measured.iter().any(|&m| m.is_nan() || m <= 0.0)
    {
        return None;
    }
    let mean_abs_relative_error = predicted
        .iter()
        .zip(measured)
        .map(|(p, m)| relative_error(*p, *m).abs())
        .sum::<f64>()
        / predicted.len() as f64;
    let predicted_best = highest(predicted);
    let ties: Vec<usize> = (0..predicted.len())
        .filter(|&i| tied(predicted[i], predicted[predicted_best]))
        .collect();
    Some(Agreement {
        mean_abs_relative_error,
        kendall_tau_b: kendall_tau_b(predicted, measured),
        predicted_best,
        predicted_best_measured_rank: measured_rank(measured, predicted_best),
        predicted_best_ties: ties.len(),
        tied_best_measured_rank: ties
            .iter()
            .map(|&i| measured_rank(measured, i))
            .min()
            .unwrap_or(1),
    })
}

/// The position of the highest of `values`, the first of those tied with
/// it (0 when empty).
fn highest(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] && !tied(v, values[best]) {
            best = i;
        }
    }
    best
}

/// How far a validation's measurements agree with themselves: each
/// layout's runs (in the order run) split into the first, third, fifth …
/// and the second, fourth …, so that both halves span every round, and
/// the medians of the first half compared with those of the second as
/// [`agreement`] compares predictions with measurements. Its error, τ-b
/// and whether the two halves find the same best are what the machine
/// allows a model to reach at half the runs: a model no better than its
/// measurements cannot be shown to be within less of them. `None` when a
/// layout has fewer than two runs (or as [`agreement`]).
pub fn halves_agreement(runs: &[Vec<f64>]) -> Option<Agreement> {
    if runs.iter().any(|r| r.len() < 2) {
        return None;
    }
    let half = |start: usize| -> Option<Vec<f64>> {
        runs.iter()
            .map(|r| {
                let picked: Vec<f64> = r.iter().skip(start).step_by(2).copied().collect();
                spread(&picked).map(|s| s.median)
            })
            .collect()
    };
    agreement(&half(0)?, &half(1)?)
}

/// The median of repeated measurements and their spread.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The middle value (the mean of the two middle ones for an even
    /// count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// (max − min) / median: how far apart the runs were, relative.
    pub fn relative(&self) -> f64 {
        (self.max - self.min) / self.median
    }

    /// Whether some run of each reached the other's range: their
    /// min–max intervals share a value, so at these runs neither is
    /// measured faster than the other beyond their spread.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// The median, minimum and maximum of `values`; `None` when empty or when
/// one is NaN.
pub fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: sorted[0],
        max: sorted[n - 1],
    })
}

/// The position in `values` of the one that is the median (for an even
/// count the lower of the two middle ones), the first such position among
/// equals; `None` when empty or when one is NaN.
pub fn median_position(values: &[f64]) -> Option<usize> {
    if values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]).then(i.cmp(&j)));
    order.get(values.len().saturating_sub(1) / 2).copied()
}

/// The workload's level: the geometric mean of predicted ÷ measured over
/// the layouts, 1 when the model is neither above nor below them as a
/// whole. A prediction divided by it is judged on how the layouts stand
/// against each other only (what ranks them), apart from how fast the
/// machine ran the workload against its calibration (what moves them
/// all alike). `None` when empty, of different lengths, or a value is
/// not positive.
pub fn level(predicted: &[f64], measured: &[f64]) -> Option<f64> {
    if predicted.is_empty()
        || predicted.len() != measured.len()
        || predicted
            .iter()
            .chain(measured)
            .any(|&v| v.is_nan() || v <= 0.0)
    {
        return None;
    }
    let mean_ln = predicted
        .iter()
        .zip(measured)
        .map(|(p, m)| (p / m).ln())
        .sum::<f64>()
        / predicted.len() as f64;
    Some(mean_ln.exp())
}

/// (predicted − measured) / measured.
pub fn relative_error(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured
}

/// 1 + how many of `values` are strictly above `values[i]`.
pub fn measured_rank(values: &[f64], i: usize) -> usize {
    1 + values.iter().filter(|&&v| v > values[i]).count()
}

fn tied(a: f64, b: f64) -> bool {
    (a - b).abs() <= TIE * a.abs().max(b.abs())
}

fn sign(a: f64, b: f64) -> i64 {
    if tied(a, b) {
        0
    } else if a > b {
        1
    } else {
        -1
    }
}

/// Kendall's τ-b of the pairs `(x[i], y[i])`: (C − D) / √((n₀ − n₁)(n₀ − n₂))
/// with C, D the concordant and discordant pairs, n₀ = n(n − 1)/2 and n₁,
/// n₂ the pairs tied in x and in y (ties within [`TIE`] of each other).
/// `None` with fewer than two pairs, different lengths, or a side whose
/// every pair is tied.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (mut concordant, mut discordant, mut ties_x, mut ties_y) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            let (dx, dy) = (sign(x[i], x[j]), sign(y[i], y[j]));
            ties_x += i64::from(dx == 0);
            ties_y += i64::from(dy == 0);
            match dx * dy {
                1 => concordant += 1,
                -1 => discordant += 1,
                _ => {}
            }
        }
    }
    let n0 = (x.len() * (x.len() - 1) / 2) as i64;
    let denominator = ((n0 - ties_x) as f64 * (n0 - ties_y) as f64).sqrt();
    (denominator > 0.0).then(|| (concordant - discordant) as f64 / denominator)
}

/// The two-sided level at which [`paired`] calls two layouts' runs apart.
pub const PAIRED_LEVEL: f64 = 0.05;

/// The two-sided p-value of Wilcoxon's signed-rank test of paired
/// differences `d` against a median of zero: the differences ranked by
/// size (equal sizes sharing their mean rank), W the smaller of the rank
/// sums of the positive and the negative ones, and p the chance that a
/// random choice of signs gives a sum at most W, twice, by exact count
/// over the 2ⁿ choices. Zero differences are dropped. `None` when none is
/// left or one is not finite.
pub fn signed_rank_p(d: &[f64]) -> Option<f64> {
    signed_rank(d).map(|(p, _)| p)
}

/// [`signed_rank_p`], and which side's ranks sum higher: 1 the positive
/// differences', −1 the negative ones', 0 neither.
fn signed_rank(d: &[f64]) -> Option<(f64, i64)> {
    if d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sizes: Vec<(f64, bool)> = d
        .iter()
        .filter(|&&x| x != 0.0)
        .map(|&x| (x.abs(), x > 0.0))
        .collect();
    let n = sizes.len();
    if n == 0 {
        return None;
    }
    sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Ranks doubled, so that a mean rank of equal sizes stays whole.
    let mut ranks2 = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let j = (i..n).take_while(|&k| sizes[k].0 == sizes[i].0).count() + i;
        // Ranks i+1 ..= j; their mean, doubled: i + 1 + j.
        ranks2[i..j].fill(i + 1 + j);
        i = j;
    }
    let positive: usize = (0..n).filter(|&k| sizes[k].1).map(|k| ranks2[k]).sum();
    let total: usize = ranks2.iter().sum();
    let w = positive.min(total - positive);
    // ways[s]: choices of signs whose positive ranks sum (doubled) to s.
    let mut ways = vec![0f64; total + 1];
    ways[0] = 1.0;
    for &r in &ranks2 {
        for s in (r..=total).rev() {
            ways[s] += ways[s - r];
        }
    }
    let at_most: f64 = ways[..=w].iter().sum();
    let p = (2.0 * at_most / 2f64.powi(n as i32)).min(1.0);
    let negative = total - positive;
    Some((
        p,
        (positive > negative) as i64 - (positive < negative) as i64,
    ))
}

/// What a validation's runs can tell apart, and how the predictions
/// order what they can: each pair of layouts compared round by round
/// (the runs of one round share the machine's minute, which moves every
/// layout alike), by [`signed_rank_p`] of the logarithms of their rates'
/// ratios, at [`PAIRED_LEVEL`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Pairs of layouts.
    pub pairs: usize,
    /// Pairs one of which measured faster than the other beyond the
    /// runs' noise.
    pub apart: usize,
    /// Of those, the pairs the predictions order the same way.
    pub ordered_alike: usize,
    /// Of those, the pairs the predictions order the other way (a pair
    /// predicted equal counts in neither).
    pub ordered_against: usize,
    /// Layouts measured faster than the predicted best beyond the runs'
    /// noise: 0 when it is the measured best or the runs cannot tell it
    /// from those measured faster.
    pub faster_than_predicted_best: usize,
}

/// Compares every pair of layouts by their runs in the rounds both ran
/// (`runs[i]`: layout i's (round, ops/s), in any order). `None` when the
/// lengths differ, a prediction is not finite, or a rate is not positive;
/// a pair with fewer than two rounds in common is never apart.
pub fn paired(predicted: &[f64], runs: &[Vec<(usize, f64)>]) -> Option<Paired> {
    if predicted.len() != runs.len()
        || predicted.is_empty()
        || predicted.iter().any(|p| !p.is_finite())
        || runs.iter().flatten().any(|&(_, r)| r.is_nan() || r <= 0.0)
    {
        return None;
    }
    // +1: i measured faster than j beyond the noise, −1 slower, 0 neither.
    let measured = |i: usize, j: usize| -> i64 {
        let d: Vec<f64> = runs[i]
            .iter()
            .filter_map(|&(round, a)| {
                runs[j]
                    .iter()
                    .find(|&&(r, _)| r == round)
                    .map(|&(_, b)| (a / b).ln())
            })
            .collect();
        match signed_rank(&d) {
            Some((p, side)) if p <= PAIRED_LEVEL => side,
            _ => 0,
        }
    };
    let best = highest(predicted);
    let mut out = Paired::default();
    for i in 0..predicted.len() {
        for j in i + 1..predicted.len() {
            out.pairs += 1;
            let m = measured(i, j);
            if m == 0 {
                continue;
            }
            out.apart += 1;
            match m * sign(predicted[i], predicted[j]) {
                1 => out.ordered_alike += 1,
                -1 => out.ordered_against += 1,
                _ => {}
            }
            if (i == best && m < 0) || (j == best && m > 0) {
                out.faster_than_predicted_best += 1;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::{HeuristicChoice, SearchKind};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn tau_b_of_orders_computed_by_hand() {
        // Same order: all 6 pairs concordant.
        assert_eq!(
            kendall_tau_b(&[1., 2., 3., 4.], &[10., 20., 30., 40.]),
            Some(1.0)
        );
        // Reversed: all 6 discordant.
        assert_eq!(
            kendall_tau_b(&[1., 2., 3., 4.], &[4., 3., 2., 1.]),
            Some(-1.0)
        );
        // One swap (items 2 and 3): 5 concordant, 1 discordant, (5 − 1)/6.
        let t = kendall_tau_b(&[1., 2., 3., 4.], &[1., 3., 2., 4.]).unwrap();
        assert!(close(t, 2.0 / 3.0), "{t}");
        // x = 3,1,2 against y = 1,2,3: pairs (0,1) and (0,2) discordant,
        // (1,2) concordant: (1 − 2)/3.
        let t = kendall_tau_b(&[3., 1., 2.], &[1., 2., 3.]).unwrap();
        assert!(close(t, -1.0 / 3.0), "{t}");
    }

    #[test]
    fn tau_b_with_ties_computed_by_hand() {
        // x ties items 0 and 1: n0 = 6, n1 = 1, n2 = 0; the other 5 pairs
        // are concordant: 5 / √(5·6).
        let t = kendall_tau_b(&[1., 1., 2., 3.], &[1., 2., 3., 4.]).unwrap();
        assert!(close(t, 5.0 / 30f64.sqrt()), "{t}");
        // Ties on both sides, same pair: n1 = n2 = 1, C = 5: 5/5.
        assert_eq!(
            kendall_tau_b(&[1., 1., 2., 3.], &[5., 5., 6., 7.]),
            Some(1.0)
        );
        // x ties (0,1), y ties (2,3): C = 4 ((0,2),(0,3),(1,2),(1,3)),
        // D = 0, n1 = n2 = 1: 4/5.
        let t = kendall_tau_b(&[1., 1., 2., 3.], &[1., 2., 3., 3.]).unwrap();
        assert!(close(t, 0.8), "{t}");
        // Equal to nine digits is a tie.
        let t = kendall_tau_b(&[1.0, 1.0 + 1e-12, 2.0], &[1., 2., 3.]).unwrap();
        assert!(close(t, 2.0 / 6f64.sqrt()), "{t}");
    }

    #[test]
    fn tau_b_is_undefined_without_two_untied_pairs() {
        assert_eq!(kendall_tau_b(&[1.], &[2.]), None);
        assert_eq!(kendall_tau_b(&[1., 2.], &[2.]), None);
        assert_eq!(kendall_tau_b(&[3., 3., 3.], &[1., 2., 3.]), None);
    }

    #[test]
    fn agreement_reports_error_and_the_rank_of_the_predicted_best() {
        // The predicted best is item 1 (200). Errors: 10 %, 0 %, 50 %:
        // mean 20 %.
        let a = agreement(&[110., 200., 100.], &[100., 200., 200.]).unwrap();
        assert!(close(a.mean_abs_relative_error, 0.2), "{a:?}");
        assert_eq!(a.predicted_best, 1);
        // Item 2 ties it (200 = 200), not above it: rank 1.
        assert_eq!(a.predicted_best_measured_rank, 1);
        let a = agreement(&[110., 200., 100.], &[100., 190., 200.]).unwrap();
        assert_eq!(a.predicted_best_measured_rank, 2);
        // x = 110,200,100; y = 100,190,200: (0,1) c, (0,2) d, (1,2) d.
        assert!(close(a.kendall_tau_b.unwrap(), -1.0 / 3.0));
        // No tie at the top: the tied rank is the rank.
        assert_eq!((a.predicted_best_ties, a.tied_best_measured_rank), (1, 2));
        // Items 0 and 2 predicted equal at the top: the first listed is
        // "the" best (measured third), the other measured first.
        let a = agreement(&[300., 200., 300.], &[100., 150., 200.]).unwrap();
        assert_eq!(a.predicted_best, 0);
        assert_eq!(a.predicted_best_measured_rank, 3);
        assert_eq!((a.predicted_best_ties, a.tied_best_measured_rank), (2, 1));
        assert_eq!(agreement(&[], &[]), None);
        assert_eq!(agreement(&[1.], &[0.]), None);
    }

    #[test]
    fn the_runs_split_into_alternate_halves_and_are_compared_with_each_other() {
        // Layout 0 ran 100, 130, 110, 90, 120: first half 100, 110, 120
        // (median 110), second 130, 90 (median 110). Layout 1 ran 200,
        // 150, 210, 170: halves 200, 210 (205) and 150, 170 (160).
        // Layout 2 ran 50, 60: halves 50 and 60.
        let runs = vec![
            vec![100., 130., 110., 90., 120.],
            vec![200., 150., 210., 170.],
            vec![50., 60.],
        ];
        let a = halves_agreement(&runs).unwrap();
        // |110/110 − 1| = 0, |205/160 − 1| = 0.28125, |50/60 − 1| = 1/6.
        let expected = (0.0 + 45.0 / 160.0 + 1.0 / 6.0) / 3.0;
        assert!(close(a.mean_abs_relative_error, expected), "{a:?}");
        // Both halves rank 1 > 0 > 2: τ-b 1, the same best.
        assert!(close(a.kendall_tau_b.unwrap(), 1.0));
        assert_eq!((a.predicted_best, a.predicted_best_measured_rank), (1, 1));
        // Swap what layout 1's halves saw against layout 0's: the first
        // half's best (layout 1 at 205) is the second half's second.
        let runs = vec![vec![100., 180., 110.], vec![200., 150., 210., 170.]];
        let a = halves_agreement(&runs).unwrap();
        assert_eq!(a.predicted_best_measured_rank, 2);
        assert!(close(a.kendall_tau_b.unwrap(), -1.0));
        // A layout measured once has no second half.
        assert_eq!(halves_agreement(&[vec![1., 2.], vec![3.]]), None);
        assert_eq!(halves_agreement(&[]), None);
    }

    fn ranked(subspaces: Vec<Vec<usize>>, ops: f64) -> Ranked {
        Ranked {
            layout: Layout::of_subspaces(subspaces),
            prediction: Prediction {
                ops_per_s: ops,
                bytes_per_object: 0.0,
                recovery_s: 0.0,
                class_costs_s: vec![],
            },
        }
    }

    type Summary = (Vec<Vec<usize>>, Option<usize>, Vec<Heuristic>);

    #[test]
    fn sampled_layouts_are_the_top_then_new_heuristic_layouts_once_each() {
        let choice = |heuristic, r: Ranked| HeuristicChoice {
            heuristic,
            ranked: r,
            within_budget: true,
        };
        let advice = Advice {
            layouts: vec![ranked(vec![vec![1]], 300.), ranked(vec![vec![2]], 200.)],
            heuristics: vec![
                choice(Heuristic::NoSubspace, ranked(vec![], 10.)),
                choice(Heuristic::Hyperspace, ranked(vec![vec![1, 2]], 50.)),
                choice(
                    Heuristic::SubspacesAll,
                    ranked(vec![vec![1], vec![2]], 250.),
                ),
                choice(Heuristic::Dominant, ranked(vec![vec![1]], 300.)),
                choice(Heuristic::Greedy, ranked(vec![vec![1], vec![2]], 250.)),
            ],
            search: SearchKind::Exhaustive,
            predicted: 7,
        };
        let s = sampled_layouts(
            &advice,
            Sampling {
                top: 5,
                random: 0,
                seed: 1,
            },
        );
        let summary: Vec<Summary> = s
            .into_iter()
            .map(|s| (s.layout.subspaces, s.top_rank, s.heuristics))
            .collect();
        assert_eq!(
            summary,
            vec![
                (vec![vec![1]], Some(1), vec![Heuristic::Dominant]),
                (vec![vec![2]], Some(2), vec![]),
                (vec![], None, vec![Heuristic::NoSubspace]),
                (vec![vec![1, 2]], None, vec![Heuristic::Hyperspace]),
                (
                    vec![vec![1], vec![2]],
                    None,
                    vec![Heuristic::SubspacesAll, Heuristic::Greedy]
                ),
            ]
        );
    }

    /// Tied predictions are one group, measured through its first layout;
    /// the draw takes distinct groups below the top, in ranking order, the
    /// same for the same seed, and over many seeds each group about as
    /// often as the others (2 of 3 groups per draw: 2/3 of the seeds).
    #[test]
    fn sampling_groups_ties_and_draws_the_rest_evenly() {
        let advice = Advice {
            layouts: vec![
                ranked(vec![vec![1]], 300.),
                ranked(vec![vec![1], vec![2]], 300.),
                ranked(vec![vec![2]], 200.),
                ranked(vec![vec![3]], 150.),
                ranked(vec![vec![3], vec![1]], 150.),
                ranked(vec![vec![4]], 100.),
                ranked(vec![vec![5]], 50.),
            ],
            heuristics: vec![],
            search: SearchKind::Exhaustive,
            predicted: 7,
        };
        let draw = |top, random, seed| {
            sampled_layouts(&advice, Sampling { top, random, seed })
                .into_iter()
                .map(|s| (s.layout.subspaces, s.top_rank, s.drawn))
                .collect::<Vec<_>>()
        };
        // Every group once, the first of each tie, when the top takes all.
        assert_eq!(
            draw(9, 3, 7),
            vec![
                (vec![vec![1]], Some(1), false),
                (vec![vec![2]], Some(2), false),
                (vec![vec![3]], Some(3), false),
                (vec![vec![4]], Some(4), false),
                (vec![vec![5]], Some(5), false),
            ]
        );
        // More to draw than there is: the whole rest, in order.
        assert_eq!(
            draw(2, 9, 7)[2..],
            [
                (vec![vec![3]], None, true),
                (vec![vec![4]], None, true),
                (vec![vec![5]], None, true),
            ]
        );
        let mut times = [0_u32; 3];
        for seed in 0..300 {
            let d = draw(2, 2, seed);
            assert_eq!(d, draw(2, 2, seed), "seed {seed}: drawn again alike");
            assert_eq!(d.len(), 4);
            assert_eq!(d[0], (vec![vec![1]], Some(1), false));
            assert_eq!(d[1], (vec![vec![2]], Some(2), false));
            let first = |s: &Vec<Vec<usize>>| s[0][0];
            assert!(d[2..]
                .iter()
                .all(|(_, rank, drawn)| rank.is_none() && *drawn));
            assert!(first(&d[2].0) < first(&d[3].0), "seed {seed}: {d:?}");
            for (subspaces, _, _) in &d[2..] {
                assert_eq!(subspaces.len(), 1, "a group's first layout: {d:?}");
                times[first(subspaces) - 3] += 1;
            }
        }
        // 200 expected each; a fair draw's binomial(300, 2/3) strays
        // further than ±40 (4.9 σ) about once in a million.
        assert!(times.iter().all(|&t| (160..=240).contains(&t)), "{times:?}");
    }

    /// Overlap against a brute force over a fine grid: two ranges
    /// overlap exactly when some grid value lies in both.
    #[test]
    fn spreads_overlap_when_some_value_lies_in_both() {
        let grid: Vec<f64> = (0..=40).map(|i| f64::from(i) / 4.0).collect();
        let ranges: Vec<Spread> = (0..=10)
            .flat_map(|lo| (lo..=10).map(move |hi| (lo, hi)))
            .map(|(lo, hi)| Spread {
                median: f64::from(lo + hi) / 2.0,
                min: f64::from(lo),
                max: f64::from(hi),
            })
            .collect();
        for a in &ranges {
            for b in &ranges {
                let shared = grid
                    .iter()
                    .any(|&v| a.min <= v && v <= a.max && b.min <= v && v <= b.max);
                assert_eq!(a.overlaps(b), shared, "{a:?} {b:?}");
                assert_eq!(a.overlaps(b), b.overlaps(a), "{a:?} {b:?}");
            }
        }
    }

    /// Every vector of length 1 to 5 over the values 0..4, checked against
    /// definitions that do not sort: the median is the value with at most
    /// ⌊(n − 1)/2⌋ values strictly on either side (odd n), or the mean of
    /// the smallest values v with at least n/2 and n/2 + 1 values ≤ v
    /// (even n).
    #[test]
    fn spread_against_brute_force_over_small_vectors() {
        fn vectors(len: usize) -> Vec<Vec<f64>> {
            (0..4usize.pow(len as u32))
                .map(|mut code| {
                    (0..len)
                        .map(|_| {
                            let v = (code % 4) as f64;
                            code /= 4;
                            v
                        })
                        .collect()
                })
                .collect()
        }
        let below = |xs: &[f64], v: f64| xs.iter().filter(|&&x| x < v).count();
        let above = |xs: &[f64], v: f64| xs.iter().filter(|&&x| x > v).count();
        let at_most = |xs: &[f64], v: f64| xs.iter().filter(|&&x| x <= v).count();
        let mut checked = 0;
        for len in 1..=5 {
            for xs in vectors(len) {
                let got = spread(&xs).expect("not empty");
                let want = if len % 2 == 1 {
                    let k = (len - 1) / 2;
                    let middles: Vec<f64> = xs
                        .iter()
                        .copied()
                        .filter(|&v| below(&xs, v) <= k && above(&xs, v) <= k)
                        .collect();
                    assert!(middles.iter().all(|&m| m == middles[0]), "{xs:?}");
                    middles[0]
                } else {
                    let smallest_with = |count: usize| {
                        xs.iter()
                            .copied()
                            .filter(|&v| at_most(&xs, v) >= count)
                            .fold(f64::INFINITY, f64::min)
                    };
                    (smallest_with(len / 2) + smallest_with(len / 2 + 1)) / 2.0
                };
                assert_eq!(got.median, want, "median of {xs:?}");
                assert!(xs.iter().all(|&x| got.min <= x && x <= got.max), "{xs:?}");
                assert!(xs.contains(&got.min) && xs.contains(&got.max), "{xs:?}");
                // The median's position names a value equal to the median
                // for odd counts, and the lower middle for even ones.
                let i = median_position(&xs).expect("not empty");
                let lower_middle = if len % 2 == 1 {
                    want
                } else {
                    xs.iter()
                        .copied()
                        .filter(|&v| at_most(&xs, v) >= len / 2)
                        .fold(f64::INFINITY, f64::min)
                };
                assert_eq!(xs[i], lower_middle, "position {i} in {xs:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 4 + 16 + 64 + 256 + 1024);
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[1.0, f64::NAN]), None);
        assert_eq!(median_position(&[]), None);
        // Runs of 900, 1000, 1200 ops/s: median 1000, spread 30 %.
        let s = spread(&[1200.0, 900.0, 1000.0]).unwrap();
        assert!(close(s.relative(), 0.3), "{s:?}");
    }

    #[test]
    fn a_run_with_inserts_is_predicted_at_the_count_it_grows_to() {
        let text = |classes: &str| {
            format!(
                r#"{{"space": "space s key k attributes city, int price create 16 partitions tolerate 1 failure",
                    "objects": 4000, "distinct": {{"city": 200}}, "classes": [{classes}]}}"#
            )
        };
        let w = crate::workload::parse_workload(
            &text(r#"{"p": 0.3, "insert": true}, {"p": 0.7, "search": {"city": "eq"}}"#),
            None,
        )
        .expect("parses");
        let layout = Layout::of_subspaces(vec![vec![1]]);
        let params = Params::default();
        let at_n = predict(Model::Tessera, &w, &layout, &params);
        let (p, mean) = predict_over_run(Model::Tessera, &w, &layout, &params, 3.0);
        assert!(mean > 4000, "inserts grow the space: {mean}");
        assert!(p.ops_per_s < at_n.ops_per_s, "searches return more");
        // The count is the model's own: N + p·T(mean)·S/2, to one object
        // (computed here, not by the function).
        let mut grown = w.clone();
        grown.objects = mean;
        let t = predict(Model::Tessera, &grown, &layout, &params).ops_per_s;
        let want = 4000.0 + 0.3 * t * 3.0 / 2.0;
        assert!((mean as f64 - want).abs() <= 2.0, "{mean} vs {want}");
        assert_eq!(p, predict(Model::Tessera, &grown, &layout, &params));
        // Without inserts nothing changes.
        let w =
            crate::workload::parse_workload(&text(r#"{"p": 1, "search": {"city": "eq"}}"#), None)
                .expect("parses");
        let (p, mean) = predict_over_run(Model::Tessera, &w, &layout, &params, 3.0);
        assert_eq!(mean, 4000);
        assert_eq!(p, predict(Model::Tessera, &w, &layout, &params));
    }

    #[test]
    fn the_level_is_the_geometric_mean_of_the_ratios() {
        // Every prediction 20 % high: the level is 1.2.
        let measured = [1000.0, 250.0, 4000.0];
        let high: Vec<f64> = measured.iter().map(|m| 1.2 * m).collect();
        assert!((level(&high, &measured).unwrap() - 1.2).abs() < 1e-12);
        // Ratios 2 and 1/2 cancel out, whatever the magnitudes.
        assert!((level(&[200.0, 5.0], &[100.0, 10.0]).unwrap() - 1.0).abs() < 1e-12);
        // By brute force on ratios 1.1, 0.9 and 1.5: (1.1 · 0.9 · 1.5)^(1/3).
        let want = (1.1f64 * 0.9 * 1.5).powf(1.0 / 3.0);
        let got = level(&[110.0, 90.0, 150.0], &[100.0, 100.0, 100.0]).unwrap();
        assert!((got - want).abs() < 1e-12, "{got} {want}");
        assert_eq!(level(&[], &[]), None);
        assert_eq!(level(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(level(&[1.0], &[0.0]), None);
        assert_eq!(level(&[-1.0], &[1.0]), None);
    }

    #[test]
    fn signed_rank_p_counts_the_sign_choices_by_hand() {
        // Nine rounds, all positive: W = 0, reached by 1 of 2⁹ choices.
        let all: Vec<f64> = (1..=9).map(f64::from).collect();
        assert!(close(signed_rank_p(&all).unwrap(), 2.0 / 512.0));
        // Ranks 2 and 3 negative: W = 5. Subsets of 1..=9 summing to at
        // most 5: {}, {1}, {2}, {3}, {1,2}, {4}, {1,3}, {5}, {1,4}, {2,3}.
        let mut w5 = all.clone();
        w5[1] = -2.0;
        w5[2] = -3.0;
        assert!(close(signed_rank_p(&w5).unwrap(), 2.0 * 10.0 / 512.0));
        // Ranks 2 and 4 negative: W = 6, adding {6}, {1,5}, {2,4},
        // {1,2,3}: no longer below 5 %.
        let mut w6 = all.clone();
        w6[1] = -2.0;
        w6[3] = -4.0;
        let p = signed_rank_p(&w6).unwrap();
        assert!(close(p, 2.0 * 14.0 / 512.0), "{p}");
        assert!(p > PAIRED_LEVEL && signed_rank_p(&w5).unwrap() <= PAIRED_LEVEL);
        // Equal sizes share their rank: 1 and −1 rank 1.5 each, 2 ranks
        // 3; W = 1.5, reached by {}, {1.5} and the other {1.5}: 3 of 8.
        assert!(close(signed_rank_p(&[1.0, -1.0, 2.0]).unwrap(), 6.0 / 8.0));
        // Zeros are dropped; nothing left, or a NaN, is no test.
        assert!(close(signed_rank_p(&[0.0, 1.0, 2.0]).unwrap(), 2.0 / 4.0));
        assert_eq!(signed_rank_p(&[0.0, 0.0]), None);
        assert_eq!(signed_rank_p(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn paired_runs_tell_apart_what_the_rounds_share() {
        // The machine's speed moves by ±20 % from round to round, far more
        // than the layouts differ: their min–max ranges all overlap.
        let speed = [0.8, 1.2, 0.9, 1.1, 1.0, 0.85, 1.15, 0.95, 1.05];
        let runs = |base: f64, wobble: f64| -> Vec<(usize, f64)> {
            speed
                .iter()
                .enumerate()
                .map(|(r, s)| {
                    let w = if r % 2 == 0 {
                        1.0 + wobble
                    } else {
                        1.0 - wobble
                    };
                    (r + 1, base * s * w)
                })
                .collect()
        };
        // b is 3 % above a in every round; c is a, 1 % up and down.
        let (a, b, c) = (runs(100.0, 0.0), runs(103.0, 0.0), runs(100.0, 0.01));
        let ranges: Vec<Spread> = [&a, &b, &c]
            .iter()
            .map(|r| spread(&r.iter().map(|x| x.1).collect::<Vec<_>>()).unwrap())
            .collect();
        assert!(ranges[0].overlaps(&ranges[1]) && ranges[1].overlaps(&ranges[2]));
        let all = vec![a.clone(), b.clone(), c.clone()];
        // Predicted a < c < b: b is apart from both and ordered alike; a
        // and c are not apart.
        let p = paired(&[100.0, 110.0, 105.0], &all).unwrap();
        assert_eq!(
            p,
            Paired {
                pairs: 3,
                apart: 2,
                ordered_alike: 2,
                ordered_against: 0,
                faster_than_predicted_best: 0,
            }
        );
        // Predicted c best: b beat it in every round.
        let p = paired(&[100.0, 110.0, 120.0], &all).unwrap();
        assert_eq!((p.ordered_alike, p.ordered_against), (1, 1));
        assert_eq!(p.faster_than_predicted_best, 1);
        // Predicted a best, equal to c, b below both: b beat them both,
        // against the predictions; the pair (a, c) is neither apart nor
        // ordered.
        let p = paired(&[120.0, 110.0, 120.0], &all).unwrap();
        assert_eq!((p.apart, p.ordered_alike, p.ordered_against), (2, 0, 2));
        assert_eq!(p.faster_than_predicted_best, 1);
        // Only rounds both ran count: b in two rounds is apart from none.
        let short = vec![a, b[..2].to_vec(), c];
        let p = paired(&[100.0, 110.0, 105.0], &short).unwrap();
        assert_eq!(p.apart, 0);
        // Bad input is no comparison.
        assert_eq!(paired(&[1.0], &[vec![(1, 0.0)]]), None);
        assert_eq!(paired(&[1.0, 2.0], &[vec![(1, 1.0)]]), None);
    }
}
