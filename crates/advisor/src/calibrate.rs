//! Fitting the cost model's parameters to measurements (`tessera
//! calibrate`, RESEARCH.md A.1 "Calibration", A.4 #1 and #3).
//!
//! A measurement is one closed-loop run of one kind of operation on a
//! scratch space whose layout is known, reduced to seconds of cluster work
//! per operation (1 / throughput, the thesis's convention). Each kind is
//! described by the model's features of it, so that its cost is linear in
//! the parameters:
//!
//! - a put without a get: w + h · (K·(1 + |N| + Σ_changed (1 − p)) +
//!   α·K·Σ_changed 2p + δ·entries), where w is the request's own cost,
//!   h = 1/T_max, p is the probability the changed subspace moves the
//!   object, and `entries` the local index entries rewritten over every
//!   copy (Eq. 4.5 and Tessera's terms, `model.rs`);
//! - an insert: w_i + h · (α_c·copies + δ_c·entries);
//! - a search: CR·c_req + scanned·β + walked·β_r + results·γ, + ε when
//!   it reads at least one object through an index, + ρ when its walk is
//!   over a range. A scan steps from record to record (β each); a walk,
//!   by equality or over a range, reads each entry's object by key (β_r
//!   each, whether or not the object is returned);
//! - a get: its own cost, g;
//! - a put on a space with global indexes: its put's cost + h·K·Σ per
//!   index (g + μ·p), p the probability it moves the object to another
//!   indexlet (0 when the indexed value is unchanged);
//! - a lookup through a global index: s₀ + c_req·indexlets met + l₀ +
//!   (m + γ)·matches, m the entry's read and its object's get.
//!
//! Every cost above is at the reference rows R₀ a daemon stores; a step
//! that ran beside R rows costs 1 + κ·ln(R/R₀) times it
//! (`model::stored_factor`). κ is fitted first, from searches run again
//! beside a padding space against themselves right before it, and every
//! other step is divided by its factor before the fits below.
//!
//! Puts are fitted together for (w, h, h·α, h·δ), inserts for (w_i,
//! h·α_c, h·δ_c), searches for (c_req, β, γ, ρ, β_r, ε, u, s₀) (equality
//! steps pin c_req, γ and ε, scans β, walks that return fewer objects
//! than they read β_r beside γ, those whose pages are not bounded u, and
//! searches of one and of every region s₀; range
//! steps of two widths tell ρ from β_r), gets
//! for g, each by least squares on relative errors (costs span orders of
//! magnitude; each row is divided by its measurement), with no parameter
//! below zero (every subset of the unknowns is tried and the best
//! non-negative solution kept); then, on top of those, the same way:
//! the global index's hop g and move μ from puts through a global index,
//! the modify's own cost, and a lookup's l₀ and per-match m. Eq. 4.8 is
//! never used (A.4 #1).

use crate::Params;
use tessera_types::plan::INLINE_LOADS;
use tessera_types::FitQuality;

/// What a measured operation is, in the model's terms.
#[derive(Clone, Debug, PartialEq)]
pub enum Measured {
    /// A get by key.
    Get,
    /// A put of existing objects (no get before it).
    Put {
        /// K = f + 1, copies per part.
        copies: f64,
        /// |N|: subspaces none of whose attributes the put changes.
        unchanged: f64,
        /// Per subspace with a changed attribute, the probability that the
        /// object moves region (1 − Π 1/n_j over its changed dimensions).
        moved: Vec<f64>,
        /// Local index entries rewritten over every copy: a changed
        /// attribute's in each region that indexes it and keeps the
        /// object, every entry of a region the object moves out of (and
        /// into), as the model's `entries_rewritten` counts them.
        entries: f64,
        /// Per global index of the space, the probability that the put
        /// moves the object to another of its indexlets (0: the indexed
        /// value is unchanged); each passes K indexlet replicas.
        global: Vec<f64>,
    },
    /// A modify of existing objects: a get, then this put
    /// ([`Measured::Put`]).
    Modify(Box<Measured>),
    /// An insert of new objects.
    Insert {
        /// Copies created: K·(1 + |S|).
        copies: f64,
        /// Local index entries written over every copy.
        entries: f64,
        /// Copies created in regions that index at least one attribute
        /// (`indexed_create` each, whatever their entries).
        indexed: f64,
    },
    /// A search.
    Search {
        /// Regions contacted, CR.
        regions: f64,
        /// Objects examined over those regions by a scan (β each) or an
        /// equality walk (β_r each, and then also `index_reads`).
        examined: f64,
        /// Whether the regions walk a local index over a range (ρ once).
        range: bool,
        /// Index entries a range walk reads over those regions (β_r each).
        range_entries: f64,
        /// Objects returned.
        results: f64,
        /// Objects (or entries) read through a local index: 0 for a scan
        /// (ε is paid once when it is at least one, in proportion below).
        index_reads: f64,
        /// Regions whose page is handed off to a page thread (u each, and
        /// u₁ once for the search when there is at least one): none
        /// for a walk whose index answers every check, every region for a
        /// scan, those past [`INLINE_LOADS`] loads for a walk that tests a
        /// check object by object.
        handed_off: f64,
    },
    /// A search the client answers through a global index: its
    /// indexlets' entries, then a get per entry.
    Lookup {
        /// Indexlets met (c_req each).
        indexlets: f64,
        /// Entries read, each object fetched and returned.
        matches: f64,
    },
    /// Operations run together, each kind a share of them: what a search
    /// handed to a blocking thread adds among work answered at once
    /// (`handoff_mixed_s`), and what writes add to the searches beside
    /// them (`writes_beside_s`).
    Mix(Vec<(f64, Measured)>),
    /// A search ([`Measured::Search`]) on a space of `objects` objects,
    /// more than the `reference` the other searches ran on: what reading
    /// through an index costs more as the space grows (`larger_search_s`
    /// per search, `larger_entry_s` per entry read, each per e-fold of
    /// `objects / reference`).
    Larger {
        /// Objects in the space searched.
        objects: f64,
        /// Objects in the space of the other searches.
        reference: f64,
        /// The search, as it is on a space of `reference` objects.
        search: Box<Measured>,
    },
    /// A step measured again (step `base`, whose features `measured`
    /// are) with other spaces stored beside its own: more rows on every
    /// daemon, none of them read. Its cost over `base`'s, against the
    /// two [`Measurement::stored_rows`], fits what rows stored cost every
    /// operation (κ, `stored_per_fold`).
    Stored {
        /// The label of the step measured without the other spaces.
        base: String,
        /// That step's features.
        measured: Box<Measured>,
    },
}

/// One measurement: seconds of cluster work per operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// What was run (for reports).
    pub step: String,
    /// Its features.
    pub kind: Measured,
    /// 1 / the measured throughput.
    pub cost_s: f64,
    /// Rows each daemon stored while it ran (records of every copy of
    /// every part, global index entries, over the daemons); 0 when not
    /// known, and then taken as the reference's.
    pub stored_rows: f64,
}

impl Measured {
    /// A range over a `fraction` of a one-dimensional subspace's axis of
    /// `intervals` intervals, meeting 1 + φ(n − 1) regions and reading
    /// `entries` index entries (each object read by key): all `returned`,
    /// in pages the regions answer at once, or none (a second check drops
    /// every object, left to test object by object). Such a walk is
    /// answered at once while a region's page loads few objects; the pages
    /// past [`INLINE_LOADS`] are handed off and the loads they made before
    /// are read again ([`crate::model::range_pages_past_inline`]).
    pub fn range_walk(fraction: f64, intervals: f64, entries: f64, returned: bool) -> Measured {
        let regions = 1.0 + fraction * (intervals - 1.0);
        let width = fraction * intervals;
        let handed_off = if returned || width <= 0.0 {
            0.0
        } else {
            crate::model::range_pages_past_inline(width, entries / width).min(regions)
        };
        let read = entries + handed_off * INLINE_LOADS as f64;
        Measured::Search {
            regions,
            examined: 0.0,
            range: true,
            range_entries: read,
            results: if returned { entries } else { 0.0 },
            index_reads: read,
            handed_off,
        }
    }

