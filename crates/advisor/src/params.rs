//! The cost model's parameters: hardware constants and storage sizes.
//!
//! The three constants of the thesis (β, T_max, α) default to the values
//! it measured on its own cluster; every other constant is Tessera's and
//! defaults to a guess. `tessera calibrate` fits β, T_max, α, α_c, c_req,
//! γ, δ, ρ, β_r, the per-request costs and the global index's hop and
//! per-match lookup cost on a running cluster ([`crate::calibrate`]) and stores them in
//! its configuration ([`AdvisorCalibration`]); [`Params::calibrated`]
//! applies them. Without them predictions rank layouts by the shape of
//! their costs, and their absolute ops/s are only indicative.

use serde::{Deserialize, Serialize};
use tessera_types::calibration::{ADVISOR_CALIBRATION_VERSION, CALIBRATIONS_MAX};
use tessera_types::{AdvisorCalibration, Configuration, FitQuality};

/// The cost model's parameters. Times are seconds of cluster work per
/// operation (the thesis's convention: its β and T_max describe the whole
/// cluster, not one server).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// β: seconds of cluster work per object a search examines by a scan
    /// (thesis Eq. 4.2; it measured 3.31·10⁻⁷). Entries read through an
    /// index cost β_r (`range_entry_s`).
    pub beta_s: f64,
    /// T_max: ops/s of a chain of length one, i.e. a put without the get
    /// in a space with only the key subspace (thesis Eq. 4.4; it measured
    /// 98,000). One overwrite hop costs `1 / t_max_ops_per_s` seconds.
    pub t_max_ops_per_s: f64,
    /// α: the cost of a delete or create hop (an object moving region)
    /// relative to an overwrite hop (thesis Eq. 4.5; it fitted 2.66).
    /// Since calibration version 12 without the index entries the move
    /// carries, which `index_write` prices (`model::Context::entries_rewritten`).
    pub alpha: f64,
    /// α_c: the cost of a create hop of an insert relative to an overwrite
    /// hop (RESEARCH.md A.4 #4). Default 1.5, the ratio the thesis's side
    /// experiment found between a write and an overwrite.
    pub alpha_create: f64,
    /// c_req: seconds of cluster work per region (or indexlet) a search
    /// contacts, whatever it reads there (A.4 #3). Default: one overwrite
    /// hop, `1 / t_max` (a request to a region costs about a get).
    pub request_s: f64,
    /// γ: seconds of cluster work per object a search returns (A.4 #4).
    /// Default 2.2·10⁻⁶, from the thesis's remark that 50 results made a
    /// search on ⟨city⟩ (1,000 objects examined at β) about a third slower.
    pub result_s: f64,
    /// δ: the cost of rewriting one local index entry (a removal and a
    /// put), relative to an overwrite hop, paid for every entry a copy's
    /// region rewrites: a changed attribute's where the object stays,
    /// every entry the region holds where it moves (entries share the
    /// object's batch). Default 0.1, a guess.
    pub index_write: f64,
    /// ρ: seconds of cluster work per search whose regions walk a local
    /// index over a range, on top of c_req per region (a range walk opens
    /// an ordered scan of the index where equality reads one key's
    /// entries). Default 0, which prices a range walk as an equality one.
    pub range_search_s: f64,
    /// β_r: seconds of cluster work per index entry a walk reads, over a
    /// range or by equality: the object it names read by key, whether or
    /// not it is then returned (β is per record a scan steps over, in
    /// order). The thesis had one β for both; pricing equality walks at β
    /// priced a walk whose entries mostly fail a second check (`stars eq,
    /// price range`) at about half its cost. Default: the thesis's β.
    pub range_entry_s: f64,
    /// Seconds of cluster work per get. `None` (the default, and before
    /// calibration version 3): one overwrite hop, as the thesis charges
    /// it. A get is one round trip to the point leader and no chain, so
    /// it measures cheaper than an overwrite hop.
    pub get_s: Option<f64>,
    /// Seconds per put request on top of its hops (the client's request
    /// and reply, the point leader's read of the old record): what a
    /// chain of any length pays once. Default 0, the thesis's model.
    pub write_s: f64,
    /// Seconds per insert request on top of its creates. Default 0.
    pub insert_s: f64,
    /// The cost of creating one local index entry on an insert, relative
    /// to an overwrite hop. `None` (default): `index_write`. An insert
    /// only adds entries where an update also removes the old ones, so
    /// it measures cheaper.
    pub index_create: Option<f64>,
    /// What an insert adds per copy it creates in a region that indexes at
    /// least one attribute, whatever its entries, relative to an overwrite
    /// hop: a copy with one entry measured ~15 µs where α_c and δ_c
    /// fitted on copies of four entries and of none gave ~12.7
    /// (`docs/design/advisor.md`, "An insert into an indexed region";
    /// calibration version 9). Default 0.
    pub indexed_create: f64,
    /// Seconds per region in which a search reads at least one object
    /// through a local index, whatever their count there (a region's
    /// first read through its index costs more than the next ones;
    /// `model::regions_read`). Calibration version 11 fits it so;
    /// versions 3–10 fitted it once per search, and their value is priced
    /// per region as well (recalibrate). Default 0.
    pub walk_first_s: f64,
    /// Seconds per region contacted whose page is not bounded by what it
    /// returns, on top of c_req: a scan, or an index walk with a check
    /// its index does not answer (two attributes checked, say). A daemon
    /// answers a bounded page at once, on the connection's task, as it
    /// does a get; any other page may read a whole region, so it goes to
    /// a blocking thread and back (`daemon/src/search.rs`,
    /// `search_is_bounded`), and measured about 12 µs dearer. Default 0.
    pub unbounded_s: f64,
    /// u₁: seconds a search pays once when it hands off at least one
    /// page, on top of `unbounded_s` per page handed off: a scan of one
    /// region measured 15–18 µs above a sixteenth of a scan of sixteen
    /// (`docs/design/advisor.md`, "A lone page handed off"; calibration
    /// version 9). Default 0.
    pub handoff_first_s: f64,
    /// Seconds per search whatever the regions it contacts: the client's
    /// plan, its page streams and their merge. Without it c_req absorbs
    /// it, and a search of one region measured a third above its fit
    /// while one of sixteen measured below. Default 0.
    pub search_base_s: f64,
    /// Seconds per modify on top of its get and its put: a
    /// read-modify-write holds its operation across two round trips,
    /// and measured about 5 µs dearer than a get and a put measured
    /// apart. Default 0.
    pub modify_s: f64,
    /// The cost of one hop on a global index's indexlet replica, relative
    /// to an overwrite hop: every write's chain passes each global index
    /// (an indexlet stores the object's projection, the key and the
    /// indexed value, with its ordered entry). Default 1; `tessera
    /// calibrate` fits it (version 5).
    pub global_index_hop: f64,
    /// What a write adds per indexlet replica when it moves the object to
    /// another indexlet (a removal from the old one and a put in the
    /// new), relative to an overwrite hop. `None` (the default): the
    /// removal and the put at α each, as a subspace's move,
    /// `global_index_hop · (2α − 1)`. A projection is small, so
    /// calibration measures much less.
    pub global_index_move: Option<f64>,
    /// Seconds per lookup through a global index on top of what a search
    /// pays (s₀, c_req per indexlet met): its second round trip, the
    /// gets of its matches. Default 0.
    pub lookup_base_s: f64,
    /// Seconds per match a lookup through a global index reads: its entry
    /// and the get of its object by the client (the exact filter).
    /// `None` (the default, and before calibration version 5): β plus a
    /// get.
    pub lookup_match_s: Option<f64>,
    /// Seconds a search whose pages go to a blocking thread (`unbounded_s`)
    /// adds when other work shares the daemons, at none of the mix's time
    /// in such searches; at a share s of it, (1 − s) of this. Alone, a
    /// stream of hand-offs finds the blocking threads awake; among gets,
    /// modifies and pages answered at once, each wakes one (measured about
    /// 30 µs; calibration version 6). Default 0.
    pub handoff_mixed_s: f64,
    /// Seconds a search adds per write interleaved with it: a mix of a
    /// share p_s of searches and p_w of writes (modifies, inserts) pays
    /// x·p_s·p_w per operation (`model::writes_beside_s`). On a process
    /// that has served much more than it holds, searches and modifies
    /// measured 17 % below their parts together while each alone kept
    /// its speed (`docs/design/advisor.md`, "Searches beside modifies on
    /// an old process"; calibration version 7). Default 0.
    pub writes_beside_s: f64,
    /// Seconds a modify adds per hop of its put's chain beyond the first,
    /// beyond its get and its put measured apart: modifies of d measured
    /// 2–6 µs above those on a chain of two hops, 10–16 µs on chains of
    /// four and eight, against 3–4 µs below on a chain of one
    /// (`docs/design/advisor.md`, "A modify's put on a long chain";
    /// calibration version 8). Default 0.
    pub modify_hop_s: f64,
    /// Seconds a search reading through a local index adds per e-fold of
    /// its space's objects beyond `larger_reference_objects`
    /// (`model::larger_folds`; calibration version 8). Default 0.
    pub larger_search_s: f64,
    /// Seconds each entry read through a local index adds per e-fold of
    /// its space's objects beyond `larger_reference_objects`: on a space
    /// of 70,000 objects a walk read each entry and its object about
    /// 0.6 µs dearer than on one of 4,000 (`docs/design/advisor.md`,
    /// "Walks over a larger space"; calibration version 8). Default 0.
    pub larger_entry_s: f64,
    /// The objects of the space the calibration's other searches ran on
    /// (0: none; version 8).
    pub larger_reference_objects: f64,
    /// κ: the share by which every operation's cost grows per e-fold of
    /// the rows a daemon stores beyond `stored_reference_rows`, and falls
    /// below it (`model::stored_factor`). Every part of every space keeps
    /// its rows in one objects tree and one index tree per daemon, so a
    /// lookup walks a larger store however many parts it reads: two
    /// subspaces no operation read measured a read-only mix 5.9 % slower
    /// (`docs/design/advisor.md`, "Rows nothing reads"; calibration
    /// version 13). Default 0.
    pub stored_per_fold: f64,
    /// R₀: the rows per daemon at which the calibration fitted every
    /// other parameter (0: none; version 13).
    pub stored_reference_rows: f64,
    /// Bytes one stored copy of an object takes when the workload does not
    /// say (`object_bytes`). Default 256.
    pub object_bytes: f64,
    /// Bytes of one local index entry (slot, coordinate, key). Default 48.
    pub index_entry_bytes: f64,
    /// Bytes of one global index entry (sort key, key coordinate, key
    /// bytes; RESEARCH.md B.4 #2). Default 64.
    pub global_entry_bytes: f64,
    /// Daemons in the cluster, over which the data spreads evenly.
    /// Default 8, the thesis's cluster.
    pub daemons: u32,
    /// Bytes per second at which a lost daemon's data is rebuilt on the
    /// others (state transfer). Default 50 MB/s, a guess.
    pub rebuild_bytes_per_s: f64,
    /// The fraction of an ordered axis a `range` (or a `regex`) matches
    /// when the workload does not say (`range_fraction`). Default 0.01.
    pub range_fraction: f64,
}

