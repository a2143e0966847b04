//! The layout advisor's calibrated parameters, as the cluster configuration
//! stores them (`tessera calibrate` measures them; `tessera advise` reads
//! them). A typed, versioned payload: the coordinator refuses one that does
//! not [`validate`](AdvisorCalibration::validate).

use serde::{Deserialize, Serialize};

/// The payload version this build writes.
pub const ADVISOR_CALIBRATION_VERSION: u32 = ADVISOR_CALIBRATION_VERSION_13;

/// The version that measures what the rows a daemon stores cost every
/// operation (`stored_per_fold`, `stored_reference_rows`), and fits every
/// other parameter at the reference rows: each step's cost divided by
/// what its space's rows added or saved.
pub const ADVISOR_CALIBRATION_VERSION_13: u32 = 13;

/// The twelfth version, still accepted: version 13's parameters but the
/// two rows-stored ones. It counts the local index entries a put moves with an
/// object (every entry of the regions it leaves and enters) apart from
/// the move's hops, so its α is a move without its entries and its
/// δ_c, ι an insert's per entry and per indexed copy as each part's
/// regions hold them. Its fields are version 11's; the number tells
/// `tessera calibrate` not to average a new fit with one of the other
/// meaning.
pub const ADVISOR_CALIBRATION_VERSION_12: u32 = 12;

/// The eleventh version, still accepted: it fits ε (`walk_first_s`) per
/// region a search reads an entry in instead of once per search; its α
/// includes the entries a move carries.
pub const ADVISOR_CALIBRATION_VERSION_11: u32 = 11;

/// The tenth version, still accepted: it added the count of calibrations
/// the parameters average ([`AdvisorCalibration::calibrations`]); its ε
/// was fitted once per search.
pub const ADVISOR_CALIBRATION_VERSION_10: u32 = 10;

/// The ninth version, still accepted: it has every parameter, but not
/// the count of calibrations they average that version 10 added (`None`:
/// one).
pub const ADVISOR_CALIBRATION_VERSION_9: u32 = 9;

/// The eighth version, still accepted: it has every parameter but the
/// two version 9 added (`None`): what a search handing off any page pays
/// once, and what a copy an insert creates in an indexed region pays
/// whatever its entries.
pub const ADVISOR_CALIBRATION_VERSION_8: u32 = 8;

/// The seventh version, still accepted: it has every parameter but the
/// three version 8 added (`None`): what a modify adds per hop of its put's
/// chain, and what a walk adds on a space larger than the calibration's.
pub const ADVISOR_CALIBRATION_VERSION_7: u32 = 7;

/// The sixth version, still accepted: it has every parameter but what
/// writes cost the searches beside them that version 7 added (`None`).
pub const ADVISOR_CALIBRATION_VERSION_6: u32 = 6;

/// The fifth version, still accepted: it has every parameter but the
/// hand-off beside other work that version 6 added (`None`).
pub const ADVISOR_CALIBRATION_VERSION_5: u32 = 5;

/// The fourth version, still accepted: it has every parameter but the
/// global index's four that version 5 added (`None`).
pub const ADVISOR_CALIBRATION_VERSION_4: u32 = 4;

/// The third version, still accepted: it has the per-request parameters
/// but not the per-search, unbounded-page and per-modify costs version 4
/// added (`None`).
pub const ADVISOR_CALIBRATION_VERSION_3: u32 = 3;

/// The second version, still accepted: it has the range parameters but
/// none of the per-request ones version 3 added (those are `None`).
pub const ADVISOR_CALIBRATION_VERSION_2: u32 = 2;

/// The first version, still accepted: it has none of the parameters
/// version 2 added (those are `None`, so the model keeps its defaults).
pub const ADVISOR_CALIBRATION_VERSION_1: u32 = 1;

/// At most this many fit reports per payload.
pub const FITS_MAX: usize = 32;