    /// The group it is fitted and reported in.
    pub fn group(&self) -> &'static str {
        match self {
            Measured::Get => "get",
            Measured::Put { global, .. } if global.is_empty() => "put",
            Measured::Modify(_) => "modify",
            Measured::Insert { .. } => "insert",
            Measured::Search { range: false, .. } => "search",
            Measured::Search { range: true, .. } => "range",
            Measured::Lookup { .. } => "lookup",
            Measured::Mix(_) => "mix",
            Measured::Larger { .. } => "larger",
            Measured::Stored { .. } => "stored",
            Measured::Put { .. } => "global put",
        }
    }

    /// A put's work on global indexes as (indexlet replicas written, at
    /// g each; expected moves over them, at μ each) (`model.rs`,
    /// `global_hops`).
    fn global_terms(&self) -> [f64; 2] {
        match self {
            Measured::Put { copies, global, .. } => [
                copies * global.len() as f64,
                copies * global.iter().sum::<f64>(),
            ],
            Measured::Modify(put) => put.global_terms(),
            _ => [0.0, 0.0],
        }
    }

    /// A put's features: (request, fixed hops, per α, per δ).
    fn put_features(&self) -> Option<[f64; 4]> {
        let (a, b, c) = self.put_terms()?;
        Some([1.0, a, b, c])
    }

    /// An insert's features: (request, copies, entries, copies in
    /// indexed regions).
    fn insert_features(&self) -> Option<[f64; 4]> {
        match *self {
            Measured::Insert {
                copies,
                entries,
                indexed,
            } => Some([1.0, copies, entries, indexed]),
            _ => None,
        }
    }

    /// A put's hops as (fixed, per α, per δ).
    fn put_terms(&self) -> Option<(f64, f64, f64)> {
        match self {
            Measured::Put {
                copies,
                unchanged,
                moved,
                entries,
                ..
            } => {
                let stays: f64 = moved.iter().map(|p| 1.0 - p).sum();
                let moves: f64 = moved.iter().map(|p| 2.0 * p).sum();
                Some((copies * (1.0 + unchanged + stays), copies * moves, *entries))
            }
            _ => None,
        }
    }

    /// A put's chain in overwrite hops under `params` (moves at α,
    /// local index entries at δ, global index replicas at g and μ): what
    /// the model's `modify_hops` counts beyond the get. 0 for anything
    /// that is not a put.
    fn put_hops(&self, params: &Params) -> f64 {
        let Some((fixed, per_alpha, per_delta)) = self.put_terms() else {
            return 0.0;
        };
        let [global, global_moves] = self.global_terms();
        fixed
            + params.alpha * per_alpha
            + params.index_write * per_delta
            + params.global_index_hop * global
            + params.global_move_hops() * global_moves
    }

    /// The hops of a put's chain beyond its first (`modify_hop_s` each,
    /// in a modify).
    fn hops_beyond_first(&self, params: &Params) -> f64 {
        (self.put_hops(params) - 1.0).max(0.0)
    }

    /// The model's cost of this operation under `params`.
    pub fn predicted_s(&self, params: &Params) -> f64 {
        let h = params.hop_s();
        match self {
            Measured::Get => params.get_cost_s(),
            Measured::Put { .. } => params.write_s + h * self.put_hops(params),
            Measured::Modify(put) => {
                params.get_cost_s()
                    + params.modify_s
                    + params.modify_hop_s * put.hops_beyond_first(params)
                    + put.predicted_s(params)
            }
            Measured::Insert {
                copies,
                entries,
                indexed,
            } => {
                params.insert_s
                    + h * (params.alpha_create * copies
                        + params.index_create() * entries
                        + params.indexed_create * indexed)
            }
            Measured::Search { .. } => {
                let terms = self.search_terms().unwrap_or_default();
                let per = [
                    params.request_s,
                    params.beta_s,
                    params.result_s,
                    params.range_search_s,
                    params.range_entry_s,
                    params.walk_first_s,
                    params.unbounded_s,
                    params.search_base_s,
                    params.handoff_first_s,
                ];
                terms.iter().zip(per).map(|(x, c)| x * c).sum()
            }
            Measured::Lookup { indexlets, matches } => {
                params.search_base_s
                    + params.lookup_base_s
                    + indexlets * params.request_s
                    + matches * (params.lookup_match_cost_s() + params.result_s)
            }
            Measured::Mix(_) => {
                let (parts_s, [handoffs, beside]) = self.mix_terms(params).unwrap_or_default();
                parts_s + params.handoff_mixed_s * handoffs + params.writes_beside_s * beside
            }
            Measured::Larger { search, .. } => {
                let [per_search, per_entry] = self.larger_terms().unwrap_or_default();
                search.predicted_s(params)
                    + params.larger_search_s * per_search
                    + params.larger_entry_s * per_entry
            }
            // At the reference rows; `Measurement::predicted_s` prices
            // the rows it ran beside.
            Measured::Stored { measured, .. } => measured.predicted_s(params),
        }
    }

    /// A search on a larger space as [e-folds of its objects over the
    /// reference's, times min(1, index reads); the same, times the
    /// entries read through an index], as the model prices a search
    /// (`model.rs`, `search_priced`).
    fn larger_terms(&self) -> Option<[f64; 2]> {
        let Measured::Larger {
            objects,
            reference,
            search,
        } = self
        else {
            return None;
        };
        let folds = crate::model::larger_folds(*objects, *reference);
        let terms = search.search_terms()?;
        let Measured::Search { index_reads, .. } = **search else {
            return None;
        };
        // Whether at least one entry was read through an index, and the
        // entries read (by equality or over a range).
        Some([folds * index_reads.clamp(0.0, 1.0), folds * terms[4]])
    }

    /// A mix's cost as (its parts' costs weighted by their shares, [the
    /// hand-offs among other work per operation: the handed-off share of
    /// operations times 1 − their share of the time; searches times
    /// writes, p_s·p_w]), as the model prices a workload
    /// (`model::mixed_handoff_s`, `model::writes_beside_s`).
    fn mix_terms(&self, params: &Params) -> Option<(f64, [f64; 2])> {
        let Measured::Mix(parts) = self else {
            return None;
        };
        let priced: Vec<(f64, f64, bool)> = parts
            .iter()
            .map(|(p, m)| {
                let off = matches!(m, Measured::Search { regions, handed_off, .. }
                    if *handed_off > 0.5 * regions);
                (*p, m.predicted_s(params), off)
            })
            .collect();
        let parts_s = priced.iter().map(|(p, c, _)| p * c).sum();
        let share_off: f64 = priced.iter().filter(|x| x.2).map(|x| x.0).sum();
        let per = crate::model::mixed_handoff_s(priced.into_iter(), 1.0);
        let searches: f64 = parts
            .iter()
            .filter(|(_, m)| matches!(m, Measured::Search { .. }))
            .map(|(p, _)| p)
            .sum();
        let writes = parts.iter().map(|(p, m)| {
            let write = matches!(
                m,
                Measured::Put { .. } | Measured::Modify(_) | Measured::Insert { .. }
            );
            (*p, write)
        });
        let beside = searches * crate::model::writes_beside_s(writes, 1.0);
        Some((parts_s, [share_off * per, beside]))
    }

    /// A search's features, in the order (c_req, β, γ, ρ, β_r, ε, u, s₀,
    /// u₁).
    fn search_terms(&self) -> Option<[f64; 9]> {
        match *self {
            Measured::Search {
                regions,
                examined,
                range,
                range_entries,
                results,
                index_reads,
                handed_off,
            } => Some([
                regions,
                // What a scan steps over (an equality walk reads its
                // entries through the index: index_reads = examined).
                (examined - if range { 0.0 } else { index_reads }).max(0.0),
                results,
                if range { 1.0 } else { 0.0 },
                // Entries read through an index, over a range or by
                // equality: each an object read by key.
                if range { range_entries } else { index_reads },
                // ε in every region an entry is read in.
                crate::model::regions_read(regions, index_reads),
                handed_off,
                1.0,
                // Whether any page is handed off (u₁ once), as ε is paid
                // once: the expected pages, up to one.
                handed_off.clamp(0.0, 1.0),
            ]),
            _ => None,
        }
    }
}

impl Measurement {
    /// What its daemons' rows multiply its cost by, under `params`
    /// (`model::stored_factor`); 1 when its rows are not known.
    pub fn stored_factor(&self, params: &Params) -> f64 {
        crate::model::stored_factor(
            self.stored_rows,
            params.stored_reference_rows,
            params.stored_per_fold,
        )
    }