impl Default for Params {
    fn default() -> Params {
        let t_max = 98_000.0;
        Params {
            beta_s: 3.31e-7,
            t_max_ops_per_s: t_max,
            alpha: 2.66,
            alpha_create: 1.5,
            request_s: 1.0 / t_max,
            result_s: 2.2e-6,
            index_write: 0.1,
            range_search_s: 0.0,
            range_entry_s: 3.31e-7,
            get_s: None,
            write_s: 0.0,
            insert_s: 0.0,
            index_create: None,
            indexed_create: 0.0,
            walk_first_s: 0.0,
            unbounded_s: 0.0,
            handoff_first_s: 0.0,
            search_base_s: 0.0,
            modify_s: 0.0,
            global_index_hop: 1.0,
            global_index_move: None,
            lookup_base_s: 0.0,
            lookup_match_s: None,
            handoff_mixed_s: 0.0,
            writes_beside_s: 0.0,
            modify_hop_s: 0.0,
            larger_search_s: 0.0,
            larger_entry_s: 0.0,
            larger_reference_objects: 0.0,
            stored_per_fold: 0.0,
            stored_reference_rows: 0.0,
            object_bytes: 256.0,
            index_entry_bytes: 48.0,
            global_entry_bytes: 64.0,
            daemons: 8,
            rebuild_bytes_per_s: 50e6,
            range_fraction: 0.01,
        }
    }
}