/// The most calibrations a stored payload averages: past it, each new
/// calibration replaces this share of the average (see
/// `tessera_advisor::Params::pooled`).
pub const CALIBRATIONS_MAX: u32 = 8;

/// The cost-model parameters `tessera calibrate` fits on a running cluster
/// (the fields of the advisor's `Params` it measures), with how well each
/// fitted operation matched. Times are seconds of cluster work per
/// operation, as in the thesis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdvisorCalibration {
    /// [`ADVISOR_CALIBRATION_VERSION`] when written.
    pub version: u32,
    /// β: seconds per object a search examines.
    pub beta_s: f64,
    /// T_max: ops/s of a chain of length one.
    pub t_max_ops_per_s: f64,
    /// α: a delete or create hop (an object moving region) relative to an
    /// overwrite hop.
    pub alpha: f64,
    /// α_c: a create hop of an insert relative to an overwrite hop.
    pub alpha_create: f64,
    /// c_req: seconds per region a search contacts.
    pub request_s: f64,
    /// γ: seconds per object a search returns.
    pub result_s: f64,
    /// δ: one local index entry write relative to an overwrite hop.
    pub index_write: f64,
    /// ρ: seconds per search whose region walk is a range, on top of
    /// what an equality walk costs (version 2; `None` in version 1).
    #[serde(default)]
    pub range_search_s: Option<f64>,
    /// β_r: seconds per index entry a range walk reads (version 2; `None`
    /// in version 1).
    #[serde(default)]
    pub range_entry_s: Option<f64>,
    /// Seconds per get (version 3; `None` before: the model charges a
    /// get one overwrite hop).
    #[serde(default)]
    pub get_s: Option<f64>,
    /// Seconds per put or modify request on top of its hops (version 3).
    #[serde(default)]
    pub write_s: Option<f64>,
    /// Seconds per insert request on top of its creates (version 3).
    #[serde(default)]
    pub insert_s: Option<f64>,
    /// One local index entry an insert creates, relative to an overwrite
    /// hop (version 3; before, inserts used `index_write`).
    #[serde(default)]
    pub index_create: Option<f64>,
    /// Seconds per search whose regions read at least one object through
    /// a local index (version 3).
    #[serde(default)]
    pub walk_first_s: Option<f64>,
    /// Seconds per region contacted whose page is not bounded by its
    /// result (a scan, or an index walk with a check its index does not
    /// answer), on top of c_req (version 4).
    #[serde(default)]
    pub unbounded_s: Option<f64>,
    /// Seconds per search whatever the regions it contacts (the client's
    /// plan, its streams and their merge) (version 4).
    #[serde(default)]
    pub search_base_s: Option<f64>,
    /// Seconds per modify on top of its get and its put (version 4).
    #[serde(default)]
    pub modify_s: Option<f64>,
    /// One hop on a global index's indexlet replica relative to an
    /// overwrite hop (version 5; before, the model's default).
    #[serde(default)]
    pub global_index_hop: Option<f64>,
    /// What a write that moves the object to another indexlet adds per
    /// replica, relative to an overwrite hop (version 5).
    #[serde(default)]
    pub global_index_move: Option<f64>,
    /// Seconds per lookup through a global index on top of a search's
    /// (its second round trip, the gets) (version 5).
    #[serde(default)]
    pub lookup_base_s: Option<f64>,
    /// Seconds per match a lookup through a global index returns: its
    /// entry read and the get of its object (version 5; before, β plus a
    /// get).
    #[serde(default)]
    pub lookup_match_s: Option<f64>,
    /// Seconds a search whose pages go to a blocking thread adds when
    /// other work shares the daemons, at none of the mix's time in such
    /// searches (version 6).
    #[serde(default)]
    pub handoff_mixed_s: Option<f64>,
    /// Seconds a search adds per write interleaved with it: a mix whose
    /// operations are a share p_s searches and p_w writes pays this times
    /// p_s·p_w per operation (version 7).
    #[serde(default)]
    pub writes_beside_s: Option<f64>,
    /// Seconds a modify adds per hop of its put's chain beyond the first,
    /// on top of its get and its put measured apart (version 8).
    #[serde(default)]
    pub modify_hop_s: Option<f64>,
    /// Seconds a search reading through a local index adds per e-fold of
    /// its space's objects beyond `larger_reference_objects` (version 8).
    #[serde(default)]
    pub larger_search_s: Option<f64>,
    /// Seconds each entry read through a local index adds per e-fold of
    /// its space's objects beyond `larger_reference_objects` (version 8).
    #[serde(default)]
    pub larger_entry_s: Option<f64>,
    /// Objects of the space the calibration's searches ran on (version 8).
    #[serde(default)]
    pub larger_reference_objects: Option<f64>,
    /// Seconds a search pays once when it hands off at least one page,
    /// on top of `unbounded_s` per page handed off (version 9).
    #[serde(default)]
    pub handoff_first_s: Option<f64>,
    /// What an insert's copy created in a region that indexes at least
    /// one attribute adds whatever its entries, relative to an overwrite
    /// hop (version 9).
    #[serde(default)]
    pub indexed_create: Option<f64>,
    /// κ: the share by which every operation's cost grows per e-fold of
    /// the rows a daemon stores beyond `stored_reference_rows` (and falls
    /// below it) (version 13).
    #[serde(default)]
    pub stored_per_fold: Option<f64>,
    /// R₀: rows per daemon (objects times copies of every part, over the
    /// daemons) of the space the calibration's searches ran on (version
    /// 13).
    #[serde(default)]
    pub stored_reference_rows: Option<f64>,
    /// How many calibrations of this cluster the parameters average, 1
    /// to [`CALIBRATIONS_MAX`] (version 10; `None` before: one).
    #[serde(default)]
    pub calibrations: Option<u32>,
    /// Daemons the cluster had when measured.
    pub daemons: u32,
    /// The configuration epoch at which the measurement started.
    pub epoch: u64,
    /// How well each fitted operation matched its measurements (the
    /// latest calibration's, when the parameters average several).
    pub fits: Vec<FitQuality>,
}

