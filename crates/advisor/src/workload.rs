//! Workload files (API.md §12.4): a space, an object count and operation
//! classes with probabilities, parsed against the space's description.
//!
//! ```json
//! {"space": "space hotels key id attributes string city, int price",
//!  "objects": 100000,
//!  "classes": [
//!    {"p": 0.6, "search": {"city": "eq", "price": "range"}},
//!    {"p": 0.3, "modify": ["price"]},
//!    {"p": 0.1, "insert": true}]}
//! ```
//!
//! Beyond §12.4, and all optional: `object_bytes` (bytes of one stored
//! copy of an object), `index_entry_bytes` (bytes of one stored local
//! index entry), `global_entry_bytes` (`{"attr": bytes}`, what a global
//! index on the attribute stores per object), `distinct` (`{"attr": n}`, how many distinct values
//! an attribute holds; equality then matches `objects / n` objects, and an
//! attribute not listed is taken as unique), `range_fraction` (the fraction
//! of an axis a range or a regex matches), `churn_horizon_s` (seconds a
//! removed index entry stays where walks step over it: see
//! `Workload::churn_horizon_s`), and per search class `results`
//! (objects returned) and `range_fraction`. Unknown keys are refused, so a
//! misspelt one never silently falls back to a default.
//!
//! Probabilities that do not sum to 1 are refused (RESEARCH.md A.1 asked
//! to pick between refusing and normalising): a typo in one class would
//! otherwise quietly reweigh every other.

use serde::Deserialize;
use std::collections::BTreeMap;
use tessera_types::{parse_space, DataType, ParseSpaceError, SpaceDesc};
use thiserror::Error;

/// How far the probabilities may sum from 1 (rounding in hand-written
/// files such as 0.1 + 0.2).
const P_SUM_TOLERANCE: f64 = 1e-6;

/// How a search specifies one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SearchOp {
    /// Equality on a value.
    Eq,
    /// A range (`lt`, `le`, `gt`, `ge` or several of them).
    Range,
    /// A regular expression on a string.
    Regex,
}

impl SearchOp {
    /// The word the workload file uses.
    pub fn name(self) -> &'static str {
        match self {
            SearchOp::Eq => "eq",
            SearchOp::Range => "range",
            SearchOp::Regex => "regex",
        }
    }
}

/// A search class: the attributes a query specifies and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// (attribute index into the space's `attrs`, operator), by attribute.
    pub checks: Vec<(usize, SearchOp)>,
    /// Objects one search returns, when the file says; otherwise the model
    /// estimates it from `distinct` and the range fraction.
    pub results: Option<f64>,
    /// The fraction of an axis a range or a regex of this class matches.
    pub range_fraction: Option<f64>,
}

/// What one operation class does.
#[derive(Clone, Debug, PartialEq)]
pub enum ClassKind {
    /// A search (the thesis's search class, with operators).
    Search(Search),
    /// A read by key.
    Get,
    /// An update of these attributes (indexes into `attrs`, ascending): a
    /// get, then a put of the changed object (thesis A.1).
    Modify(Vec<usize>),
    /// A new object with every attribute set.
    Insert,
}

/// One operation class and its probability.
#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    /// Its probability, in `[0, 1]`; the classes' probabilities sum to 1.
    pub p: f64,
    /// What it does.
    pub kind: ClassKind,
}

/// A parsed, validated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The space the workload runs on; its subspaces, indexes or
    /// replexes are the current layout, which competes with the layouts
    /// the advisor builds from the workload's searches.
    pub space: SpaceDesc,
    /// How many objects the space holds (O).
    pub objects: u64,
    /// The operation classes.
    pub classes: Vec<Class>,
    /// Bytes of one stored copy of an object, when the file says.
    pub object_bytes: Option<f64>,
    /// Bytes of one stored local index entry, when the file says (else
    /// `Params::index_entry_bytes`).
    pub index_entry_bytes: Option<f64>,
    /// Bytes a global index on an attribute (index into `attrs`) stores
    /// per object in one indexlet copy, when known (else
    /// `Params::global_entry_bytes`).
    pub global_entry_bytes: BTreeMap<usize, f64>,
    /// Distinct values per attribute (index into `attrs`), when known.
    pub distinct: BTreeMap<usize, u64>,
    /// The default fraction of an axis a range or regex matches.
    pub range_fraction: Option<f64>,
    /// Seconds an index entry a modify removed stays where walks step
    /// over it (until the memtable holding it is flushed): how much of
    /// the modifies' churn a search's index walk meets. `None`: not priced
    /// (`bench layouts` sets its run's length).
    pub churn_horizon_s: Option<f64>,
    /// Indexlets per global index (by attribute) as the cluster has them
    /// now, splits included (`Space::global_indexlets`), when the space
    /// was read from a cluster. A global index not here has its declared
    /// count, else the space's partitions.
    pub global_indexlets: BTreeMap<usize, u32>,
}

