//! YCSB's number generators, ported so that key choice and skew match the
//! original core workloads: FNV-1a hashing, key naming, zipfian (Gray et
//! al.), scrambled zipfian, skewed-latest and uniform.
//!
//! Each generator is plain state plus a caller-supplied RNG, so a driver
//! gives every worker its own copy and no lock is taken per operation.

use rand::Rng;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes of `val`,
/// then `Math.abs` of the signed result (which, as in Java, leaves
/// `i64::MIN` negative).
pub fn fnv_hash64(val: u64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    (hash as i64).wrapping_abs()
}

/// The numeric suffix of record number `keynum`'s key: the record number
/// hashed (YCSB's default `insertorder=hashed`).
pub fn key_suffix(keynum: u64) -> i64 {
    fnv_hash64(keynum)
}

/// YCSB's `buildKeyName` with `insertorder=hashed` and `zeropadding=1`:
/// `"user"` followed by the decimal hash of the record number.
pub fn key_name(keynum: u64) -> String {
    format!("user{}", key_suffix(keynum))
}

/// The numeric suffix of a key built by [`key_name`], if it is one.
pub fn parse_key_suffix(key: &str) -> Option<i64> {
    key.strip_prefix("user")?.parse().ok()
}

/// `sum_{i=start}^{n-1} 1/(i+1)^theta`, added to `initial`.
fn zeta(start: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in start..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// YCSB's `ZipfianGenerator`: integers in `[base, base + items)`, item
/// `base` the most popular, following Gray et al., "Quickly generating
/// billion-record synthetic databases". The item count may grow (the
/// zeta sum is extended incrementally), as the skewed-latest generator
/// needs.
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// Items `[min, max]` with skew `theta` (0 < theta < 1).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        let zetan = zeta(0, items, theta, 0.0);
        Zipfian::with_zetan(min, max, theta, zetan)
    }

    /// Like [`Zipfian::new`] with a precomputed `zeta(items, theta)`.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            base: min,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            zetan,
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The number of items.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Grows the item count to `items` (never shrinks it).
    pub fn grow_to(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.compute_eta();
        }
    }

    /// The next value, in `[base, base + items)`.
    pub fn next<R: Rng>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let offset = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + offset.min(self.items - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: zipfian popularity, but the popular
/// items are scattered over the range by hashing, so they do not cluster
/// at the low end.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    items: u64,
    inner: Zipfian,
}

/// YCSB draws scrambled-zipfian ranks from this many items…
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// …whose zeta sum for the constant 0.99 YCSB ships precomputed.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

impl ScrambledZipfian {
    /// Items `[min, max]` with YCSB's default constant 0.99.
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            items: max - min + 1,
            inner: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// The next value, in `[min, max]`.
    pub fn next<R: Rng>(&self, rng: &mut R) -> u64 {
        let rank = self.inner.next(rng);
        self.min + (fnv_hash64(rank) as u64) % self.items
    }
}

/// YCSB's `SkewedLatestGenerator`: the most recently inserted records are
/// the most popular (`latest - zipfian`).
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// For a store whose highest acknowledged record number is `latest`.
    pub fn new(latest: u64) -> SkewedLatest {
        SkewedLatest {
            zipfian: Zipfian::new(0, latest.max(1), ZIPFIAN_CONSTANT),
        }
    }

    /// The next value, in `[0, latest]`.
    pub fn next<R: Rng>(&mut self, rng: &mut R, latest: u64) -> u64 {
        self.zipfian.grow_to(latest + 1);
        let back = self.zipfian.next(rng);
        latest.saturating_sub(back)
    }
}

/// Which records requests go to (YCSB's `requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" => Ok(Distribution::Zipfian),
            "latest" => Ok(Distribution::Latest),
            other => Err(format!(
                "unknown distribution {other:?} (uniform, zipfian, latest)"
            )),
        }
    }
}