/// The fit error of one group of measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitQuality {
    /// What was fitted (`put`, `search`, …).
    pub op: String,
    /// Measurements in the group.
    pub points: u32,
    /// R² of the measured costs against the fitted ones (1 is perfect; can
    /// be negative when the fitted model is worse than the mean).
    pub r2: f64,
    /// Root mean square of (fitted − measured) / measured.
    pub rel_rms: f64,
}

// Validated payloads hold no NaN, so equality is reflexive.
impl Eq for AdvisorCalibration {}
impl Eq for FitQuality {}

/// Why a calibration payload is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// A version this build does not know.
    #[error("advisor calibration version {found} is not one of {ADVISOR_CALIBRATION_VERSION_1} to {ADVISOR_CALIBRATION_VERSION}, the ones this build knows")]
    Version {
        /// The payload's version.
        found: u32,
    },
    /// A parameter its version does not have (a version-1 payload with a
    /// version-2 parameter, say), or lacks one its version has.
    #[error("advisor calibration version {version} {} {name}", shape_why(*.present))]
    Shape {
        /// The payload's version.
        version: u32,
        /// The parameter's field name.
        name: &'static str,
        /// Whether it is there (and should not be).
        present: bool,
    },
    /// A parameter that is not finite or is out of its range.
    #[error("advisor parameter {name} = {value} must be finite and {range}")]
    OutOfRange {
        /// The parameter's field name.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        range: &'static str,
    },
    /// No daemons.
    #[error("advisor calibration names 0 daemons")]
    NoDaemons,
    /// A count of averaged calibrations out of its range.
    #[error("advisor calibration averages {count} calibrations, not 1 to {CALIBRATIONS_MAX}")]
    Calibrations {
        /// The payload's count.
        count: u32,
    },
    /// A fit report that is malformed, or too many of them.
    #[error("advisor calibration fit report {index}: {why}")]
    Fit {
        /// The report's position.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
}