/// What a space holds, for the model: its object count, and the bytes
/// of one stored copy, of one local index entry and of a global index's
/// entry on each attribute, when measured (else the model's defaults).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Held {
    /// Objects in the space.
    pub objects: u64,
    /// Mean bytes of a stored copy.
    pub object_bytes: Option<f64>,
    /// Mean bytes of a stored local index entry.
    pub index_entry_bytes: Option<f64>,
    /// Mean bytes a global index on each attribute stores per object.
    pub global_entry_bytes: BTreeMap<usize, f64>,
}

impl Held {
    /// `objects` objects of the model's default sizes.
    pub fn count(objects: u64) -> Held {
        Held {
            objects,
            ..Held::default()
        }
    }

    /// Prices `workload` on these sizes where it gives none.
    pub fn size(&self, workload: &mut Workload) {
        workload.object_bytes = workload.object_bytes.or(self.object_bytes);
        workload.index_entry_bytes = workload.index_entry_bytes.or(self.index_entry_bytes);
        for (&attr, &bytes) in &self.global_entry_bytes {
            workload.global_entry_bytes.entry(attr).or_insert(bytes);
        }
    }
}

/// How a workload file names its space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpaceRef {
    /// The name of an existing space (to fetch from the cluster).
    Name(String),
    /// A whole space description.
    Description(String),
}