impl Params {
    /// Seconds of one overwrite hop, `1 / T_max`.
    pub fn hop_s(&self) -> f64 {
        1.0 / self.t_max_ops_per_s
    }

    /// Seconds of one get: `get_s`, else one overwrite hop.
    pub fn get_cost_s(&self) -> f64 {
        self.get_s.unwrap_or_else(|| self.hop_s())
    }

    /// What a move to another indexlet adds per replica, in overwrite
    /// hops: `global_index_move`, else `global_index_hop · (2α − 1)`.
    pub fn global_move_hops(&self) -> f64 {
        self.global_index_move
            .unwrap_or(self.global_index_hop * (2.0 * self.alpha - 1.0))
    }

    /// Seconds per match of a lookup through a global index:
    /// `lookup_match_s`, else β plus a get.
    pub fn lookup_match_cost_s(&self) -> f64 {
        self.lookup_match_s
            .unwrap_or_else(|| self.beta_s + self.get_cost_s())
    }

    /// One local index entry an insert creates, relative to an overwrite
    /// hop: `index_create`, else `index_write`.
    pub fn index_create(&self) -> f64 {
        self.index_create.unwrap_or(self.index_write)
    }

    /// These parameters for a cluster of `daemons` daemons (RESEARCH.md
    /// A.4 #6): a cost is seconds of *cluster* work, which `self.daemons`
    /// daemons gave, so each is `self.daemons / daemons` as long on
    /// `daemons` of the same servers, and T_max grows by their ratio.
    /// Ratios (α, α_c, δ, the global index's hops), sizes and the rebuild
    /// bandwidth (one transfer's) do not change; `daemons` becomes the
    /// cluster the recovery time and the placement of a hybrid's regions
    /// are judged on. So every prediction's ops/s scales by
    /// `daemons / self.daemons`, but for what the rows a daemon stores
    /// cost (κ and R₀ stay; each daemon stores fewer rows on more
    /// daemons). 0 is taken as 1.
    pub fn on_daemons(&self, daemons: u32) -> Params {
        let daemons = daemons.max(1);
        let scale = f64::from(self.daemons.max(1)) / f64::from(daemons);
        let time = |s: f64| s * scale;
        // Every field named: one added later must be placed on either side.
        let Params {
            beta_s,
            t_max_ops_per_s,
            alpha,
            alpha_create,
            request_s,
            result_s,
            index_write,
            range_search_s,
            range_entry_s,
            get_s,
            write_s,
            insert_s,
            index_create,
            indexed_create,
            walk_first_s,
            unbounded_s,
            handoff_first_s,
            search_base_s,
            modify_s,
            global_index_hop,
            global_index_move,
            lookup_base_s,
            lookup_match_s,
            handoff_mixed_s,
            writes_beside_s,
            modify_hop_s,
            larger_search_s,
            larger_entry_s,
            larger_reference_objects,
            stored_per_fold,
            stored_reference_rows,
            object_bytes,
            index_entry_bytes,
            global_entry_bytes,
            daemons: _,
            rebuild_bytes_per_s,
            range_fraction,
        } = self.clone();
        Params {
            // Seconds of cluster work, and the rate they make.
            beta_s: time(beta_s),
            t_max_ops_per_s: t_max_ops_per_s / scale,
            request_s: time(request_s),
            result_s: time(result_s),
            range_search_s: time(range_search_s),
            range_entry_s: time(range_entry_s),
            get_s: get_s.map(time),
            write_s: time(write_s),
            insert_s: time(insert_s),
            walk_first_s: time(walk_first_s),
            unbounded_s: time(unbounded_s),
            handoff_first_s: time(handoff_first_s),
            search_base_s: time(search_base_s),
            modify_s: time(modify_s),
            lookup_base_s: time(lookup_base_s),
            lookup_match_s: lookup_match_s.map(time),
            handoff_mixed_s: time(handoff_mixed_s),
            writes_beside_s: time(writes_beside_s),
            modify_hop_s: time(modify_hop_s),
            larger_search_s: time(larger_search_s),
            larger_entry_s: time(larger_entry_s),
            // A count of objects per space, as the workload's; rows per
            // daemon, which the model counts on the daemons it prices.
            larger_reference_objects,
            stored_reference_rows,
            // Ratios of hops, a share per e-fold, sizes, one transfer's
            // bandwidth, fractions.
            stored_per_fold,
            alpha,
            alpha_create,
            index_write,
            index_create,
            indexed_create,
            global_index_hop,
            global_index_move,
            object_bytes,
            index_entry_bytes,
            global_entry_bytes,
            rebuild_bytes_per_s,
            range_fraction,
            daemons,
        }
    }