fn shape_why(present: bool) -> &'static str {
    if present {
        "has no parameter"
    } else {
        "lacks the parameter"
    }
}

impl AdvisorCalibration {
    /// Whether every value is usable by the model: the version known, times
    /// and ratios finite, hop costs positive, per-object costs not negative.
    pub fn validate(&self) -> Result<(), CalibrationError> {
        // (parameter, the version that added it)
        let added = [
            ("range_search_s", self.range_search_s, 2),
            ("range_entry_s", self.range_entry_s, 2),
            ("get_s", self.get_s, 3),
            ("write_s", self.write_s, 3),
            ("insert_s", self.insert_s, 3),
            ("index_create", self.index_create, 3),
            ("walk_first_s", self.walk_first_s, 3),
            ("unbounded_s", self.unbounded_s, 4),
            ("search_base_s", self.search_base_s, 4),
            ("modify_s", self.modify_s, 4),
            ("global_index_hop", self.global_index_hop, 5),
            ("global_index_move", self.global_index_move, 5),
            ("lookup_base_s", self.lookup_base_s, 5),
            ("lookup_match_s", self.lookup_match_s, 5),
            ("handoff_mixed_s", self.handoff_mixed_s, 6),
            ("writes_beside_s", self.writes_beside_s, 7),
            ("modify_hop_s", self.modify_hop_s, 8),
            ("larger_search_s", self.larger_search_s, 8),
            ("larger_entry_s", self.larger_entry_s, 8),
            ("larger_reference_objects", self.larger_reference_objects, 8),
            ("handoff_first_s", self.handoff_first_s, 9),
            ("indexed_create", self.indexed_create, 9),
            ("stored_per_fold", self.stored_per_fold, 13),
            ("stored_reference_rows", self.stored_reference_rows, 13),
        ];
        if !matches!(
            self.version,
            ADVISOR_CALIBRATION_VERSION_1
                | ADVISOR_CALIBRATION_VERSION_2
                | ADVISOR_CALIBRATION_VERSION_3
                | ADVISOR_CALIBRATION_VERSION_4
                | ADVISOR_CALIBRATION_VERSION_5
                | ADVISOR_CALIBRATION_VERSION_6
                | ADVISOR_CALIBRATION_VERSION_7
                | ADVISOR_CALIBRATION_VERSION_8
                | ADVISOR_CALIBRATION_VERSION_9
                | ADVISOR_CALIBRATION_VERSION_10
                | ADVISOR_CALIBRATION_VERSION_11
                | ADVISOR_CALIBRATION_VERSION_12
                | ADVISOR_CALIBRATION_VERSION
        ) {
            return Err(CalibrationError::Version {
                found: self.version,
            });
        }
        for (name, value, since) in added {
            if value.is_some() != (self.version >= since) {
                return Err(CalibrationError::Shape {
                    version: self.version,
                    name,
                    present: value.is_some(),
                });
            }
        }
        if self.calibrations.is_some() != (self.version >= ADVISOR_CALIBRATION_VERSION_10) {
            return Err(CalibrationError::Shape {
                version: self.version,
                name: "calibrations",
                present: self.calibrations.is_some(),
            });
        }
        if let Some(count) = self.calibrations {
            if !(1..=CALIBRATIONS_MAX).contains(&count) {
                return Err(CalibrationError::Calibrations { count });
            }
        }
        let positive = [
            ("t_max_ops_per_s", self.t_max_ops_per_s),
            ("alpha", self.alpha),
            ("alpha_create", self.alpha_create),
            ("request_s", self.request_s),
        ];
        for (name, value) in positive {
            if !value.is_finite() || value <= 0.0 {
                return Err(CalibrationError::OutOfRange {
                    name,
                    value,
                    range: "> 0",
                });
            }
        }
        let not_negative = [
            ("beta_s", self.beta_s),
            ("result_s", self.result_s),
            ("index_write", self.index_write),
            ("range_search_s", self.range_search_s.unwrap_or(0.0)),
            ("range_entry_s", self.range_entry_s.unwrap_or(0.0)),
            ("get_s", self.get_s.unwrap_or(0.0)),
            ("write_s", self.write_s.unwrap_or(0.0)),
            ("insert_s", self.insert_s.unwrap_or(0.0)),
            ("index_create", self.index_create.unwrap_or(0.0)),
            ("walk_first_s", self.walk_first_s.unwrap_or(0.0)),
            ("unbounded_s", self.unbounded_s.unwrap_or(0.0)),
            ("search_base_s", self.search_base_s.unwrap_or(0.0)),
            ("modify_s", self.modify_s.unwrap_or(0.0)),
            ("global_index_hop", self.global_index_hop.unwrap_or(0.0)),
            ("global_index_move", self.global_index_move.unwrap_or(0.0)),
            ("lookup_base_s", self.lookup_base_s.unwrap_or(0.0)),
            ("lookup_match_s", self.lookup_match_s.unwrap_or(0.0)),
            ("handoff_mixed_s", self.handoff_mixed_s.unwrap_or(0.0)),
            ("writes_beside_s", self.writes_beside_s.unwrap_or(0.0)),
            ("modify_hop_s", self.modify_hop_s.unwrap_or(0.0)),
            ("larger_search_s", self.larger_search_s.unwrap_or(0.0)),
            ("larger_entry_s", self.larger_entry_s.unwrap_or(0.0)),
            (
                "larger_reference_objects",
                self.larger_reference_objects.unwrap_or(0.0),
            ),
            ("handoff_first_s", self.handoff_first_s.unwrap_or(0.0)),
            ("indexed_create", self.indexed_create.unwrap_or(0.0)),
            ("stored_per_fold", self.stored_per_fold.unwrap_or(0.0)),
            (
                "stored_reference_rows",
                self.stored_reference_rows.unwrap_or(0.0),
            ),
        ];
        for (name, value) in not_negative {
            if !value.is_finite() || value < 0.0 {
                return Err(CalibrationError::OutOfRange {
                    name,
                    value,
                    range: ">= 0",
                });
            }
        }
        if self.daemons == 0 {
            return Err(CalibrationError::NoDaemons);
        }
        if self.fits.len() > FITS_MAX {
            return Err(CalibrationError::Fit {
                index: FITS_MAX,
                why: format!("more than {FITS_MAX} reports"),
            });
        }
        for (index, fit) in self.fits.iter().enumerate() {
            let why = if fit.op.is_empty() || fit.op.len() > 64 {
                Some("its name must have 1 to 64 bytes".to_string())
            } else if !fit.r2.is_finite() || fit.r2 > 1.0 {
                Some(format!("R² {} is not finite and at most 1", fit.r2))
            } else if !fit.rel_rms.is_finite() || fit.rel_rms < 0.0 {
                Some(format!(
                    "relative RMS error {} is not finite and >= 0",
                    fit.rel_rms
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(CalibrationError::Fit { index, why });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) fn sample() -> AdvisorCalibration {
    AdvisorCalibration {
        version: ADVISOR_CALIBRATION_VERSION,
        beta_s: 2e-7,
        t_max_ops_per_s: 20_000.0,
        alpha: 1.8,
        alpha_create: 1.2,
        request_s: 4e-5,
        result_s: 1e-6,
        index_write: 0.05,
        range_search_s: Some(2e-5),
        range_entry_s: Some(5e-7),
        get_s: Some(9e-6),
        write_s: Some(8e-6),
        insert_s: Some(3e-6),
        index_create: Some(0.15),
        walk_first_s: Some(5e-6),
        unbounded_s: Some(1.2e-5),
        search_base_s: Some(4e-6),
        modify_s: Some(5e-6),
        global_index_hop: Some(0.8),
        global_index_move: Some(0.4),
        lookup_base_s: Some(1e-5),
        lookup_match_s: Some(2.5e-5),
        handoff_mixed_s: Some(3e-5),
        writes_beside_s: Some(4e-5),
        modify_hop_s: Some(3e-6),
        larger_search_s: Some(2e-6),
        larger_entry_s: Some(5e-7),
        larger_reference_objects: Some(4000.0),
        handoff_first_s: Some(1.5e-5),
        indexed_create: Some(0.3),
        stored_per_fold: Some(0.08),
        stored_reference_rows: Some(5333.0),
        calibrations: Some(3),
        daemons: 3,
        epoch: 7,
        fits: vec![FitQuality {
            op: "put".into(),
            points: 8,
            r2: 0.97,
            rel_rms: 0.04,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_validates_and_bad_values_are_named() {
        assert_eq!(sample().validate(), Ok(()));
        let mut bad = sample();
        bad.version = 14;
        assert_eq!(bad.validate(), Err(CalibrationError::Version { found: 14 }));
        // Version 12 has every parameter but the two of rows stored.
        let mut v12 = sample();
        v12.version = ADVISOR_CALIBRATION_VERSION_12;
        assert_eq!(
            v12.validate(),
            Err(CalibrationError::Shape {
                version: 12,
                name: "stored_per_fold",
                present: true
            })
        );
        v12.stored_per_fold = None;
        assert_eq!(
            v12.validate(),
            Err(CalibrationError::Shape {
                version: 12,
                name: "stored_reference_rows",
                present: true
            })
        );
        v12.stored_reference_rows = None;
        assert_eq!(v12.validate(), Ok(()));
        let mut bad = sample();
        bad.stored_per_fold = Some(-0.01);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "stored_per_fold",
                ..
            })
        ));
        // Versions 10 and 11, with the same fields as 12, are still accepted.
        for version in [
            ADVISOR_CALIBRATION_VERSION_10,
            ADVISOR_CALIBRATION_VERSION_11,
        ] {
            let mut older = v12.clone();
            older.version = version;
            assert_eq!(older.validate(), Ok(()));
        }
        // Versions 10 to 13 count the calibrations its parameters average: one
        // to CALIBRATIONS_MAX.
        for count in [0, CALIBRATIONS_MAX + 1] {
            let mut bad = sample();
            bad.calibrations = Some(count);
            assert_eq!(
                bad.validate(),
                Err(CalibrationError::Calibrations { count })
            );
        }
        let mut most = sample();
        most.calibrations = Some(CALIBRATIONS_MAX);
        assert_eq!(most.validate(), Ok(()));
        let mut bad = sample();
        bad.calibrations = None;
        assert_eq!(
            bad.validate(),
            Err(CalibrationError::Shape {
                version: ADVISOR_CALIBRATION_VERSION,
                name: "calibrations",
                present: false
            })
        );
        // Version 9 has every parameter but no count.
        let mut v9 = v12.clone();
        v9.version = ADVISOR_CALIBRATION_VERSION_9;
        assert_eq!(
            v9.validate(),
            Err(CalibrationError::Shape {
                version: 9,
                name: "calibrations",
                present: true
            })
        );
        v9.calibrations = None;
        assert_eq!(v9.validate(), Ok(()));
        let mut bad = sample();
        bad.modify_hop_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "modify_hop_s",
                ..
            })
        ));
        let mut bad = sample();
        bad.handoff_first_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "handoff_first_s",
                ..
            })
        ));
        // Version 8 has every parameter but what a search handing off
        // any page pays once.
        let mut v8 = v9.clone();
        v8.version = ADVISOR_CALIBRATION_VERSION_8;
        assert_eq!(
            v8.validate(),
            Err(CalibrationError::Shape {
                version: 8,
                name: "handoff_first_s",
                present: true
            })
        );
        v8.handoff_first_s = None;
        assert_eq!(
            v8.validate(),
            Err(CalibrationError::Shape {
                version: 8,
                name: "indexed_create",
                present: true
            })
        );
        v8.indexed_create = None;
        assert_eq!(v8.validate(), Ok(()));
        // Version 7 has every parameter but what a modify adds per hop.
        let mut v7 = v8.clone();
        v7.version = ADVISOR_CALIBRATION_VERSION_7;
        assert_eq!(
            v7.validate(),
            Err(CalibrationError::Shape {
                version: 7,
                name: "modify_hop_s",
                present: true
            })
        );
        v7.modify_hop_s = None;
        (v7.larger_search_s, v7.larger_entry_s) = (None, None);
        assert_eq!(
            v7.validate(),
            Err(CalibrationError::Shape {
                version: 7,
                name: "larger_reference_objects",
                present: true
            })
        );
        v7.larger_reference_objects = None;
        assert_eq!(v7.validate(), Ok(()));
        let mut bad = sample();
        bad.writes_beside_s = Some(f64::NAN);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "writes_beside_s",
                ..
            })
        ));
        // Version 6 has every parameter but what writes cost searches.
        let mut v6 = v7.clone();
        v6.version = ADVISOR_CALIBRATION_VERSION_6;
        assert_eq!(
            v6.validate(),
            Err(CalibrationError::Shape {
                version: 6,
                name: "writes_beside_s",
                present: true
            })
        );
        v6.writes_beside_s = None;
        assert_eq!(v6.validate(), Ok(()));
        let mut bad = sample();
        bad.handoff_mixed_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "handoff_mixed_s",
                ..
            })
        ));
        let mut bad = sample();
        bad.range_entry_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "range_entry_s",
                ..
            })
        ));
        let mut bad = sample();
        bad.range_search_s = None;
        assert_eq!(
            bad.validate(),
            Err(CalibrationError::Shape {
                version: ADVISOR_CALIBRATION_VERSION,
                name: "range_search_s",
                present: false
            })
        );
        let mut bad = sample();
        bad.walk_first_s = None;
        assert_eq!(
            bad.validate(),
            Err(CalibrationError::Shape {
                version: ADVISOR_CALIBRATION_VERSION,
                name: "walk_first_s",
                present: false
            })
        );
        let mut bad = sample();
        bad.unbounded_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "unbounded_s",
                ..
            })
        ));
        let mut bad = sample();
        bad.lookup_match_s = Some(-1e-9);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange {
                name: "lookup_match_s",
                ..
            })
        ));
        // Version 5 has every parameter but the hand-off beside other work.
        let mut v5 = v6.clone();
        v5.version = ADVISOR_CALIBRATION_VERSION_5;
        assert_eq!(
            v5.validate(),
            Err(CalibrationError::Shape {
                version: 5,
                name: "handoff_mixed_s",
                present: true
            })
        );
        v5.handoff_mixed_s = None;
        assert_eq!(v5.validate(), Ok(()));
        // Version 4 has every parameter but the global index's.
        let mut v4 = v5.clone();
        v4.version = ADVISOR_CALIBRATION_VERSION_4;
        assert_eq!(
            v4.validate(),
            Err(CalibrationError::Shape {
                version: 4,
                name: "global_index_hop",
                present: true
            })
        );
        (v4.global_index_hop, v4.global_index_move) = (None, None);
        (v4.lookup_base_s, v4.lookup_match_s) = (None, None);
        assert_eq!(v4.validate(), Ok(()));
        // Version 3 has every parameter but version 4's.
        let mut v3 = v4.clone();
        v3.version = ADVISOR_CALIBRATION_VERSION_3;
        assert_eq!(
            v3.validate(),
            Err(CalibrationError::Shape {
                version: 3,
                name: "unbounded_s",
                present: true
            })
        );
        v3.unbounded_s = None;
        assert_eq!(
            v3.validate(),
            Err(CalibrationError::Shape {
                version: 3,
                name: "search_base_s",
                present: true
            })
        );
        v3.search_base_s = None;
        v3.modify_s = None;
        assert_eq!(v3.validate(), Ok(()));
        let mut bad = sample();
        bad.get_s = Some(f64::NAN);
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange { name: "get_s", .. })
        ));
        // Version 2 has the range parameters and none of version 3's.
        let mut v2 = v3.clone();
        v2.unbounded_s = Some(1e-5);
        v2.version = ADVISOR_CALIBRATION_VERSION_2;
        assert!(matches!(
            v2.validate(),
            Err(CalibrationError::Shape {
                version: 2,
                present: true,
                ..
            })
        ));
        (
            v2.get_s,
            v2.write_s,
            v2.insert_s,
            v2.index_create,
            v2.walk_first_s,
        ) = (None, None, None, None, None);
        (v2.unbounded_s, v2.search_base_s, v2.modify_s) = (None, None, None);
        assert_eq!(v2.validate(), Ok(()));
        let mut bad = sample();
        bad.alpha = f64::NAN;
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange { name: "alpha", .. })
        ));
        let mut bad = sample();
        bad.beta_s = -1e-9;
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::OutOfRange { name: "beta_s", .. })
        ));
        let mut bad = sample();
        bad.daemons = 0;
        assert_eq!(bad.validate(), Err(CalibrationError::NoDaemons));
        let mut bad = sample();
        bad.fits[0].r2 = f64::INFINITY;
        assert!(matches!(
            bad.validate(),
            Err(CalibrationError::Fit { index: 0, .. })
        ));
    }

    /// A version-1 payload as the last build wrote it, in the Raft log's
    /// JSON: without the version-2 parameters.
    const VERSION_1_JSON: &str = r#"{"version": 1, "beta_s": 2.4e-7,
        "t_max_ops_per_s": 58541.0, "alpha": 1.16, "alpha_create": 1.25,
        "request_s": 2.6e-5, "result_s": 1.1e-6, "index_write": 0.18,
        "daemons": 3, "epoch": 12,
        "fits": [{"op": "search", "points": 6, "r2": 0.999, "rel_rms": 0.051}]}"#;

    #[test]
    fn version_1_still_loads_and_validates_without_the_new_parameters() {
        let old: AdvisorCalibration = serde_json::from_str(VERSION_1_JSON).expect("decodes");
        assert_eq!(old.version, ADVISOR_CALIBRATION_VERSION_1);
        assert_eq!((old.range_search_s, old.range_entry_s), (None, None));
        assert_eq!(old.t_max_ops_per_s, 58541.0);
        assert_eq!(old.validate(), Ok(()));
        // Version 1 with a version-2 parameter is malformed.
        let mut bad = old.clone();
        bad.range_entry_s = Some(1e-7);
        assert_eq!(
            bad.validate(),
            Err(CalibrationError::Shape {
                version: 1,
                name: "range_entry_s",
                present: true
            })
        );
    }

    #[test]
    fn payloads_of_both_versions_round_trip_through_json_and_postcard() {
        let old: AdvisorCalibration = serde_json::from_str(VERSION_1_JSON).expect("decodes");
        for payload in [sample(), old] {
            let json = serde_json::to_string(&payload).expect("encodes");
            let back: AdvisorCalibration = serde_json::from_str(&json).expect("decodes");
            assert_eq!(back, payload);
            let bytes = postcard::to_allocvec(&payload).expect("encodes");
            let back: AdvisorCalibration = postcard::from_bytes(&bytes).expect("decodes");
            assert_eq!(back, payload);
        }
    }
}