/// Why a workload file was refused.
#[derive(Debug, Error)]
pub enum ParseWorkloadError {
    /// The file is not JSON of the workload's shape (a missing or unknown
    /// key, a wrong type).
    #[error("the workload is not valid: {0}")]
    Json(#[source] serde_json::Error),
    /// The `space` description does not parse.
    #[error("the workload's space description is invalid")]
    Space(#[source] ParseSpaceError),
    /// The workload names a space but no description of it was given.
    #[error(
        "the workload names space {name:?}; give its description (or a cluster to fetch it from)"
    )]
    SpaceNeeded {
        /// The name in the file.
        name: String,
    },
    /// The workload's space is not the one given beside it.
    #[error("the workload is for space {workload:?}, not {given:?}")]
    SpaceMismatch {
        /// The name in the workload.
        workload: String,
        /// The name of the space given.
        given: String,
    },
    /// `objects` is 0.
    #[error("a workload needs at least one object")]
    NoObjects,
    /// `classes` is empty.
    #[error("a workload needs at least one operation class")]
    NoClasses,
    /// A class's probability is negative, above 1 or not a number.
    #[error("class {class}: probability {p} is not in [0, 1]")]
    BadProbability {
        /// The class's position in `classes`.
        class: usize,
        /// Its probability.
        p: f64,
    },
    /// The probabilities do not sum to 1.
    #[error("the classes' probabilities sum to {sum}, not 1")]
    ProbabilitySum {
        /// Their sum.
        sum: f64,
    },
    /// A class is none, or more than one, of search, get, modify, insert.
    #[error("class {class} must be exactly one of search, get, modify or insert")]
    ClassKind {
        /// The class's position.
        class: usize,
    },
    /// A class names an attribute the space does not have.
    #[error("class {class}: space {space:?} has no attribute {name:?}")]
    UnknownAttribute {
        /// The class's position (or the `distinct` or `global_entry_bytes`
        /// map's, as `classes.len()`).
        class: usize,
        /// The space's name.
        space: String,
        /// The unknown name.
        name: String,
    },
    /// A search names an operator other than eq, range and regex.
    #[error("class {class}: {op:?} on {attr:?} is not an operator (eq, range, regex)")]
    BadOperator {
        /// The class's position.
        class: usize,
        /// The attribute.
        attr: String,
        /// The operator given.
        op: String,
    },
    /// An operator that the attribute's type cannot take (a range on a
    /// container, a regex on a number).
    #[error("class {class}: {op} does not apply to {attr:?} of type {dtype}")]
    OperatorType {
        /// The class's position.
        class: usize,
        /// The attribute.
        attr: String,
        /// The operator.
        op: &'static str,
        /// The attribute's type.
        dtype: DataType,
    },
    /// A modify that changes nothing, or changes the key.
    #[error("class {class}: a modify must change at least one attribute and never the key")]
    BadModify {
        /// The class's position.
        class: usize,
    },
    /// A number that must be positive and finite is not (`object_bytes`,
    /// `results`, `range_fraction`, a `distinct` count).
    #[error("{what} must be a positive finite number (within its range), not {value}")]
    BadNumber {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: f64,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    space: String,
    objects: u64,
    classes: Vec<RawClass>,
    #[serde(default)]
    object_bytes: Option<f64>,
    #[serde(default)]
    index_entry_bytes: Option<f64>,
    #[serde(default)]
    global_entry_bytes: BTreeMap<String, f64>,
    #[serde(default)]
    distinct: BTreeMap<String, u64>,
    #[serde(default)]
    range_fraction: Option<f64>,
    #[serde(default)]
    churn_horizon_s: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    p: f64,
    #[serde(default)]
    search: Option<BTreeMap<String, String>>,
    #[serde(default)]
    get: Option<bool>,
    #[serde(default)]
    modify: Option<Vec<String>>,
    #[serde(default)]
    insert: Option<bool>,
    #[serde(default)]
    results: Option<f64>,
    #[serde(default)]
    range_fraction: Option<f64>,
}

/// How the workload in `text` names its space, without validating the
/// rest: a caller that gets a name fetches the description first.
pub fn space_ref(text: &str) -> Result<SpaceRef, ParseWorkloadError> {
    let raw: RawWorkload = serde_json::from_str(text).map_err(ParseWorkloadError::Json)?;
    Ok(classify_space(&raw.space))
}

/// A description has clauses; a name is one word.
fn classify_space(space: &str) -> SpaceRef {
    let trimmed = space.trim();
    if trimmed.split_whitespace().count() > 1 {
        SpaceRef::Description(trimmed.to_string())
    } else {
        SpaceRef::Name(trimmed.to_string())
    }
}

/// Parses and validates the workload in `text`. `given` is the space's
/// description when it comes from elsewhere (a file, the cluster); the
/// workload's own `space` must then name the same space.
pub fn parse_workload(
    text: &str,
    given: Option<&SpaceDesc>,
) -> Result<Workload, ParseWorkloadError> {
    let raw: RawWorkload = serde_json::from_str(text).map_err(ParseWorkloadError::Json)?;
    let space = resolve_space(&raw.space, given)?;
    if raw.objects == 0 {
        return Err(ParseWorkloadError::NoObjects);
    }
    if raw.classes.is_empty() {
        return Err(ParseWorkloadError::NoClasses);
    }
    let object_bytes = raw
        .object_bytes
        .map(|b| positive("object_bytes", b))
        .transpose()?;
    let index_entry_bytes = raw
        .index_entry_bytes
        .map(|b| positive("index_entry_bytes", b))
        .transpose()?;
    let range_fraction = raw.range_fraction.map(fraction).transpose()?;
    let churn_horizon_s = raw
        .churn_horizon_s
        .map(|h| positive("churn_horizon_s", h))
        .transpose()?;
    let mut distinct = BTreeMap::new();
    for (name, &n) in &raw.distinct {
        let attr = attribute(&space, raw.classes.len(), name)?;
        if n == 0 {
            return Err(ParseWorkloadError::BadNumber {
                what: "a distinct count",
                value: 0.0,
            });
        }
        distinct.insert(attr, n);
    }
    let mut global_entry_bytes = BTreeMap::new();
    for (name, &bytes) in &raw.global_entry_bytes {
        let attr = attribute(&space, raw.classes.len(), name)?;
        global_entry_bytes.insert(attr, positive("global_entry_bytes", bytes)?);
    }
    let classes = raw
        .classes
        .iter()
        .enumerate()
        .map(|(i, c)| parse_class(&space, i, c))
        .collect::<Result<Vec<Class>, ParseWorkloadError>>()?;
    let sum: f64 = classes.iter().map(|c| c.p).sum();
    if (sum - 1.0).abs() > P_SUM_TOLERANCE {
        return Err(ParseWorkloadError::ProbabilitySum { sum });
    }
    Ok(Workload {
        space,
        objects: raw.objects,
        classes,
        object_bytes,
        index_entry_bytes,
        global_entry_bytes,
        distinct,
        range_fraction,
        churn_horizon_s,
        global_indexlets: BTreeMap::new(),
    })
}

fn resolve_space(
    written: &str,
    given: Option<&SpaceDesc>,
) -> Result<SpaceDesc, ParseWorkloadError> {
    let (name, parsed) = match classify_space(written) {
        SpaceRef::Name(name) => (name, None),
        SpaceRef::Description(text) => {
            let desc = parse_space(&text).map_err(ParseWorkloadError::Space)?;
            (desc.name.clone(), Some(desc))
        }
    };
    match (given, parsed) {
        (Some(given), _) if given.name != name => Err(ParseWorkloadError::SpaceMismatch {
            workload: name,
            given: given.name.clone(),
        }),
        (Some(given), _) => Ok(given.clone()),
        (None, Some(desc)) => Ok(desc),
        (None, None) => Err(ParseWorkloadError::SpaceNeeded { name }),
    }
}

fn parse_class(space: &SpaceDesc, i: usize, raw: &RawClass) -> Result<Class, ParseWorkloadError> {
    if !(0.0..=1.0).contains(&raw.p) {
        return Err(ParseWorkloadError::BadProbability { class: i, p: raw.p });
    }
    let kinds = usize::from(raw.search.is_some())
        + usize::from(raw.get == Some(true))
        + usize::from(raw.modify.is_some())
        + usize::from(raw.insert == Some(true));
    if kinds != 1 || raw.get == Some(false) || raw.insert == Some(false) {
        return Err(ParseWorkloadError::ClassKind { class: i });
    }
    let kind = if let Some(search) = &raw.search {
        let mut checks = Vec::with_capacity(search.len());
        for (name, op) in search {
            let attr = attribute(space, i, name)?;
            let op = match op.as_str() {
                "eq" => SearchOp::Eq,
                "range" => SearchOp::Range,
                "regex" => SearchOp::Regex,
                _ => {
                    return Err(ParseWorkloadError::BadOperator {
                        class: i,
                        attr: name.clone(),
                        op: op.clone(),
                    })
                }
            };
            let dtype = space.attrs[attr].dtype;
            if !operator_applies(op, dtype) {
                return Err(ParseWorkloadError::OperatorType {
                    class: i,
                    attr: name.clone(),
                    op: op.name(),
                    dtype,
                });
            }
            checks.push((attr, op));
        }
        checks.sort_unstable();
        ClassKind::Search(Search {
            checks,
            results: raw
                .results
                .map(|r| non_negative("results", r))
                .transpose()?,
            range_fraction: raw.range_fraction.map(fraction).transpose()?,
        })
    } else if let Some(modify) = &raw.modify {
        let mut attrs = modify
            .iter()
            .map(|name| attribute(space, i, name))
            .collect::<Result<Vec<usize>, ParseWorkloadError>>()?;
        attrs.sort_unstable();
        attrs.dedup();
        if attrs.is_empty() || attrs.contains(&0) {
            return Err(ParseWorkloadError::BadModify { class: i });
        }
        ClassKind::Modify(attrs)
    } else if raw.get == Some(true) {
        ClassKind::Get
    } else {
        ClassKind::Insert
    };
    if raw.results.is_some() || raw.range_fraction.is_some() {
        // Only a search returns objects or has ranges.
        if !matches!(kind, ClassKind::Search(_)) {
            return Err(ParseWorkloadError::ClassKind { class: i });
        }
    }
    Ok(Class { p: raw.p, kind })
}

/// Whether a search may specify an attribute of type `dtype` with `op`
/// (API.md §3: ranges on strings and numbers, regexes on strings).
pub(crate) fn operator_applies(op: SearchOp, dtype: DataType) -> bool {
    match op {
        SearchOp::Eq => true,
        SearchOp::Range => dtype.is_hashable(),
        SearchOp::Regex => dtype == DataType::String,
    }
}

fn attribute(space: &SpaceDesc, class: usize, name: &str) -> Result<usize, ParseWorkloadError> {
    space
        .attr_index(name)
        .ok_or_else(|| ParseWorkloadError::UnknownAttribute {
            class,
            space: space.name.clone(),
            name: name.to_string(),
        })
}

fn positive(what: &'static str, value: f64) -> Result<f64, ParseWorkloadError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ParseWorkloadError::BadNumber { what, value })
    }
}