    /// These parameters for the daemons `config` has available; as they
    /// are when it has none.
    pub fn on_cluster(&self, config: &Configuration) -> Params {
        match u32::try_from(config.available_daemons()) {
            Ok(n) if n > 0 => self.on_daemons(n),
            _ => self.clone(),
        }
    }

    /// These parameters with the ones a calibration measured (and its
    /// daemon count) replacing them; a version-1 calibration measured no
    /// range walk, so ρ and β_r keep their values here.
    pub fn calibrated(&self, c: &AdvisorCalibration) -> Params {
        Params {
            beta_s: c.beta_s,
            t_max_ops_per_s: c.t_max_ops_per_s,
            alpha: c.alpha,
            alpha_create: c.alpha_create,
            request_s: c.request_s,
            result_s: c.result_s,
            index_write: c.index_write,
            range_search_s: c.range_search_s.unwrap_or(self.range_search_s),
            range_entry_s: c.range_entry_s.unwrap_or(self.range_entry_s),
            get_s: c.get_s.or(self.get_s),
            write_s: c.write_s.unwrap_or(self.write_s),
            insert_s: c.insert_s.unwrap_or(self.insert_s),
            index_create: c.index_create.or(self.index_create),
            indexed_create: c.indexed_create.unwrap_or(self.indexed_create),
            walk_first_s: c.walk_first_s.unwrap_or(self.walk_first_s),
            unbounded_s: c.unbounded_s.unwrap_or(self.unbounded_s),
            handoff_first_s: c.handoff_first_s.unwrap_or(self.handoff_first_s),
            search_base_s: c.search_base_s.unwrap_or(self.search_base_s),
            modify_s: c.modify_s.unwrap_or(self.modify_s),
            global_index_hop: c.global_index_hop.unwrap_or(self.global_index_hop),
            global_index_move: c.global_index_move.or(self.global_index_move),
            lookup_base_s: c.lookup_base_s.unwrap_or(self.lookup_base_s),
            lookup_match_s: c.lookup_match_s.or(self.lookup_match_s),
            handoff_mixed_s: c.handoff_mixed_s.unwrap_or(self.handoff_mixed_s),
            writes_beside_s: c.writes_beside_s.unwrap_or(self.writes_beside_s),
            modify_hop_s: c.modify_hop_s.unwrap_or(self.modify_hop_s),
            larger_search_s: c.larger_search_s.unwrap_or(self.larger_search_s),
            larger_entry_s: c.larger_entry_s.unwrap_or(self.larger_entry_s),
            larger_reference_objects: c
                .larger_reference_objects
                .unwrap_or(self.larger_reference_objects),
            stored_per_fold: c.stored_per_fold.unwrap_or(self.stored_per_fold),
            stored_reference_rows: c
                .stored_reference_rows
                .unwrap_or(self.stored_reference_rows),
            daemons: c.daemons,
            ..self.clone()
        }
    }