    /// The model's cost of it under `params`, at the rows it ran beside.
    pub fn predicted_s(&self, params: &Params) -> f64 {
        self.kind.predicted_s(params) * self.stored_factor(params)
    }
}

/// A measurement beside the fitted model's cost of it.
#[derive(Clone, Debug, PartialEq)]
pub struct FitPoint {
    /// The measurement's step.
    pub step: String,
    /// Its group (`get`, `put`, `insert`, `search`).
    pub group: &'static str,
    /// Measured seconds per operation.
    pub measured_s: f64,
    /// Fitted seconds per operation.
    pub fitted_s: f64,
}

/// The outcome of [`fit`].
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The defaults with every fitted parameter replaced.
    pub params: Params,
    /// R² and relative RMS error per group.
    pub quality: Vec<FitQuality>,
    /// Every measurement with its fitted cost.
    pub points: Vec<FitPoint>,
    /// Parameters the measurements could not determine (kept at their
    /// defaults), with why.
    pub kept: Vec<String>,
}

/// Why the measurements cannot be fitted.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FitError {
    /// A group the fit needs has no usable measurement.
    #[error("no usable {0} measurement (a cost that is finite and positive)")]
    Missing(&'static str),
}

/// Fits the parameters to `measurements`; parameters they do not determine
/// keep their value in `defaults`.
pub fn fit(measurements: &[Measurement], defaults: &Params) -> Result<Fit, FitError> {
    let measured: Vec<&Measurement> = measurements
        .iter()
        .filter(|m| m.cost_s.is_finite() && m.cost_s > 0.0)
        .collect();
    let mut params = defaults.clone();
    let mut kept = Vec::new();

    // What rows stored cost first: each step measured again beside other
    // spaces against itself alone, cost / base − 1 = κ·ln(rows / base
    // rows), by least squares, not below zero. Every other step is then
    // brought to the reference rows (its cost divided by what its own
    // space's rows added or saved) and fitted there.
    let pairs: Vec<(f64, f64, f64)> = measured
        .iter()
        .filter_map(|m| {
            let Measured::Stored { base, .. } = &m.kind else {
                return None;
            };
            let base = measured.iter().find(|b| &b.step == base)?;
            (m.stored_rows > 0.0 && base.stored_rows > 0.0 && m.stored_rows != base.stored_rows)
                .then(|| {
                    let folds = (m.stored_rows / base.stored_rows).ln();
                    (folds, m.cost_s / base.cost_s - 1.0, base.stored_rows)
                })
        })
        .collect();
    if let Some(&(_, _, reference)) = pairs.first() {
        let (xy, xx) = pairs
            .iter()
            .fold((0.0, 0.0), |(xy, xx), (x, y, _)| (xy + x * y, xx + x * x));
        params.stored_per_fold = (xy / xx).max(0.0);
        params.stored_reference_rows = reference;
    } else {
        kept.push("stored_per_fold: no step measured again beside other spaces".into());
    }
    let normalized: Vec<Measurement> = measured
        .iter()
        .map(|m| Measurement {
            cost_s: m.cost_s / m.stored_factor(&params),
            ..(*m).clone()
        })
        .collect();
    let usable: Vec<&Measurement> = normalized.iter().collect();

    // Puts: cost = w + h·fixed + (h·α)·per_α + (h·δ)·per_δ, on spaces
    // without a global index (those are fitted next, for its hop).
    let puts: Vec<(Vec<f64>, f64)> = usable
        .iter()
        .filter(|m| m.kind.group() == "put")
        .filter_map(|m| Some((m.kind.put_features()?.to_vec(), m.cost_s)))
        .collect();
    if !puts.iter().any(|(x, _)| x[1] > 0.0) {
        return Err(FitError::Missing("put"));
    }
    // The request's cost is told from the hops' only by puts of different
    // chain lengths; with one length it stays 0.
    let chains: Vec<f64> = puts.iter().map(|(x, _)| x[1]).collect();
    let c = if chains.iter().any(|&l| l != chains[0]) {
        relative_nnls(&puts, 4)
    } else {
        kept.push("write_s: no two puts of different chain lengths".into());
        let mut c = relative_nnls(&drop_first(&puts), 3);
        c.insert(0, 0.0);
        c
    };
    if c[1] <= 0.0 {
        return Err(FitError::Missing("put"));
    }
    params.write_s = c[0];
    params.t_max_ops_per_s = 1.0 / c[1];
    if puts.iter().any(|(x, _)| x[2] > 0.0) && c[2] > 0.0 {
        params.alpha = c[2] / c[1];
    } else {
        kept.push("alpha: no put that moves an object fitted a positive cost".into());
    }
    if puts.iter().any(|(x, _)| x[3] > 0.0) {
        params.index_write = c[3] / c[1];
    } else {
        kept.push("index_write: no put that rewrites an index entry".into());
    }
    let h = params.hop_s();

    // Puts through a global index: cost = their put's cost + (h·g)·replicas
    // written + (h·μ)·expected moves, for g and μ (μ only when some put
    // moved the object).
    let global: Vec<(Vec<f64>, f64, f64)> = usable
        .iter()
        .filter(|m| m.kind.group() == "global put")
        .map(|m| {
            let base = m.kind.predicted_s(&Params {
                global_index_hop: 0.0,
                global_index_move: Some(0.0),
                ..params.clone()
            });
            let [written, moved] = m.kind.global_terms();
            (vec![h * written, h * moved], m.cost_s, base)
        })
        .collect();
    let moves = global.iter().any(|(x, _, _)| x[1] > 0.0);
    match offset_nnls(&global, if moves { 2 } else { 1 }) {
        Some(c) => {
            params.global_index_hop = c[0];
            if moves {
                params.global_index_move = Some(c[1]);
            } else {
                kept.push("global_index_move: no put moved an object between indexlets".into());
            }
        }
        None => {
            kept.push("global_index_hop, global_index_move: no put through a global index".into())
        }
    }

    // Inserts: cost = w_i + (h·α_c)·copies + (h·δ_c)·entries +
    // (h·ι)·copies in indexed regions. ι is told from δ_c only by
    // inserts whose indexed copies hold different numbers of entries;
    // without them its column is left out.
    let mut inserts: Vec<(Vec<f64>, f64)> = usable
        .iter()
        .filter_map(|m| Some((m.kind.insert_features()?.to_vec(), m.cost_s)))
        .collect();
    let indexed_create = told_apart(&mut inserts, 2, 3);
    let copies: Vec<f64> = inserts.iter().map(|(x, _)| x[1]).collect();
    let c = if copies.iter().any(|&l| l != copies[0]) {
        relative_nnls(&inserts, 4)
    } else {
        let mut c = relative_nnls(&drop_first(&inserts), 3);
        c.insert(0, 0.0);
        c
    };
    if c[1] > 0.0 {
        params.insert_s = c[0];
        params.alpha_create = c[1] / h;
        if inserts.iter().any(|(x, _)| x[2] > 0.0) {
            params.index_create = Some(c[2] / h);
        } else {
            kept.push("index_create: no insert wrote an index entry".into());
        }
        if indexed_create {
            params.indexed_create = c[3] / h;
        } else {
            kept.push("indexed_create: no inserts with different entries per indexed copy".into());
        }
    } else {
        kept.push("alpha_create: no insert left a positive cost".into());
    }

    // Gets: one cost, g, the mean on relative errors.
    let gets: Vec<f64> = usable
        .iter()
        .filter(|m| matches!(m.kind, Measured::Get))
        .map(|m| m.cost_s)
        .collect();
    if gets.is_empty() {
        kept.push("get_s: no get measured (a get is one hop)".into());
    } else {
        let (num, den) = gets
            .iter()
            .fold((0.0, 0.0), |(n, d), y| (n + 1.0 / y, d + 1.0 / (y * y)));
        params.get_s = Some(num / den);
    }

    // Modifies: cost = g + m + m_h·(their put's hops beyond the first) +
    // their put's cost, for m and m_h (the put and the get fitted above),
    // on relative errors, not below zero.
    let modifies: Vec<(Vec<f64>, f64, f64)> = usable
        .iter()
        .filter_map(|m| {
            let Measured::Modify(put) = &m.kind else {
                return None;
            };
            let base = m.kind.predicted_s(&Params {
                modify_s: 0.0,
                modify_hop_s: 0.0,
                ..params.clone()
            });
            Some((vec![1.0, put.hops_beyond_first(&params)], m.cost_s, base))
        })
        .collect();
    match offset_nnls(&modifies, 2) {
        Some(m) => {
            params.modify_s = m[0];
            if modifies.iter().any(|(x, _, _)| x[1] > 0.0) {
                params.modify_hop_s = m[1];
            } else {
                kept.push("modify_hop_s: no modify on a chain of more than one hop".into());
            }
        }
        None => kept.push("modify_s, modify_hop_s: no modify measured".into()),
    }

    // Searches: cost = c_req·CR + β·scanned + γ·results + ρ·[range] +
    // β_r·walked entries + ε·regions read + u·pages handed off + s₀ +
    // u₁·min(1, pages handed off).
    let mut searches: Vec<(Vec<f64>, f64)> = usable
        .iter()
        .filter_map(|m| Some((m.kind.search_terms()?.to_vec(), m.cost_s)))
        .collect();
    if searches.is_empty() {
        return Err(FitError::Missing("search"));
    }
    // u₁ is told from u only by searches handing off different numbers
    // of pages, one and more: where every search that hands off pages
    // hands off the same number, the two columns are one, and u takes it.
    let handoff_first = told_apart(&mut searches, 6, 8);
    let c = relative_nnls(&searches, 9);
    if c[0] > 0.0 {
        params.request_s = c[0];
    } else {
        kept.push("request_s: the searches fitted no cost per region".into());
    }
    if searches.iter().any(|(x, _)| x[1] > 0.0) {
        params.beta_s = c[1];
    } else {
        kept.push("beta_s: no search scanned an object".into());
    }
    if searches.iter().any(|(x, _)| x[2] > 0.0) {
        params.result_s = c[2];
    } else {
        kept.push("result_s: no search returned an object".into());
    }
    // ρ and β_r are told apart only by range walks of different lengths.
    let lengths: Vec<f64> = searches
        .iter()
        .filter(|(x, _)| x[3] > 0.0)
        .map(|(x, _)| x[4])
        .collect();
    if lengths.iter().any(|&l| l != lengths[0]) {
        params.range_search_s = c[3];
        params.range_entry_s = c[4];
    } else {
        kept.push("range_search_s, range_entry_s: no two range walks of different lengths".into());
    }
    // ε is told from c_req only by walks that read something and walks
    // that read nothing.
    let reads: Vec<f64> = searches.iter().map(|(x, _)| x[5]).collect();
    if reads.iter().any(|&r| r > 0.0) && reads.contains(&0.0) {
        params.walk_first_s = c[5];
    } else {
        kept.push("walk_first_s: no searches both with and without index reads".into());
    }
    // The unbounded page's cost is told from c_req only by searches of
    // both kinds.
    let unbounded: Vec<f64> = searches.iter().map(|(x, _)| x[6]).collect();
    if unbounded.iter().any(|&u| u > 0.0) && unbounded.contains(&0.0) {
        params.unbounded_s = c[6];
    } else {
        kept.push("unbounded_s: no searches both answered at once and handed off".into());
    }
    if handoff_first {
        params.handoff_first_s = c[8];
    } else {
        kept.push("handoff_first_s: no searches handing off different numbers of pages".into());
    }
    // The per-search cost is told from c_req only by searches meeting
    // different numbers of regions.
    let met: Vec<f64> = searches.iter().map(|(x, _)| x[0]).collect();
    if met.iter().any(|&m| m != met[0]) {
        params.search_base_s = c[7];
    } else {
        kept.push("search_base_s: no two searches meeting different numbers of regions".into());
    }

    // Lookups through a global index: cost = s₀ + c_req·indexlets + l₀ +
    // (m + γ)·matches, for l₀ (`lookup_base_s`) and m (`lookup_match_s`),
    // the searches' s₀, c_req and γ fitted above; l₀ is told from m only
    // by lookups of different match counts.
    let lookups: Vec<(Vec<f64>, f64, f64)> = usable
        .iter()
        .filter_map(|m| match m.kind {
            Measured::Lookup { indexlets, matches } => Some((
                vec![matches, 1.0],
                m.cost_s,
                params.search_base_s + indexlets * params.request_s + matches * params.result_s,
            )),
            _ => None,
        })
        .collect();
    let counts: Vec<f64> = lookups.iter().map(|(x, _, _)| x[0]).collect();
    let both = counts.iter().any(|&c| c != counts[0]);
    match offset_nnls(&lookups, if both { 2 } else { 1 }) {
        Some(c) => {
            params.lookup_match_s = Some(c[0]);
            if both {
                params.lookup_base_s = c[1];
            } else {
                kept.push("lookup_base_s: no two lookups of different match counts".into());
            }
        }
        None => kept.push("lookup_match_s, lookup_base_s: no lookup through a global index".into()),
    }

    // Mixes: cost = their parts' fitted costs + v·(hand-offs among other
    // work per operation) + x·(searches times writes), for v
    // (`handoff_mixed_s`) and x (`writes_beside_s`), not below zero.
    let mixes: Vec<(Vec<f64>, f64, f64)> = usable
        .iter()
        .filter_map(|m| {
            let (parts_s, terms) = m.kind.mix_terms(&params)?;
            terms
                .iter()
                .any(|&t| t > 0.0)
                .then(|| (terms.to_vec(), m.cost_s, parts_s))
        })
        .collect();
    let fitted = offset_nnls(&mixes, 2);
    let has = |i: usize| mixes.iter().any(|(x, _, _)| x[i] > 0.0);
    match &fitted {
        Some(c) if has(0) => params.handoff_mixed_s = c[0],
        _ => kept.push("handoff_mixed_s: no mix with a search handed off".into()),
    }
    match &fitted {
        Some(c) if has(1) => params.writes_beside_s = c[1],
        _ => kept.push("writes_beside_s: no mix of searches and writes".into()),
    }

    // Searches on a larger space: cost = the search's fitted cost +
    // ln(objects / reference)·(a_L·min(1, index reads) + b_L·entries
    // read), for a_L (`larger_search_s`) and b_L (`larger_entry_s`), not
    // below zero.
    let mut reference = None;
    let larger: Vec<(Vec<f64>, f64, f64)> = usable
        .iter()
        .filter_map(|m| {
            let Measured::Larger {
                search,
                reference: r,
                ..
            } = &m.kind
            else {
                return None;
            };
            reference = Some(*r);
            let terms = m.kind.larger_terms()?;
            Some((terms.to_vec(), m.cost_s, search.predicted_s(&params)))
        })
        .collect();
    match (offset_nnls(&larger, 2), reference) {
        (Some(c), Some(reference)) => {
            (params.larger_search_s, params.larger_entry_s) = (c[0], c[1]);
            params.larger_reference_objects = reference;
        }
        _ => kept.push(
            "larger_search_s, larger_entry_s: no search through an index on a larger space".into(),
        ),
    }

    let points: Vec<FitPoint> = measured
        .iter()
        .map(|m| FitPoint {
            step: m.step.clone(),
            group: m.kind.group(),
            measured_s: m.cost_s,
            fitted_s: m.predicted_s(&params),
        })
        .collect();
    let quality = [
        "get",
        "put",
        "modify",
        "insert",
        "search",
        "range",
        "global put",
        "lookup",
        "mix",
        "larger",
        "stored",
    ]
    .into_iter()
    .filter_map(|group| {
        let pairs: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.group == group)
            .map(|p| (p.measured_s, p.fitted_s))
            .collect();
        (!pairs.is_empty()).then(|| FitQuality {
            op: group.to_string(),
            points: pairs.len() as u32,
            r2: r_squared(&pairs),
            rel_rms: relative_rms(&pairs),
        })
    })
    .collect();
    Ok(Fit {
        params,
        quality,
        points,
        kept,
    })
}