/// Chooses record numbers for reads, updates and scans.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Uniform { items: u64 },
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// A chooser over `items` records (for zipfian, YCSB sizes the range
    /// with the inserts the run expects, and retries choices beyond the
    /// records inserted so far).
    pub fn new(distribution: Distribution, items: u64, latest: u64) -> KeyChooser {
        match distribution {
            Distribution::Uniform => KeyChooser::Uniform {
                items: items.max(1),
            },
            Distribution::Zipfian => {
                KeyChooser::Zipfian(ScrambledZipfian::new(0, items.max(1) - 1))
            }
            Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(latest)),
        }
    }

    /// A record number in `[0, latest]` (`latest`: the highest record
    /// number whose insert has been acknowledged).
    pub fn next<R: Rng>(&mut self, rng: &mut R, latest: u64) -> u64 {
        match self {
            KeyChooser::Uniform { .. } => rng.gen_range(0..=latest),
            KeyChooser::Zipfian(z) => {
                // YCSB: draw again while the choice is not inserted yet.
                for _ in 0..64 {
                    let n = z.next(rng);
                    if n <= latest {
                        return n;
                    }
                }
                rng.gen_range(0..=latest)
            }
            KeyChooser::Latest(l) => l.next(rng, latest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn fnv_matches_ycsb_reference_values() {
        // The well-known first keys of a YCSB load with hashed inserts.
        assert_eq!(key_name(0), "user6284781860667377211");
        assert_eq!(key_name(1), "user8517097267634966620");
        assert_eq!(key_name(2), "user1820151046732198393");
    }

    #[test]
    fn key_names_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..10_000u64 {
            let k = key_name(n);
            assert!(k.starts_with("user"));
            assert_eq!(parse_key_suffix(&k), Some(key_suffix(n)));
            assert!(key_suffix(n) >= 0);
            assert!(seen.insert(k), "duplicate key for record {n}");
        }
        assert_eq!(parse_key_suffix("nope12"), None);
    }

    #[test]
    fn zipfian_is_in_range_and_skewed_to_the_low_end() {
        let mut rng = StdRng::seed_from_u64(7);
        let z = Zipfian::new(0, 999, ZIPFIAN_CONSTANT);
        let mut counts = vec![0u64; 1000];
        let draws = 200_000;
        for _ in 0..draws {
            let v = z.next(&mut rng);
            assert!(v < 1000);
            counts[v as usize] += 1;
        }
        // P(0) = 1 / zeta(1000, 0.99) ≈ 0.133 for theta 0.99.
        let p0 = counts[0] as f64 / draws as f64;
        let expected = 1.0 / zeta(0, 1000, ZIPFIAN_CONSTANT, 0.0);
        assert!((p0 - expected).abs() < 0.01, "p0 {p0} expected {expected}");
        // Popularity falls with rank: item 0 beats 1 beats 10 beats 500.
        assert!(counts[0] > counts[1]);
        assert!(counts[1] > counts[10]);
        assert!(counts[10] > counts[500]);
        // The top 10% of items take the majority of requests.
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 / draws as f64 > 0.6);
    }

    #[test]
    fn zipfian_growth_equals_fresh_construction() {
        let mut grown = Zipfian::new(0, 99, ZIPFIAN_CONSTANT);
        grown.grow_to(1000);
        let fresh = Zipfian::new(0, 999, ZIPFIAN_CONSTANT);
        assert_eq!(grown.items(), 1000);
        assert!((grown.zetan - fresh.zetan).abs() < 1e-9);
        assert!((grown.eta - fresh.eta).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_spreads_popular_items() {
        let mut rng = StdRng::seed_from_u64(11);
        let z = ScrambledZipfian::new(0, 9_999);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let v = z.next(&mut rng);
            assert!(v < 10_000);
            *counts.entry(v).or_insert(0u64) += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.into_iter().collect();
        by_count.sort_by_key(|e| std::cmp::Reverse(e.1));
        // Skewed: the hottest item is far above the uniform share (10)…
        assert!(by_count[0].1 > 1000);
        // …but the hottest items are not simply the lowest numbers.
        let hottest: Vec<u64> = by_count[..10].iter().map(|(v, _)| *v).collect();
        assert!(hottest.iter().any(|v| *v >= 100), "{hottest:?}");
    }

    #[test]
    fn latest_prefers_recent_records() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut l = SkewedLatest::new(999);
        let draws = 20_000;
        let mut recent = 0;
        for _ in 0..draws {
            let v = l.next(&mut rng, 999);
            assert!(v <= 999);
            if v >= 990 {
                recent += 1;
            }
        }
        // The 10 newest of 1000 records take zeta(10) / zeta(1000) of the
        // requests (≈ 0.39 for theta 0.99), against 0.01 for uniform; Gray's
        // method approximates ranks above 2, hence the tolerance.
        let expected = zeta(0, 10, ZIPFIAN_CONSTANT, 0.0) / zeta(0, 1000, ZIPFIAN_CONSTANT, 0.0);
        let got = recent as f64 / draws as f64;
        assert!(
            (got - expected).abs() < 0.04,
            "recent share {got}, expected {expected}"
        );
        // The window follows the newest record as inserts arrive.
        let mut newest = 0;
        for _ in 0..draws {
            if l.next(&mut rng, 5000) >= 4991 {
                newest += 1;
            }
        }
        let expected = zeta(0, 10, ZIPFIAN_CONSTANT, 0.0) / zeta(0, 5001, ZIPFIAN_CONSTANT, 0.0);
        let got = newest as f64 / draws as f64;
        assert!(
            (got - expected).abs() < 0.04,
            "newest share {got}, expected {expected}"
        );
    }

    #[test]
    fn uniform_chooser_covers_the_range_evenly() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut c = KeyChooser::new(Distribution::Uniform, 10, 9);
        let mut counts = [0u32; 10];
        for _ in 0..10_000 {
            counts[c.next(&mut rng, 9) as usize] += 1;
        }
        for n in counts {
            assert!((800..1200).contains(&n), "{counts:?}");
        }
    }

    #[test]
    fn zipfian_chooser_never_returns_uninserted_records() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut c = KeyChooser::new(Distribution::Zipfian, 2000, 999);
        for _ in 0..10_000 {
            assert!(c.next(&mut rng, 999) <= 999);
        }
    }
}
