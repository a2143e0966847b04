//! The configurator thesis's model (IST, 2013, ch. 4), equation by
//! equation, as RESEARCH.md A.1 gives it. Nothing here is Tessera's own:
//! the extended model (`extended.rs`) builds on these functions.
//!
//! Notation: O objects, R regions per subspace, K = f + 1 copies, a search
//! class Q (the attributes it fixes by equality), a subspace S (its
//! attributes), E = S \ Q the dimensions the search leaves free.

/// Eq. 4.1: regions a search contacts in a subspace of `dims` dimensions
/// and `regions` regions when it leaves `free` of them unspecified, each
/// dimension cut into R^(1/|S|) intervals: (R^(1/|S|))^|E|.
pub fn regions_contacted(regions: f64, dims: usize, free: usize) -> f64 {
    assert!(free <= dims, "a search leaves free only dimensions it has");
    if dims == 0 {
        return 1.0;
    }
    regions.powf(free as f64 / dims as f64)
}

/// The objects that search examines: every object of each contacted
/// region, CR · O / R (the thesis assumes no index inside a region).
pub fn objects_examined(objects: f64, regions: f64, dims: usize, free: usize) -> f64 {
    regions_contacted(regions, dims, free) * objects / regions
}

/// Eq. 4.2: the cost in seconds of that search, CR · (O / R) · β.
pub fn search_cost(beta_s: f64, objects: f64, regions: f64, dims: usize, free: usize) -> f64 {
    objects_examined(objects, regions, dims, free) * beta_s
}

/// The split of a layout's declared subspaces for a modify of `modified`:
/// (|N|, |M|), where M holds the subspaces with an attribute the modify
/// changes (the object moves region there) and N the rest (overwritten in
/// place).
pub fn split_moved(subspaces: &[Vec<usize>], modified: &[usize]) -> (usize, usize) {
    let moved = subspaces
        .iter()
        .filter(|s| s.iter().any(|a| modified.contains(a)))
        .count();
    (subspaces.len() - moved, moved)
}

/// Eq. 4.3: the put's chain length, K · (1 + |N| + 2|M|): the key subspace,
/// one sub-chain per overwritten subspace, two (old and new region) per
/// moved one.
pub fn chain_length(k: u32, n: usize, m: usize) -> u64 {
    u64::from(k) * (1 + n as u64 + 2 * m as u64)
}

/// Eq. 4.4 with the get that precedes the put: T_max / (1 + length).
pub fn modify_throughput_naive(t_max: f64, k: u32, n: usize, m: usize) -> f64 {
    t_max / (1.0 + chain_length(k, n, m) as f64)
}

/// Eq. 4.5: T_max / (1 + K · (1 + |N| + 2·α·|M|)).
pub fn modify_throughput(t_max: f64, alpha: f64, k: u32, n: usize, m: usize) -> f64 {
    let k = f64::from(k);
    t_max / (1.0 + k * (1.0 + n as f64 + 2.0 * alpha * m as f64))
}

/// Eq. 4.5 solved for α given a measured throughput, with the key
/// subspace's term that the printed Eq. 4.8 drops (RESEARCH.md A.4 #1):
/// α = (T_max − T·(1 + K + K·|N|)) / (2·|M|·K·T). `None` when nothing
/// moves (|M| = 0: α does not appear).
pub fn solve_alpha(t_max: f64, measured: f64, k: u32, n: usize, m: usize) -> Option<f64> {
    if m == 0 {
        return None;
    }
    let k = f64::from(k);
    Some((t_max - measured * (1.0 + k + k * n as f64)) / (2.0 * m as f64 * k * measured))
}

/// Eqs. 4.6 and 4.7: the throughput of a mix, 1 / Σ p_i / T_i (the
/// probability-weighted harmonic mean of the classes' throughputs).
pub fn mix_throughput(classes: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let cost: f64 = classes.into_iter().map(|(p, t)| p / t).sum();
    1.0 / cost
}

#[cfg(test)]
mod tests {
    //! Every expected number below is printed in the thesis (RESEARCH.md
    //! A.1, A.2), never taken from this code.
    use super::*;

    const O: f64 = 256_000.0;
    const R: f64 = 256.0;
    const BETA: f64 = 3.31e-7;

    fn close(got: f64, want: f64, tolerance: f64) -> bool {
        ((got - want) / want).abs() <= tolerance
    }

    #[test]
    fn table_4_2_objects_examined_by_the_five_reference_cases() {
        // (dims of S, dims left free, objects examined)
        let cases = [
            (1, 0, 1_000.0),
            (1, 1, 256_000.0),
            (2, 1, 16_000.0),
            (3, 2, 40_317.0),
            (4, 3, 64_000.0),
        ];
        for (dims, free, want) in cases {
            let got = objects_examined(O, R, dims, free);
            assert!((got - want).abs() < 0.5, "{dims}-D, {free} free: {got}");
        }
    }