/// Whether feature `once` is told apart from feature `per` by the rows:
/// among the rows where `once` is positive, `per / once` takes more than
/// one value. Where it does not, the two columns are one (`per` would
/// take it all or the fit would split it at random), so `once` is zeroed
/// in every row and keeps its default.
fn told_apart(rows: &mut [(Vec<f64>, f64)], per: usize, once: usize) -> bool {
    let ratios: Vec<f64> = rows
        .iter()
        .filter(|(x, _)| x[once] > 0.0)
        .map(|(x, _)| x[per] / x[once])
        .collect();
    let apart = ratios.iter().any(|&r| (r - ratios[0]).abs() > 1e-9);
    if !apart {
        for (x, _) in rows.iter_mut() {
            x[once] = 0.0;
        }
    }
    apart
}

/// The rows without their first feature.
fn drop_first(rows: &[(Vec<f64>, f64)]) -> Vec<(Vec<f64>, f64)> {
    rows.iter().map(|(x, y)| (x[1..].to_vec(), *y)).collect()
}

/// R² of fitted against measured costs: 1 − SS_res / SS_tot (1 when the
/// measurements are all equal and fitted exactly, 0 when not).
pub fn r_squared(pairs: &[(f64, f64)]) -> f64 {
    let n = pairs.len() as f64;
    let mean = pairs.iter().map(|(m, _)| m).sum::<f64>() / n;
    let ss_tot: f64 = pairs.iter().map(|(m, _)| (m - mean).powi(2)).sum();
    let ss_res: f64 = pairs.iter().map(|(m, f)| (m - f).powi(2)).sum();
    if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res == 0.0 {
        1.0
    } else {
        0.0
    }
}