    /// These parameters, fitted by one new calibration, averaged with
    /// `earlier`, the average of `calibrations` earlier calibrations of the
    /// same cluster, each calibration weighing alike; past
    /// [`CALIBRATIONS_MAX`] − 1 earlier ones, `earlier` weighs that many,
    /// so each new calibration replaces a share 1 / [`CALIBRATIONS_MAX`]
    /// of the average and the oldest fade. One calibration's parameters
    /// wander with the minute it ran in (`docs/design/advisor.md`,
    /// "Calibrations that add up").
    ///
    /// The average is over costs in seconds, the form the fit is linear
    /// in: seconds as they are, the hop as 1 / T_max, and a ratio to the
    /// hop (α, α_c, δ, δ_c, ι, g, μ) as its cost, ratio · hop, divided
    /// back by the averaged hop. A parameter left to a derived value
    /// (a get at one hop, say) is averaged as that value. Sizes, counts,
    /// fractions and bandwidths are not fitted and are this one's.
    pub fn pooled(&self, earlier: &Params, calibrations: u32) -> Params {
        let w = f64::from(calibrations.clamp(1, CALIBRATIONS_MAX - 1));
        let mean = |new: f64, old: f64| (new + w * old) / (w + 1.0);
        let (hop, old_hop) = (self.hop_s(), earlier.hop_s());
        let pooled_hop = mean(hop, old_hop);
        let ratio = |new: f64, old: f64| mean(new * hop, old * old_hop) / pooled_hop;
        let e = earlier;
        // Every field named: one added later must be placed in a group.
        let Params {
            beta_s,
            t_max_ops_per_s: _,
            alpha,
            alpha_create,
            request_s,
            result_s,
            index_write,
            range_search_s,
            range_entry_s,
            get_s: _,
            write_s,
            insert_s,
            index_create: _,
            indexed_create,
            walk_first_s,
            unbounded_s,
            handoff_first_s,
            search_base_s,
            modify_s,
            global_index_hop,
            global_index_move: _,
            lookup_base_s,
            lookup_match_s: _,
            handoff_mixed_s,
            writes_beside_s,
            modify_hop_s,
            larger_search_s,
            larger_entry_s,
            larger_reference_objects,
            stored_per_fold,
            stored_reference_rows,
            object_bytes,
            index_entry_bytes,
            global_entry_bytes,
            daemons,
            rebuild_bytes_per_s,
            range_fraction,
        } = self.clone();
        Params {
            // Seconds.
            beta_s: mean(beta_s, e.beta_s),
            request_s: mean(request_s, e.request_s),
            result_s: mean(result_s, e.result_s),
            range_search_s: mean(range_search_s, e.range_search_s),
            range_entry_s: mean(range_entry_s, e.range_entry_s),
            get_s: Some(mean(self.get_cost_s(), e.get_cost_s())),
            write_s: mean(write_s, e.write_s),
            insert_s: mean(insert_s, e.insert_s),
            walk_first_s: mean(walk_first_s, e.walk_first_s),
            unbounded_s: mean(unbounded_s, e.unbounded_s),
            handoff_first_s: mean(handoff_first_s, e.handoff_first_s),
            search_base_s: mean(search_base_s, e.search_base_s),
            modify_s: mean(modify_s, e.modify_s),
            lookup_base_s: mean(lookup_base_s, e.lookup_base_s),
            lookup_match_s: Some(mean(self.lookup_match_cost_s(), e.lookup_match_cost_s())),
            handoff_mixed_s: mean(handoff_mixed_s, e.handoff_mixed_s),
            writes_beside_s: mean(writes_beside_s, e.writes_beside_s),
            modify_hop_s: mean(modify_hop_s, e.modify_hop_s),
            larger_search_s: mean(larger_search_s, e.larger_search_s),
            larger_entry_s: mean(larger_entry_s, e.larger_entry_s),
            // The hop, and what is priced in hops.
            t_max_ops_per_s: 1.0 / pooled_hop,
            alpha: ratio(alpha, e.alpha),
            alpha_create: ratio(alpha_create, e.alpha_create),
            index_write: ratio(index_write, e.index_write),
            index_create: Some(ratio(self.index_create(), e.index_create())),
            indexed_create: ratio(indexed_create, e.indexed_create),
            global_index_hop: ratio(global_index_hop, e.global_index_hop),
            global_index_move: Some(ratio(self.global_move_hops(), e.global_move_hops())),
            // A share per e-fold, as it is.
            stored_per_fold: mean(stored_per_fold, e.stored_per_fold),
            // Not fitted.
            larger_reference_objects,
            stored_reference_rows,
            object_bytes,
            index_entry_bytes,
            global_entry_bytes,
            daemons,
            rebuild_bytes_per_s,
            range_fraction,
        }
    }