    /// Table 4.2: (dims of S, dims Q leaves free, measured ops/s, β solved
    /// from it ×10⁻⁷). "none" is the key subspace: one dimension, free.
    /// (One β printed is 3.14, which clippy takes for π.)
    #[allow(clippy::approx_constant)]
    const TABLE_4_2: [(usize, usize, f64, f64); 17] = [
        (1, 0, 3118.0, 3.22),
        (1, 1, 12.0, 3.29),
        (2, 1, 199.0, 3.15),
        (3, 2, 88.0, 2.96),
        (4, 3, 46.0, 3.40),
        (1, 0, 3018.0, 3.33),
        (2, 0, 3165.0, 3.17),
        (1, 1, 14.0, 2.85),
        (3, 1, 581.0, 2.99),
        (4, 2, 201.0, 3.12),
        (1, 0, 3152.0, 3.18),
        (2, 0, 3210.0, 3.13),
        (3, 0, 3511.0, 3.28),
        (3, 0, 3672.0, 3.14),
        (4, 0, 3150.0, 3.19),
        (1, 1, 11.0, 3.51),
        (4, 1, 828.0, 3.03),
    ];

    #[test]
    fn table_4_2_beta_solved_from_each_measurement() {
        // β = 1 / (T · objects examined). The printed throughputs are
        // rounded, so the β solved from them agrees with the printed β to
        // 2.5 %. The 3-D rows are the thesis's own exception: HyperDex cut
        // 256 into 7×7×6 = 294 regions, not 6.35³; with every dimension
        // fixed a region holds O / 294 objects, and β agrees again.
        for &(dims, free, t, printed) in &TABLE_4_2 {
            let examined = if dims == 3 {
                if free > 0 {
                    // Which dimensions were free (7 or 6 intervals) is
                    // not in the text.
                    continue;
                }
                O / 294.0
            } else {
                objects_examined(O, R, dims, free)
            };
            let beta = 1.0 / (t * examined) * 1e7;
            assert!(
                close(beta, printed, 0.025),
                "{dims}-D {free} free: {beta} vs {printed}"
            );
        }
    }

    #[test]
    fn table_4_2_prediction_error_with_the_mean_beta_is_within_the_thesis_figure() {
        // The thesis: mean error 5.6 % with β = 3.31·10⁻⁷, the 3-D rows
        // (off by their grid, above) included; without them the mean error
        // of Eq. 4.2 must not exceed that figure.
        let errors: Vec<f64> = TABLE_4_2
            .iter()
            .filter(|&&(dims, ..)| dims != 3)
            .map(|&(dims, free, measured, _)| {
                let predicted = 1.0 / search_cost(BETA, O, R, dims, free);
                (predicted - measured).abs() / measured
            })
            .collect();
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        assert!(mean <= 0.056, "mean error {mean}");
    }

    #[test]
    fn table_4_4_the_eq_4_6_check_on_city_addr() {
        // ⟨city,addr⟩ with Q1 = ⟨city⟩ (one dimension free) and
        // Q2 = ⟨city,addr⟩ (none free), half each: ≈ 355 ops/s predicted,
        // 360 measured.
        let t1 = 1.0 / search_cost(BETA, O, R, 2, 1);
        let t2 = 1.0 / search_cost(BETA, O, R, 2, 0);
        let t = mix_throughput([(0.5, t1), (0.5, t2)]);
        assert!((t - 355.0).abs() < 1.0, "{t}");
        assert!(close(t, 360.0, 0.02));
    }

    #[test]
    fn table_4_5_chain_lengths_of_the_seven_examples() {
        let (city, addr, post) = (1, 2, 3);
        // (modified, subspaces, expected length as 1 + c·K: c)
        let examples: [(Vec<usize>, Vec<Vec<usize>>, u64); 7] = [
            (vec![city], vec![], 1),
            (vec![city], vec![vec![addr]], 2),
            (vec![city], vec![vec![city]], 3),
            (vec![city], vec![vec![city], vec![addr]], 4),
            (vec![city, addr], vec![vec![city], vec![addr]], 5),
            (vec![city], vec![vec![city], vec![addr], vec![post]], 5),
            (
                vec![city, addr],
                vec![vec![city], vec![addr], vec![post]],
                6,
            ),
        ];
        for k in 1..=3u32 {
            for (i, (modified, subspaces, c)) in examples.iter().enumerate() {
                let (n, m) = split_moved(subspaces, modified);
                assert_eq!(
                    1 + chain_length(k, n, m),
                    1 + c * u64::from(k),
                    "example {} with K = {k}",
                    i + 1
                );
                // Eq. 4.5 with α = 1 is Eq. 4.4.
                let naive = modify_throughput_naive(98_000.0, k, n, m);
                assert!(close(
                    modify_throughput(98_000.0, 1.0, k, n, m),
                    naive,
                    1e-12
                ));
            }
        }
    }

    #[test]
    fn alpha_solved_from_eq_4_5_gives_back_the_throughput_it_came_from() {
        // Example 6 with K = 2 and the thesis's α for it (2.802).
        let (n, m) = (2, 1);
        let t = modify_throughput(98_000.0, 2.802, 2, n, m);
        let alpha = solve_alpha(98_000.0, t, 2, n, m).expect("something moves");
        assert!(close(alpha, 2.802, 1e-9), "{alpha}");
        assert_eq!(solve_alpha(98_000.0, t, 2, 1, 0), None);
    }

    #[test]
    fn a_mix_is_the_weighted_harmonic_mean() {
        // Half at 100 ops/s, half at 300: 150 ops/s, not the mean 200.
        assert!(close(
            mix_throughput([(0.5, 100.0), (0.5, 300.0)]),
            150.0,
            1e-12
        ));
    }
}