fn non_negative(what: &'static str, value: f64) -> Result<f64, ParseWorkloadError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ParseWorkloadError::BadNumber { what, value })
    }
}

fn fraction(value: f64) -> Result<f64, ParseWorkloadError> {
    if value.is_finite() && value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(ParseWorkloadError::BadNumber {
            what: "range_fraction",
            value,
        })
    }
}

impl Workload {
    /// The non-key attributes some search specifies in a way that can
    /// narrow a subspace or a local index (equality on a hashable type, a
    /// range on an ordered one), ascending: what the thesis calls the
    /// workload's attribute set, and what candidate parts are made of.
    pub fn narrowing_attrs(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .searches()
            .flat_map(|(_, s)| s.checks.iter())
            .filter(|&&(a, op)| a != 0 && narrows(&self.space, a, op))
            .map(|&(a, _)| a)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The search classes with their probabilities.
    pub fn searches(&self) -> impl Iterator<Item = (f64, &Search)> {
        self.classes.iter().filter_map(|c| match &c.kind {
            ClassKind::Search(s) => Some((c.p, s)),
            _ => None,
        })
    }
}

/// Whether `op` on attribute `attr` can confine it to part of its axis:
/// equality on a hashable type, or a range on an ordered one (strings hash,
/// so their ranges do not narrow; `types::interval`).
pub fn narrows(space: &SpaceDesc, attr: usize, op: SearchOp) -> bool {
    let dtype = space.attrs[attr].dtype;
    match op {
        SearchOp::Eq => dtype.is_hashable(),
        SearchOp::Range => ordered(dtype),
        SearchOp::Regex => false,
    }
}

/// Whether coordinates of `dtype` preserve its order.
pub fn ordered(dtype: DataType) -> bool {
    matches!(
        dtype,
        DataType::Int | DataType::Float | DataType::Timestamp(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPACE: &str =
        "space hotels key id attributes string city, string name, int stars, int price, list(string) tags";

    fn workload(classes: &str) -> String {
        format!(r#"{{"space": "{SPACE}", "objects": 1000, "classes": [{classes}]}}"#)
    }

    #[test]
    fn the_api_example_parses_into_its_classes() {
        let text = r#"{"space": "space hotels key id attributes string city, string name, int stars, int price",
         "objects": 100000,
         "classes": [
           {"p": 0.45, "search": {"city": "eq"}},
           {"p": 0.15, "search": {"stars": "eq", "price": "range"}},
           {"p": 0.10, "get": true},
           {"p": 0.20, "modify": ["price"]},
           {"p": 0.10, "insert": true}]}"#;
        let w = parse_workload(text, None).expect("valid");
        assert_eq!(w.objects, 100_000);
        assert_eq!(w.space.name, "hotels");
        let kinds: Vec<ClassKind> = w.classes.iter().map(|c| c.kind.clone()).collect();
        let search = |checks: Vec<(usize, SearchOp)>| {
            ClassKind::Search(Search {
                checks,
                results: None,
                range_fraction: None,
            })
        };
        assert_eq!(
            kinds,
            vec![
                search(vec![(1, SearchOp::Eq)]),
                search(vec![(3, SearchOp::Eq), (4, SearchOp::Range)]),
                ClassKind::Get,
                ClassKind::Modify(vec![4]),
                ClassKind::Insert,
            ]
        );
        assert_eq!(w.narrowing_attrs(), vec![1, 3, 4]);
    }

    #[test]
    fn refusals_name_their_cause() {
        let err = |classes: &str| parse_workload(&workload(classes), None).unwrap_err();
        assert!(matches!(
            err(r#"{"p": 1, "search": {"town": "eq"}}"#),
            ParseWorkloadError::UnknownAttribute { class: 0, ref name, .. } if name == "town"
        ));
        assert!(matches!(
            err(r#"{"p": 0.5, "get": true}, {"p": 0.4, "insert": true}"#),
            ParseWorkloadError::ProbabilitySum { sum } if (sum - 0.9).abs() < 1e-12
        ));
        assert!(matches!(
            err(r#"{"p": 1, "search": {"city": "like"}}"#),
            ParseWorkloadError::BadOperator { ref op, .. } if op == "like"
        ));
        assert!(matches!(
            err(r#"{"p": 1, "search": {"price": "regex"}}"#),
            ParseWorkloadError::OperatorType { op: "regex", .. }
        ));
        assert!(matches!(
            err(r#"{"p": 1, "search": {"tags": "range"}}"#),
            ParseWorkloadError::OperatorType { op: "range", .. }
        ));
        assert!(matches!(
            err(r#"{"p": 1, "get": true, "insert": true}"#),
            ParseWorkloadError::ClassKind { class: 0 }
        ));
        assert!(matches!(
            err(r#"{"p": 1, "modify": ["id"]}"#),
            ParseWorkloadError::BadModify { class: 0 }
        ));
        assert!(matches!(
            err(r#"{"p": 1.5, "get": true}"#),
            ParseWorkloadError::BadProbability { class: 0, .. }
        ));
        assert!(matches!(
            err(r#"{"p": 1, "get": true, "weight": 2}"#),
            ParseWorkloadError::Json(_)
        ));
        assert!(matches!(err(""), ParseWorkloadError::NoClasses));
        assert!(matches!(
            parse_workload(
                r#"{"space": "space x key", "objects": 1, "classes": []}"#,
                None
            ),
            Err(ParseWorkloadError::Space(_))
        ));
        // A file with one more top-level number.
        let with = |field: &str, n: &str| {
            parse_workload(
                &format!(
                    r#"{{"space": "space x key k attributes int a", "objects": 1, "{field}": {n},
                        "classes": [{{"p": 1, "get": true}}]}}"#
                ),
                None,
            )
        };
        for (field, bad) in [("churn_horizon_s", "0"), ("index_entry_bytes", "-3")] {
            assert!(
                matches!(
                    with(field, bad),
                    Err(ParseWorkloadError::BadNumber { what, .. }) if what == field
                ),
                "{field} {bad}"
            );
        }
        let horizon = with("churn_horizon_s", "2.5").unwrap();
        assert_eq!(horizon.churn_horizon_s, Some(2.5));
        let entry = with("index_entry_bytes", "30").unwrap();
        assert_eq!(entry.index_entry_bytes, Some(30.0));
        let global = with("global_entry_bytes", r#"{"a": 40}"#).unwrap();
        assert_eq!(global.global_entry_bytes, BTreeMap::from([(1, 40.0)]));
        assert!(matches!(
            with("global_entry_bytes", r#"{"a": 0}"#),
            Err(ParseWorkloadError::BadNumber {
                what: "global_entry_bytes",
                ..
            })
        ));
        assert!(matches!(
            with("global_entry_bytes", r#"{"b": 40}"#),
            Err(ParseWorkloadError::UnknownAttribute { .. })
        ));
    }

    #[test]
    fn a_named_space_needs_its_description_and_must_match_it() {
        let text = r#"{"space": "hotels", "objects": 5, "classes": [{"p": 1, "get": true}]}"#;
        assert_eq!(space_ref(text).unwrap(), SpaceRef::Name("hotels".into()));
        assert!(matches!(
            parse_workload(text, None),
            Err(ParseWorkloadError::SpaceNeeded { ref name }) if name == "hotels"
        ));
        let desc = parse_space(SPACE).unwrap();
        assert_eq!(parse_workload(text, Some(&desc)).unwrap().space, desc);
        let other = parse_space("space motels key id").unwrap();
        assert!(matches!(
            parse_workload(text, Some(&other)),
            Err(ParseWorkloadError::SpaceMismatch { .. })
        ));
    }
}