    /// The payload the configuration stores for these parameters,
    /// measured on `daemons` daemons from epoch `epoch`, the average of
    /// `calibrations` calibrations ([`Params::pooled`]; 1 to
    /// [`CALIBRATIONS_MAX`]).
    pub fn calibration(
        &self,
        daemons: u32,
        epoch: u64,
        calibrations: u32,
        fits: Vec<FitQuality>,
    ) -> AdvisorCalibration {
        AdvisorCalibration {
            version: ADVISOR_CALIBRATION_VERSION,
            beta_s: self.beta_s,
            t_max_ops_per_s: self.t_max_ops_per_s,
            alpha: self.alpha,
            alpha_create: self.alpha_create,
            request_s: self.request_s,
            result_s: self.result_s,
            index_write: self.index_write,
            range_search_s: Some(self.range_search_s),
            range_entry_s: Some(self.range_entry_s),
            get_s: Some(self.get_cost_s()),
            write_s: Some(self.write_s),
            insert_s: Some(self.insert_s),
            index_create: Some(self.index_create()),
            walk_first_s: Some(self.walk_first_s),
            unbounded_s: Some(self.unbounded_s),
            handoff_first_s: Some(self.handoff_first_s),
            indexed_create: Some(self.indexed_create),
            search_base_s: Some(self.search_base_s),
            modify_s: Some(self.modify_s),
            global_index_hop: Some(self.global_index_hop),
            global_index_move: Some(self.global_move_hops()),
            lookup_base_s: Some(self.lookup_base_s),
            lookup_match_s: Some(self.lookup_match_cost_s()),
            handoff_mixed_s: Some(self.handoff_mixed_s),
            writes_beside_s: Some(self.writes_beside_s),
            modify_hop_s: Some(self.modify_hop_s),
            larger_search_s: Some(self.larger_search_s),
            larger_entry_s: Some(self.larger_entry_s),
            larger_reference_objects: Some(self.larger_reference_objects),
            stored_per_fold: Some(self.stored_per_fold),
            stored_reference_rows: Some(self.stored_reference_rows),
            calibrations: Some(calibrations),
            daemons,
            epoch,
            fits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_round_trips_through_the_stored_payload() {
        let measured = Params {
            beta_s: 1e-7,
            t_max_ops_per_s: 15_000.0,
            alpha: 1.9,
            alpha_create: 1.2,
            request_s: 7e-5,
            result_s: 3e-6,
            index_write: 0.25,
            range_search_s: 3e-5,
            range_entry_s: 9e-7,
            get_s: Some(8e-6),
            write_s: 6e-6,
            insert_s: 2e-6,
            index_create: Some(0.07),
            indexed_create: 0.35,
            walk_first_s: 4e-6,
            unbounded_s: 1.1e-5,
            handoff_first_s: 1.6e-5,
            search_base_s: 3e-6,
            modify_s: 5e-6,
            global_index_hop: 0.7,
            global_index_move: Some(0.2),
            lookup_base_s: 1.5e-5,
            lookup_match_s: Some(2e-5),
            handoff_mixed_s: 2.8e-5,
            writes_beside_s: 4.1e-5,
            modify_hop_s: 2.5e-6,
            larger_search_s: 3e-6,
            larger_entry_s: 4e-7,
            larger_reference_objects: 4000.0,
            stored_per_fold: 0.06,
            stored_reference_rows: 5333.0,
            ..Params::default()
        };
        let stored = measured.calibration(3, 9, 1, vec![]);
        assert_eq!(stored.validate(), Ok(()));
        let back = Params::default().calibrated(&stored);
        assert_eq!(
            back,
            Params {
                daemons: 3,
                ..measured
            }
        );
    }

    /// Two calibrations of the same cluster: one with a hop of 100 µs
    /// (T_max 10,000) and α 1, one with a hop of 50 µs and α 2.
    fn two_calibrations() -> (Params, Params) {
        let first = Params {
            t_max_ops_per_s: 10_000.0,
            alpha: 1.0,
            index_write: 0.5,
            alpha_create: 1.2,
            index_create: Some(0.3),
            indexed_create: 0.1,
            global_index_hop: 0.8,
            global_index_move: Some(0.6),
            beta_s: 1e-7,
            get_s: Some(2e-5),
            write_s: 4e-6,
            insert_s: 5e-6,
            stored_per_fold: 0.04,
            stored_reference_rows: 5000.0,
            daemons: 3,
            ..Params::default()
        };
        let second = Params {
            t_max_ops_per_s: 20_000.0,
            alpha: 2.0,
            index_write: 0.2,
            alpha_create: 2.0,
            index_create: None,
            indexed_create: 0.4,
            global_index_hop: 1.4,
            global_index_move: None,
            beta_s: 3e-7,
            get_s: None,
            write_s: 8e-6,
            insert_s: 1e-6,
            stored_per_fold: 0.1,
            stored_reference_rows: 6000.0,
            daemons: 3,
            ..Params::default()
        };
        (first, second)
    }

    #[test]
    fn calibrations_average_as_costs_in_seconds() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        let (first, second) = two_calibrations();
        // The second after the first alone: equal weights. Hops 100 and
        // 50 µs average 75 µs; a move costs 100 µs in both (1 · 100, 2 ·
        // 50), so α = 100 / 75; an index entry 50 and 10 µs, 30 / 75.
        let both = second.pooled(&first, 1);
        assert!(close(both.t_max_ops_per_s, 1.0 / 75e-6), "{both:?}");
        assert!(close(both.alpha, 100.0 / 75.0), "{both:?}");
        assert!(close(both.index_write, 30.0 / 75.0), "{both:?}");
        assert!(close(both.beta_s, 2e-7));
        assert!(close(both.write_s, 6e-6));
        // A share per e-fold averages as it is; the rows it is counted
        // from are the latest calibration's.
        assert!(close(both.stored_per_fold, 0.07));
        assert_eq!(both.stored_reference_rows, 6000.0);
        // The second's get was left at one hop (50 µs): 20 and 50 average 35.
        assert_eq!(both.get_s.map(|g| close(g, 35e-6)), Some(true));
        // The first averaging three earlier ones weighs three: β (1·3 +
        // 3·1) / 4 · 10⁻⁷; beyond CALIBRATIONS_MAX − 1 = 7 earlier, seven.
        assert!(close(second.pooled(&first, 3).beta_s, 1.5e-7));
        let many = second.pooled(&first, 40);
        assert!(close(many.beta_s, (3e-7 + 7.0 * 1e-7) / 8.0));
        assert!(close(
            many.alpha,
            (100.0 + 7.0 * 100.0) / (50.0 + 7.0 * 100.0)
        ));
        // A calibration averaged with its like is itself.
        let same = first.pooled(&first, 5);
        assert!(close(same.alpha, first.alpha) && close(same.beta_s, first.beta_s));
        assert!(close(same.t_max_ops_per_s, first.t_max_ops_per_s));
    }

    #[test]
    fn an_averaged_calibration_prices_a_put_and_a_search_at_the_mean_of_both() {
        use crate::calibrate::Measured;
        let (first, second) = two_calibrations();
        let both = second.pooled(&first, 1);
        // A put that moves the object between two subspaces, rewrites
        // index entries and moves it to another indexlet of a global
        // index: w + hop · (hops + α · moves + δ · entries + g · replicas
        // + μ · moves there) is linear in the averaged costs, so it is the
        // mean of the two; so is an insert's w_i + hop · (α_c · copies +
        // δ_c · entries + ι · indexed copies).
        let put = Measured::Put {
            copies: 2.0,
            unchanged: 1.0,
            moved: vec![0.75],
            entries: 6.0,
            global: vec![0.5],
        };
        let insert = Measured::Insert {
            copies: 4.0,
            entries: 8.0,
            indexed: 2.0,
        };
        let search = Measured::Search {
            regions: 8.0,
            examined: 500.0,
            range: false,
            range_entries: 0.0,
            results: 4.0,
            index_reads: 0.0,
            handed_off: 8.0,
        };
        for op in [put, insert, search, Measured::Get] {
            let (a, b) = (op.predicted_s(&first), op.predicted_s(&second));
            let mean = (a + b) / 2.0;
            let got = op.predicted_s(&both);
            assert!(
                (got - mean).abs() <= 1e-9 * mean,
                "{op:?}: {got} against {mean}"
            );
        }
    }

    #[test]
    fn more_daemons_of_the_same_servers_share_every_cost() {
        let on3 = Params {
            indexed_create: 0.35,
            beta_s: 1e-7,
            t_max_ops_per_s: 15_000.0,
            request_s: 7e-5,
            result_s: 3e-6,
            range_search_s: 3e-5,
            range_entry_s: 9e-7,
            get_s: Some(8e-6),
            write_s: 6e-6,
            insert_s: 2e-6,
            walk_first_s: 4e-6,
            unbounded_s: 1.1e-5,
            handoff_first_s: 1.6e-5,
            search_base_s: 3e-6,
            modify_s: 5e-6,
            lookup_base_s: 1.5e-5,
            lookup_match_s: Some(2e-5),
            handoff_mixed_s: 2.8e-5,
            writes_beside_s: 4.1e-5,
            modify_hop_s: 2.5e-6,
            larger_search_s: 3e-6,
            larger_entry_s: 4e-7,
            larger_reference_objects: 4000.0,
            stored_per_fold: 0.06,
            stored_reference_rows: 5333.0,
            global_index_move: Some(0.2),
            daemons: 3,
            ..Params::default()
        };
        let on6 = on3.on_daemons(6);
        assert_eq!(on6.daemons, 6);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
        // Twice the servers: each operation half the cluster's time.
        assert!(close(on6.t_max_ops_per_s, 30_000.0));
        assert!(close(on6.hop_s(), on3.hop_s() / 2.0));
        for (six, three) in [
            (on6.beta_s, on3.beta_s),
            (on6.request_s, on3.request_s),
            (on6.result_s, on3.result_s),
            (on6.range_search_s, on3.range_search_s),
            (on6.range_entry_s, on3.range_entry_s),
            (on6.get_cost_s(), on3.get_cost_s()),
            (on6.write_s, on3.write_s),
            (on6.handoff_first_s, on3.handoff_first_s),
            (on6.insert_s, on3.insert_s),
            (on6.walk_first_s, on3.walk_first_s),
            (on6.unbounded_s, on3.unbounded_s),
            (on6.search_base_s, on3.search_base_s),
            (on6.modify_s, on3.modify_s),
            (on6.lookup_base_s, on3.lookup_base_s),
            (on6.lookup_match_cost_s(), on3.lookup_match_cost_s()),
            (on6.handoff_mixed_s, on3.handoff_mixed_s),
            (on6.writes_beside_s, on3.writes_beside_s),
            (on6.modify_hop_s, on3.modify_hop_s),
            (on6.larger_search_s, on3.larger_search_s),
            (on6.larger_entry_s, on3.larger_entry_s),
        ] {
            assert!(close(six, three / 2.0), "{six} against {three}");
        }
        // Ratios between hops, sizes and one transfer's bandwidth stay.
        assert_eq!(
            (
                on6.alpha,
                on6.alpha_create,
                on6.index_write,
                on6.index_create()
            ),
            (
                on3.alpha,
                on3.alpha_create,
                on3.index_write,
                on3.index_create()
            )
        );
        // So do what rows cost per e-fold and the rows per daemon they
        // are counted from.
        assert_eq!(
            (on6.stored_per_fold, on6.stored_reference_rows),
            (0.06, 5333.0)
        );
        assert_eq!(
            (
                on6.global_index_hop,
                on6.global_move_hops(),
                on6.indexed_create
            ),
            (
                on3.global_index_hop,
                on3.global_move_hops(),
                on3.indexed_create
            )
        );
        assert_eq!(
            (
                on6.object_bytes,
                on6.rebuild_bytes_per_s,
                on6.range_fraction
            ),
            (
                on3.object_bytes,
                on3.rebuild_bytes_per_s,
                on3.range_fraction
            )
        );
        // A get left at one hop follows the hop.
        let hop_get = Params {
            get_s: None,
            ..on3.clone()
        }
        .on_daemons(6);
        assert!(close(hop_get.get_cost_s(), on3.hop_s() / 2.0));
        // Back to three: what it was; the same count changes nothing.
        let back = on6.on_daemons(3);
        assert!(close(back.t_max_ops_per_s, on3.t_max_ops_per_s));
        assert!(close(back.request_s, on3.request_s));
        assert_eq!(on3.on_daemons(3), on3);
        // No daemon is taken as one.
        assert_eq!(on3.on_daemons(0), on3.on_daemons(1));
    }

    #[test]
    fn a_version_1_calibration_keeps_the_range_defaults() {
        let mut stored = Params {
            t_max_ops_per_s: 15_000.0,
            range_search_s: 3e-5,
            range_entry_s: 9e-7,
            ..Params::default()
        }
        .calibration(3, 9, 1, vec![]);
        stored.version = tessera_types::calibration::ADVISOR_CALIBRATION_VERSION_1;
        stored.range_search_s = None;
        stored.range_entry_s = None;
        (stored.get_s, stored.write_s, stored.insert_s) = (None, None, None);
        (stored.index_create, stored.walk_first_s) = (None, None);
        (stored.unbounded_s, stored.search_base_s, stored.modify_s) = (None, None, None);
        (stored.global_index_hop, stored.global_index_move) = (None, None);
        (stored.lookup_base_s, stored.lookup_match_s) = (None, None);
        (stored.handoff_mixed_s, stored.writes_beside_s) = (None, None);
        stored.modify_hop_s = None;
        (stored.larger_search_s, stored.larger_entry_s) = (None, None);
        stored.larger_reference_objects = None;
        stored.handoff_first_s = None;
        stored.indexed_create = None;
        (stored.stored_per_fold, stored.stored_reference_rows) = (None, None);
        stored.calibrations = None;
        assert_eq!(stored.validate(), Ok(()));
        let defaults = Params::default();
        let back = defaults.calibrated(&stored);
        assert_eq!(back.t_max_ops_per_s, 15_000.0);
        assert_eq!(back.range_search_s, defaults.range_search_s);
        assert_eq!(back.range_entry_s, defaults.range_entry_s);
        // Without version 3's parameters a get is one hop of the
        // calibrated T_max, as before.
        assert_eq!(back.get_cost_s(), 1.0 / 15_000.0);
        assert_eq!((back.write_s, back.walk_first_s), (0.0, 0.0));
        assert_eq!(
            (back.unbounded_s, back.search_base_s, back.modify_s),
            (0.0, 0.0, 0.0)
        );
        // Without version 5's, a global index hop is the default one and
        // a lookup's match costs β and a get.
        assert_eq!(back.global_index_hop, defaults.global_index_hop);
        assert_eq!(
            back.global_move_hops(),
            back.global_index_hop * (2.0 * back.alpha - 1.0)
        );
        assert_eq!(back.lookup_base_s, 0.0);
        assert_eq!(back.lookup_match_cost_s(), back.beta_s + back.get_cost_s());
        // Without version 6's, a hand-off costs the same among other work.
        assert_eq!(back.handoff_mixed_s, 0.0);
        // Without version 7's, writes cost the searches beside them
        // nothing.
        assert_eq!(back.writes_beside_s, 0.0);
        // Without version 8's, a modify's long chain costs no more than
        // its put's.
        assert_eq!(back.modify_hop_s, 0.0);
        // Nor is a walk over a larger space dearer.
        assert_eq!((back.larger_search_s, back.larger_entry_s), (0.0, 0.0));
        // Without version 9's, a search handing off a page pays u per
        // page and nothing more, and an insert's copy its entries only.
        assert_eq!((back.handoff_first_s, back.indexed_create), (0.0, 0.0));
        // Without version 13's, the rows a daemon stores cost nothing.
        assert_eq!(
            (back.stored_per_fold, back.stored_reference_rows),
            (0.0, 0.0)
        );
    }
}
