//! The layout advisor's calibrated parameters, as the cluster configuration
//! stores them (`tessera calibrate` measures them; `tessera advise` reads
//! them). A typed, versioned payload: the coordinator refuses one that does
//! not [`validate`](AdvisorCalibration::validate).

use serde::{Deserialize, Serialize};

/// The payload version this build writes and accepts.
pub const ADVISOR_CALIBRATION_VERSION: u32 = 1;

/// At most this many fit reports per payload.
pub const FITS_MAX: usize = 32;

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
    /// Daemons the cluster had when measured.
    pub daemons: u32,
    /// The configuration epoch at which the measurement started.
    pub epoch: u64,
    /// How well each fitted operation matched its measurements.
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
    #[error("advisor calibration version {found} is not {ADVISOR_CALIBRATION_VERSION}, the one this build knows")]
    Version {
        /// The payload's version.
        found: u32,
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
    /// A fit report that is malformed, or too many of them.
    #[error("advisor calibration fit report {index}: {why}")]
    Fit {
        /// The report's position.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl AdvisorCalibration {
    /// Whether every value is usable by the model: the version known, times
    /// and ratios finite, hop costs positive, per-object costs not negative.
    pub fn validate(&self) -> Result<(), CalibrationError> {
        if self.version != ADVISOR_CALIBRATION_VERSION {
            return Err(CalibrationError::Version {
                found: self.version,
            });
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
        bad.version = 2;
        assert_eq!(bad.validate(), Err(CalibrationError::Version { found: 2 }));
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
}