/// √(mean of ((fitted − measured) / measured)²).
pub fn relative_rms(pairs: &[(f64, f64)]) -> f64 {
    let n = pairs.len() as f64;
    (pairs
        .iter()
        .map(|(m, f)| ((f - m) / m).powi(2))
        .sum::<f64>()
        / n)
        .sqrt()
}

/// Non-negative least squares on relative errors: the c ≥ 0 minimising
/// Σ ((x·c − y) / y)², over every subset of the `n` unknowns (free ones
/// solved by the normal equations, the others 0). Zeros when no subset
/// gives a non-negative solution.
fn relative_nnls(rows: &[(Vec<f64>, f64)], n: usize) -> Vec<f64> {
    let rows: Vec<(Vec<f64>, f64, f64)> = rows.iter().map(|(x, y)| (x.clone(), *y, 0.0)).collect();
    offset_nnls(&rows, n).unwrap_or_else(|| vec![0.0; n])
}

/// [`relative_nnls`] of rows (x, y, base) whose cost is `base` (already
/// fitted) + x·c: the c ≥ 0 minimising Σ ((base + x·c − y) / y)², all
/// zeros among the candidates (what rows that cost no more than their
/// base fit). `None` only when no row has a positive feature: nothing
/// measured what c prices.
fn offset_nnls(rows: &[(Vec<f64>, f64, f64)], n: usize) -> Option<Vec<f64>> {
    if !rows
        .iter()
        .any(|(x, _, _)| x.iter().take(n).any(|&v| v > 0.0))
    {
        return None;
    }
    let mut best: Option<(f64, Vec<f64>)> = None;
    for mask in 0u32..(1 << n) {
        let free: Vec<usize> = (0..n).filter(|&i| mask & (1 << i) != 0).collect();
        let Some(solution) = solve_subset(rows, &free) else {
            continue;
        };
        let mut c = vec![0.0; n];
        for (&i, v) in free.iter().zip(&solution) {
            c[i] = *v;
        }
        if c.iter().any(|&v| v < 0.0 || !v.is_finite()) {
            continue;
        }
        let residual: f64 = rows
            .iter()
            .map(|(x, y, base)| {
                let fitted: f64 = base + x.iter().zip(&c).map(|(a, b)| a * b).sum::<f64>();
                ((fitted - y) / y).powi(2)
            })
            .sum();
        if best.as_ref().is_none_or(|(r, _)| residual < *r) {
            best = Some((residual, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The least-squares solution of Σ ((base + x_free·c − y) / y)², by
/// Gaussian elimination on the normal equations; `None` when they are
/// singular.
fn solve_subset(rows: &[(Vec<f64>, f64, f64)], free: &[usize]) -> Option<Vec<f64>> {
    let k = free.len();
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y, base) in rows {
        let w: Vec<f64> = free.iter().map(|&i| x[i] / y).collect();
        let target = (y - base) / y;
        for r in 0..k {
            for c in 0..k {
                a[r][c] += w[r] * w[c];
            }
            a[r][k] += w[r] * target;
        }
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        let scale = a.iter().map(|r| r[col].abs()).fold(0.0, f64::max);
        if a[pivot][col].abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE) || scale == 0.0 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (v, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= factor * p;
                }
            }
        }
    }
    Some((0..k).map(|r| a[r][k] / a[r][r]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise in [−amplitude, amplitude] (a linear
    /// congruential generator), so the test does not depend on a seed
    /// library.
    struct Noise(u64);
    impl Noise {
        fn next(&mut self, amplitude: f64) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
            (2.0 * unit - 1.0) * amplitude
        }
    }

    /// The measurements a calibration run takes, with costs computed here
    /// from the given constants (not through `predicted_s`), each off by
    /// up to `noise` relative.
    fn synthetic(truth: &Params, noise: f64) -> Vec<Measurement> {
        let (h, alpha, delta, alpha_c) = (
            1.0 / truth.t_max_ops_per_s,
            truth.alpha,
            truth.index_write,
            truth.alpha_create,
        );
        let (c_req, beta, gamma) = (truth.request_s, truth.beta_s, truth.result_s);
        let (rho, beta_r) = (truth.range_search_s, truth.range_entry_s);
        let (w, w_i, g, eps) = (
            truth.write_s,
            truth.insert_s,
            truth.get_cost_s(),
            truth.walk_first_s,
        );
        let (unbounded, base) = (truth.unbounded_s, truth.search_base_s);
        let first_off = truth.handoff_first_s;
        let delta_c = truth.index_create();
        let iota = truth.indexed_create;
        let mut rng = Noise(42);
        let mut out = Vec::new();
        // With a reference, each step runs beside a quarter, one or twice
        // the reference rows in turn, and costs what they add or save.
        let reference = truth.stored_reference_rows;
        let mut push = |step: String, kind: Measured, cost: f64, rng: &mut Noise| {
            let stored_rows = reference * [0.25, 1.0, 2.0][out.len() % 3];
            let rows = if stored_rows > 0.0 {
                1.0 + truth.stored_per_fold * (stored_rows / reference).ln()
            } else {
                1.0
            };
            out.push(Measurement {
                step,
                kind,
                cost_s: cost * rows * (1.0 + rng.next(noise)),
                stored_rows,
            })
        };
        let r = 16.0;
        let p = 1.0 - 1.0 / r;
        for k in [1.0, 2.0] {
            push(format!("get K={k}"), Measured::Get, g, &mut rng);
            // Key subspace only: one hop per copy.
            let put = Measured::Put {
                copies: k,
                unchanged: 0.0,
                moved: vec![],
                entries: 0.0,
                global: vec![],
            };
            push(
                format!("put key-only K={k}"),
                put.clone(),
                w + h * k,
                &mut rng,
            );
            let modify = Measured::Modify(Box::new(put));
            // A chain of k hops: k − 1 beyond the first.
            let cost = g + truth.modify_s + truth.modify_hop_s * (k - 1.0) + w + h * k;
            push(format!("modify key-only K={k}"), modify, cost, &mut rng);
            let insert = Measured::Insert {
                copies: k,
                entries: 0.0,
                indexed: 0.0,
            };
            push(
                format!("insert key-only K={k}"),
                insert,
                w_i + h * k * alpha_c,
                &mut rng,
            );
            // Subspaces a and b, index c: three parts, indexed a, b, c.
            let put = Measured::Put {
                copies: k,
                unchanged: 2.0,
                moved: vec![],
                entries: 0.0,
                global: vec![],
            };
            push(
                format!("put d K={k}"),
                put.clone(),
                w + h * 3.0 * k,
                &mut rng,
            );
            let modify = Measured::Modify(Box::new(put));
            let cost = g + truth.modify_s + truth.modify_hop_s * (3.0 * k - 1.0) + w + h * 3.0 * k;
            push(format!("modify d K={k}"), modify, cost, &mut rng);
            let put = Measured::Put {
                copies: k,
                unchanged: 2.0,
                moved: vec![],
                entries: 3.0 * k,
                global: vec![],
            };
            let cost = w + h * (3.0 * k + delta * 3.0 * k);
            push(format!("put c K={k}"), put, cost, &mut rng);
            // Entries a put of a rewrites a copy: a's in the key
            // subspace's regions; in a's, which index a and c, a's where
            // the object stays and both where it moves; none in b's.
            let moved = 1.0 + (1.0 - p) + 2.0 * p;
            let put = Measured::Put {
                copies: k,
                unchanged: 1.0,
                moved: vec![p],
                entries: moved * k,
                global: vec![],
            };
            // Chain: key, b overwritten, a moved with probability p (old
            // and new region, α each) or overwritten.
            let hops = k * (1.0 + 1.0 + p * 2.0 * alpha + (1.0 - p)) + delta * moved * k;
            push(format!("put a K={k}"), put, w + h * hops, &mut rng);
            let put = Measured::Put {
                copies: k,
                unchanged: 0.0,
                moved: vec![p, p],
                entries: 2.0 * moved * k,
                global: vec![],
            };
            let hops = k * (1.0 + 2.0 * (p * 2.0 * alpha + (1.0 - p))) + delta * 2.0 * moved * k;
            push(format!("put a,b K={k}"), put, w + h * hops, &mut rng);
            // Entries an insert writes a copy: a, b and c in the key
            // subspace's regions, two in a's and in b's.
            let insert = Measured::Insert {
                copies: 3.0 * k,
                entries: 7.0 * k,
                indexed: 3.0 * k,
            };
            let hops = 3.0 * k * (alpha_c + iota) + delta_c * 7.0 * k;
            push(format!("insert K={k}"), insert, w_i + h * hops, &mut rng);
        }
        let objects = 4000.0;
        // "a present" and its cost, once priced.
        let mut answered: Option<(Measured, f64)> = None;
        // (step, regions, examined, results, read through an index,
        // answered at once)
        for (step, regions, examined, results, indexed, at_once) in [
            ("a absent", 1.0, 0.0, 0.0, true, true),
            ("a present", 1.0, 10.0, 10.0, true, true),
            ("b present", 1.0, 1.0, 1.0, true, true),
            ("b present, d absent", 1.0, 1.0, 0.0, true, false),
            ("a present, d absent", 1.0, 10.0, 0.0, true, false),
            ("c absent", r, 0.0, 0.0, true, true),
            ("c present", r, 10.0, 10.0, true, true),
            ("d absent", r, objects, 0.0, false, false),
            ("one region, d absent", 1.0, objects / r, 0.0, false, false),
            ("d present", r, objects, 1000.0, false, false),
        ] {
            let index_reads = if indexed { examined } else { 0.0 };
            let kind = Measured::Search {
                regions,
                examined,
                range: false,
                range_entries: 0.0,
                results,
                index_reads,
                handed_off: if at_once { 0.0 } else { regions },
            };
            // ε in every region that reads an entry: the one region, or
            // of r regions those the reads land in, spread as Poisson.
            let first = if index_reads == 0.0 {
                0.0
            } else if regions == 1.0 {
                eps
            } else {
                eps * regions * (1.0 - (-index_reads / regions).exp())
            };
            // u per page handed off, u₁ once.
            let handed_off = if at_once {
                0.0
            } else {
                regions * unbounded + first_off
            };
            // A scan steps over records at β; a walk reads its entries'
            // objects at β_r.
            let per_entry = if indexed { beta_r } else { beta };
            let cost = base
                + regions * c_req
                + examined * per_entry
                + results * gamma
                + first
                + handed_off;
            push(step.to_string(), kind.clone(), cost, &mut rng);
            // The same search on ten times the objects, where each walk
            // pays a_L once and b_L per entry read, per e-fold.
            if matches!(step, "a present" | "b present") {
                let folds = 10f64.ln();
                let larger = Measured::Larger {
                    objects: 10.0 * objects,
                    reference: objects,
                    search: Box::new(kind.clone()),
                };
                let extra = folds * (truth.larger_search_s + examined * truth.larger_entry_s);
                push(format!("{step} larger"), larger, cost + extra, &mut rng);
            }
            // Half "a present" (answered at once), half this search
            // handed off: the search takes s = cost / (a + cost) of the
            // mix's time, and each of its operations adds v·(1 − s), half
            // the mix's operations.
            if step == "b present, d absent" {
                let (a_kind, a) = answered.clone().expect("a present is priced first");
                let s = cost / (a + cost);
                let mixed = 0.5 * a + 0.5 * cost + 0.5 * truth.handoff_mixed_s * (1.0 - s);
                let mix = Measured::Mix(vec![(0.5, a_kind), (0.5, kind.clone())]);
                push(format!("mix of a present and {step}"), mix, mixed, &mut rng);
            }
            // This search among puts of d at f = 0 (key, a, b: three
            // hops): each search pays x per share of writes, p_s·p_w·x
            // per operation.
            if step == "a present" {
                answered = Some((kind.clone(), cost));
                let put = Measured::Put {
                    copies: 1.0,
                    unchanged: 2.0,
                    moved: vec![],
                    entries: 0.0,
                    global: vec![],
                };
                let put_s = w + h * 3.0;
                for ps in [0.9, 0.5] {
                    let pw = 1.0 - ps;
                    let mixed = ps * cost + pw * put_s + ps * pw * truth.writes_beside_s;
                    let mix = Measured::Mix(vec![(ps, kind.clone()), (pw, put.clone())]);
                    push(
                        format!("mix {ps} of {step} and put d"),
                        mix,
                        mixed,
                        &mut rng,
                    );
                }
            }
        }
        // Ranges on a 1-D subspace of r intervals, of a fifth and of nine
        // tenths of an interval: 1 + φ(r − 1) regions, φ·O entries walked
        // and returned; and both again with a check that drops every
        // object: their entries read, none returned. The narrower (50 over
        // 1.19 regions) is answered at once; the wider (past INLINE_LOADS
        // loads in a region: 225 over 1.84 regions) is handed off, its
        // first INLINE_LOADS loads in each read twice.
        for (share, returned) in [(0.2, true), (0.9, true), (0.2, false), (0.9, false)] {
            let phi = share / r;
            let (regions, entries) = (1.0 + phi * (r - 1.0), phi * objects);
            // ε in each region met, as the entries land in all of them.
            let first = |reads: f64| eps * regions * (1.0 - (-reads / regions).exp());
            let cost = if returned {
                base + regions * c_req + rho + entries * (beta_r + gamma) + first(entries)
            } else {
                // The range spans `share` of an interval, 250 objects an
                // interval: it lies in one region with probability
                // 1 − share (one page of all its loads, past the budget
                // by a Poisson tail), else is cut in two pieces, each
                // handed off when longer than 64 / 250 of an interval.
                let t = INLINE_LOADS as f64 / 250.0;
                let pages = (1.0 - share) * crate::model::beyond_inline(entries)
                    + 2.0 * (share - t).max(0.0);
                let read = entries + pages * INLINE_LOADS as f64;
                base + regions * c_req
                    + pages * unbounded
                    + pages.min(1.0) * first_off
                    + rho
                    + read * beta_r
                    + first(read)
            };
            let step = if returned {
                format!("range {share}")
            } else {
                format!("range {share}, none returned")
            };
            push(
                step,
                Measured::range_walk(phi, r, entries, returned),
                cost,
                &mut rng,
            );
        }
        // A key-only space with a global index of r indexlets: a put of
        // another attribute writes the projection on each replica (g), a
        // put of the indexed one moves it with probability p (μ more).
        let (gi, mu) = (truth.global_index_hop, truth.global_move_hops());
        let (l0, m) = (truth.lookup_base_s, truth.lookup_match_cost_s());
        for k in [1.0, 2.0] {
            for (attr, moves) in [("d", 0.0), ("e", p)] {
                let put = Measured::Put {
                    copies: k,
                    unchanged: 0.0,
                    moved: vec![],
                    entries: 0.0,
                    global: vec![moves],
                };
                let on_index = k * (gi + mu * moves);
                let cost = w + h * (k + on_index);
                push(
                    format!("put {attr} through a global index K={k}"),
                    put,
                    cost,
                    &mut rng,
                );
            }
        }
        // Lookups: one indexlet and one match, and a range of a twentieth
        // of the axis over 1000 objects.
        for (indexlets, matches) in [(1.0, 1.0), (1.0 + (r - 1.0) / 20.0, 50.0)] {
            let cost = base + indexlets * c_req + l0 + matches * (m + gamma);
            let kind = Measured::Lookup { indexlets, matches };
            push(format!("lookup of {matches} matches"), kind, cost, &mut rng);
        }
        // Last, so that the others keep their noise: a key-only space with
        // one index, one entry per copy, where the subspace spaces' copies
        // have three.
        let insert = Measured::Insert {
            copies: 1.0,
            entries: 1.0,
            indexed: 1.0,
        };
        let hops = alpha_c + iota + delta_c;
        push("insert indexed".into(), insert, w_i + h * hops, &mut rng);
        if reference > 0.0 {
            // Two searches at the reference rows, then again beside three
            // times as many more.
            let rows = 1.0 + truth.stored_per_fold * 4.0_f64.ln();
            for (label, regions, results) in [("search a", 1.0, 20.0), ("search c", r, 20.0)] {
                let search = Measured::Search {
                    regions,
                    examined: results,
                    range: false,
                    range_entries: 0.0,
                    results,
                    index_reads: results,
                    handed_off: 0.0,
                };
                let cost = base
                    + regions * c_req
                    + results * (beta_r + gamma)
                    + eps * crate::model::regions_read(regions, results);
                for (step, kind, cost, stored_rows) in [
                    (label.to_string(), search.clone(), cost, reference),
                    (
                        format!("{label} beside more rows"),
                        Measured::Stored {
                            base: label.into(),
                            measured: Box::new(search),
                        },
                        cost * rows,
                        4.0 * reference,
                    ),
                ] {
                    out.push(Measurement {
                        step,
                        kind,
                        cost_s: cost * (1.0 + rng.next(noise)),
                        stored_rows,
                    });
                }
            }
        }
        out
    }

    fn near(name: &str, got: f64, want: f64, tolerance: f64) {
        let off = (got - want).abs() / want;
        assert!(
            off <= tolerance,
            "{name}: fitted {got}, true {want} ({:.1}% off, tolerance {:.0}%)",
            off * 100.0,
            tolerance * 100.0
        );
    }

    #[test]
    fn exact_measurements_give_back_the_constants() {
        let truth = Params {
            t_max_ops_per_s: 20_000.0,
            alpha: 2.2,
            index_write: 0.15,
            alpha_create: 1.3,
            request_s: 4e-5,
            beta_s: 2e-7,
            result_s: 1.5e-6,
            range_search_s: 3e-5,
            range_entry_s: 9e-7,
            get_s: Some(3e-5),
            write_s: 2e-5,
            insert_s: 6e-6,
            index_create: Some(0.05),
            indexed_create: 0.3,
            walk_first_s: 5e-6,
            unbounded_s: 1.2e-5,
            handoff_first_s: 1.7e-5,
            search_base_s: 4e-6,
            modify_s: 6e-6,
            modify_hop_s: 3.5e-6,
            larger_search_s: 2.5e-6,
            larger_entry_s: 6e-7,
            global_index_hop: 0.8,
            global_index_move: Some(0.3),
            lookup_base_s: 2.5e-5,
            lookup_match_s: Some(4e-5),
            handoff_mixed_s: 3e-5,
            writes_beside_s: 4.5e-5,
            stored_per_fold: 0.08,
            stored_reference_rows: 5000.0,
            ..Params::default()
        };
        let m = synthetic(&truth, 0.0);
        let fit = fit(&m, &Params::default()).unwrap();
        let p = &fit.params;
        near("T_max", p.t_max_ops_per_s, 20_000.0, 1e-9);
        near("alpha", p.alpha, 2.2, 1e-9);
        near("delta", p.index_write, 0.15, 1e-9);
        near("alpha_c", p.alpha_create, 1.3, 1e-9);
        near("c_req", p.request_s, 4e-5, 1e-9);
        near("beta", p.beta_s, 2e-7, 1e-9);
        near("gamma", p.result_s, 1.5e-6, 1e-9);
        near("rho", p.range_search_s, 3e-5, 1e-9);
        near("beta_r", p.range_entry_s, 9e-7, 1e-9);
        near("w", p.write_s, 2e-5, 1e-9);
        near("w_i", p.insert_s, 6e-6, 1e-9);
        near("g", p.get_cost_s(), 3e-5, 1e-9);
        near("delta_c", p.index_create(), 0.05, 1e-9);
        near("iota", p.indexed_create, 0.3, 1e-9);
        near("epsilon", p.walk_first_s, 5e-6, 1e-9);
        near("unbounded", p.unbounded_s, 1.2e-5, 1e-9);
        near("u1", p.handoff_first_s, 1.7e-5, 1e-9);
        near("s0", p.search_base_s, 4e-6, 1e-9);
        near("m", p.modify_s, 6e-6, 1e-9);
        near("m_h", p.modify_hop_s, 3.5e-6, 1e-9);
        near("a_L", p.larger_search_s, 2.5e-6, 1e-9);
        near("b_L", p.larger_entry_s, 6e-7, 1e-9);
        near("reference", p.larger_reference_objects, 4000.0, 1e-12);
        near("global hop", p.global_index_hop, 0.8, 1e-9);
        near("global move", p.global_move_hops(), 0.3, 1e-9);
        near("lookup base", p.lookup_base_s, 2.5e-5, 1e-9);
        near("lookup match", p.lookup_match_cost_s(), 4e-5, 1e-9);
        near("hand-off mixed", p.handoff_mixed_s, 3e-5, 1e-9);
        near("writes beside", p.writes_beside_s, 4.5e-5, 1e-9);
        near("kappa", p.stored_per_fold, 0.08, 1e-9);
        near("rows reference", p.stored_reference_rows, 5000.0, 1e-12);
        assert!(fit.kept.is_empty(), "{:?}", fit.kept);
        for q in &fit.quality {
            if q.op == "get" {
                // Both gets cost the same: SS_tot is 0, R² 1 when exact.
                assert!(q.rel_rms < 1e-9, "{q:?}");
            } else {
                assert!(q.r2 > 1.0 - 1e-9 && q.rel_rms < 1e-9, "{q:?}");
            }
        }
    }

    #[test]
    fn noisy_measurements_recover_the_constants_within_tolerance() {
        // ±3 % noise on every measurement.
        let truth = Params {
            t_max_ops_per_s: 12_000.0,
            alpha: 1.8,
            index_write: 0.3,
            alpha_create: 1.1,
            request_s: 8e-5,
            beta_s: 1e-7,
            result_s: 2e-6,
            range_search_s: 6e-5,
            range_entry_s: 1.5e-6,
            get_s: Some(5e-5),
            write_s: 4e-5,
            insert_s: 1e-5,
            index_create: Some(0.2),
            indexed_create: 0.4,
            walk_first_s: 2e-5,
            unbounded_s: 3e-5,
            handoff_first_s: 2.5e-5,
            search_base_s: 2e-5,
            modify_s: 2e-5,
            modify_hop_s: 2e-5,
            larger_search_s: 1e-5,
            larger_entry_s: 2e-6,
            global_index_hop: 1.4,
            global_index_move: Some(0.6),
            lookup_base_s: 3e-5,
            lookup_match_s: Some(6e-5),
            ..Params::default()
        };
        let m = synthetic(&truth, 0.03);
        let fit = fit(&m, &Params::default()).unwrap();
        let p = &fit.params;
        near("T_max", p.t_max_ops_per_s, 12_000.0, 0.05);
        near("alpha", p.alpha, 1.8, 0.10);
        near("alpha_c", p.alpha_create, 1.1, 0.10);
        // ι is what is left of the indexed inserts once α_c and δ_c are
        // priced: noise moves it most.
        near("iota", p.indexed_create, 0.4, 0.75);
        near("c_req", p.request_s, 8e-5, 0.10);
        // β is pinned by the scans of d, which pay u in every region too:
        // noise on them moves β more than it did before u.
        near("beta", p.beta_s, 1e-7, 0.2);
        // δ and γ are small beside what they are added to, so noise
        // moves them most.
        near("delta", p.index_write, 0.3, 0.5);
        near("gamma", p.result_s, 2e-6, 0.5);
        // β_r stands beside γ in every range step: fitted together, each
        // alone moves with γ's error.
        near("rho", p.range_search_s, 6e-5, 0.5);
        near("beta_r + gamma", p.range_entry_s + p.result_s, 3.5e-6, 0.1);
        near("g", p.get_cost_s(), 5e-5, 0.05);
        // The request costs sit beside several hops: noise moves them
        // more than the hop itself.
        near("w", p.write_s, 4e-5, 0.5);
        near("unbounded", p.unbounded_s, 3e-5, 0.5);
        near("u1", p.handoff_first_s, 2.5e-5, 0.5);
        near("s0", p.search_base_s, 2e-5, 0.5);
        // m is what is left of a modify once its get and put are priced,
        // each with its own noise.
        near("m", p.modify_s, 2e-5, 0.5);
        near("m_h", p.modify_hop_s, 2e-5, 0.5);
        // What a larger space adds is a small part of its searches.
        near("a_L", p.larger_search_s, 1e-5, 0.75);
        near("b_L", p.larger_entry_s, 2e-6, 0.75);
        // The hop on an indexlet is a fraction of its put, the match of
        // its lookup: noise on the rest moves them.
        near("global hop", p.global_index_hop, 1.4, 0.25);
        near("lookup match", p.lookup_match_cost_s(), 6e-5, 0.25);
        // μ and l₀ are what is left of a few steps once the rest is
        // priced: noise moves them most.
        near("global move", p.global_move_hops(), 0.6, 0.75);
        near("lookup base", p.lookup_base_s, 3e-5, 0.75);
        for q in &fit.quality {
            assert!(q.rel_rms < 0.06, "{q:?}");
        }
        let search = fit.quality.iter().find(|q| q.op == "search").unwrap();
        assert!(search.r2 > 0.99, "{search:?}");
    }

    /// A put of one hop (a key-only space, f = 0) measured at 100 µs
    /// beside `stored_rows` rows.
    fn one_hop_put(stored_rows: f64) -> Measurement {
        Measurement {
            step: "put".into(),
            kind: Measured::Put {
                copies: 1.0,
                unchanged: 0.0,
                moved: vec![],
                entries: 0.0,
                global: vec![],
            },
            cost_s: 1e-4,
            stored_rows,
        }
    }

    /// A search meeting eight regions that reads and returns nothing.
    fn eight_regions() -> Measured {
        Measured::Search {
            regions: 8.0,
            examined: 0.0,
            range: false,
            range_entries: 0.0,
            results: 0.0,
            index_reads: 0.0,
            handed_off: 0.0,
        }
    }

    #[test]
    fn what_the_measurements_do_not_determine_keeps_its_default() {
        let defaults = Params::default();
        let m = vec![
            one_hop_put(0.0),
            Measurement {
                step: "search".into(),
                kind: eight_regions(),
                cost_s: 8e-4,
                stored_rows: 0.0,
            },
        ];
        let fit = fit(&m, &defaults).unwrap();
        near("T_max", fit.params.t_max_ops_per_s, 10_000.0, 1e-9);
        near("c_req", fit.params.request_s, 1e-4, 1e-9);
        assert_eq!(fit.params.alpha, defaults.alpha);
        assert_eq!(fit.params.beta_s, defaults.beta_s);
        assert_eq!(fit.params.range_entry_s, defaults.range_entry_s);
        assert_eq!((fit.params.write_s, fit.params.walk_first_s), (0.0, 0.0));
        assert_eq!(fit.params.get_s, None);
        assert_eq!(fit.params.global_index_hop, defaults.global_index_hop);
        assert_eq!(fit.params.global_index_move, None);
        assert_eq!(fit.params.lookup_match_s, None);
        // write_s, alpha, index_write, the global index pair,
        // alpha_create, get_s; beta_s, result_s, the range pair,
        // walk_first_s, unbounded_s, handoff_first_s, search_base_s, the
        // modify pair, the lookup pair, handoff_mixed_s, writes_beside_s,
        // the larger pair, stored_per_fold.
        assert_eq!(fit.kept.len(), 19, "{:?}", fit.kept);
        assert_eq!(fit.params.stored_per_fold, defaults.stored_per_fold);
        assert_eq!(fit.params.handoff_first_s, defaults.handoff_first_s);
        assert_eq!(fit.params.larger_entry_s, defaults.larger_entry_s);
        assert_eq!(fit.params.handoff_mixed_s, defaults.handoff_mixed_s);
        assert_eq!(fit.params.writes_beside_s, defaults.writes_beside_s);
        assert_eq!(
            super::fit(&m[1..], &defaults),
            Err(FitError::Missing("put"))
        );
        assert_eq!(
            super::fit(&m[..1], &defaults),
            Err(FitError::Missing("search"))
        );
    }

    /// A step measured faster beside more rows fits κ = 0, not below; one
    /// whose base is missing fits nothing; and a step's fitted cost is
    /// priced at the rows it ran beside.
    #[test]
    fn rows_stored_fit_from_steps_measured_again() {
        let put = one_hop_put(1000.0);
        let search = eight_regions();
        let alone = Measurement {
            step: "search".into(),
            kind: search.clone(),
            cost_s: 8e-4,
            stored_rows: 2000.0,
        };
        let again = |cost_s: f64, base: &str| Measurement {
            step: "search beside".into(),
            kind: Measured::Stored {
                base: base.into(),
                measured: Box::new(search.clone()),
            },
            cost_s,
            stored_rows: 2000.0 * std::f64::consts::E,
        };
        // 10 % dearer over one e-fold: κ = 0.1, R₀ the base's rows, and
        // the put, at half of them, fitted as if it cost 1 − 0.1·ln 2 as
        // much at the reference.
        let fitted = fit(
            &[put.clone(), alone.clone(), again(8.8e-4, "search")],
            &Params::default(),
        )
        .unwrap();
        near("kappa", fitted.params.stored_per_fold, 0.1, 1e-9);
        assert_eq!(fitted.params.stored_reference_rows, 2000.0);
        let hop = 1e-4 / (1.0 - 0.1 * 2.0_f64.ln());
        near("T_max", fitted.params.t_max_ops_per_s, 1.0 / hop, 1e-9);
        let point = |step: &str| {
            let p = fitted.points.iter().find(|p| p.step == step).unwrap();
            p.fitted_s / p.measured_s
        };
        near("put point", point("put"), 1.0, 1e-9);
        near("stored point", point("search beside"), 1.0, 1e-9);
        assert!(fitted.quality.iter().any(|q| q.op == "stored"));
        // Faster beside more rows: 0.
        let fitted = fit(
            &[put.clone(), alone.clone(), again(7e-4, "search")],
            &Params::default(),
        )
        .unwrap();
        assert_eq!(fitted.params.stored_per_fold, 0.0);
        // No base step by that name: nothing fitted, the default kept.
        let fitted = fit(&[put, alone, again(9e-4, "other")], &Params::default()).unwrap();
        assert_eq!(fitted.params.stored_per_fold, 0.0);
        assert_eq!(fitted.params.stored_reference_rows, 0.0);
        assert!(fitted.kept.iter().any(|k| k.starts_with("stored_per_fold")));
    }

    #[test]
    fn an_offset_fit_clamps_at_zero_and_knows_no_measurement_from_no_cost() {
        // Costs 2 and 4 above bases of 1 and 2, features 1 and 2: c = 2.
        let rows = vec![(vec![1.0], 3.0, 1.0), (vec![2.0], 6.0, 2.0)];
        let c = offset_nnls(&rows, 1).expect("rows with features");
        assert!((c[0] - 2.0).abs() < 1e-12, "{c:?}");
        // Measured at or below what is already priced: zero, not "nothing
        // measured".
        let below = vec![(vec![1.0], 0.9, 1.0), (vec![1.0], 1.8, 2.0)];
        assert_eq!(offset_nnls(&below, 1), Some(vec![0.0]));
        // No row whose feature is positive, or no row: nothing measured.
        assert_eq!(offset_nnls(&[(vec![0.0], 1.0, 1.0)], 1), None);
        assert_eq!(offset_nnls(&[], 2), None);
    }

    #[test]
    fn r_squared_and_relative_rms_by_hand() {
        // Measured 1, 2, 3 (mean 2, SS_tot 2); fitted 1, 2, 4 (SS_res 1).
        let pairs = [(1.0, 1.0), (2.0, 2.0), (3.0, 4.0)];
        assert!((r_squared(&pairs) - 0.5).abs() < 1e-12);
        // Relative errors 0, 0, 1/3: √((1/9) / 3).
        assert!((relative_rms(&pairs) - (1.0f64 / 27.0).sqrt()).abs() < 1e-12);
    }
}
