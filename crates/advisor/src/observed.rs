//! Observed workloads (issue 14, point 3): what the daemons counted of a
//! space, turned into a [`Workload`].
//!
//! Every daemon counts the shapes of the operations it serves, each
//! operation once in the cluster, and shows them on its metrics page as
//! `tessera_daemon_op_shapes_total{space, kind, shape}` (the daemon's
//! `shapes` module). `kind` is `search`, `get`, `insert`, `modify` or
//! `delete`; `shape` is a search's checked attributes with their classes
//! (`city:eq,price:range`; classes `eq`, `range`, `regex`, `other`), a
//! modify's changed attributes (`price,stars`), empty otherwise, or `*`
//! for shapes beyond the daemon's bound. [`Observed`] adds up the samples
//! of every daemon; [`observed_workload`] makes the classes:
//!
//! - one class per distinct shape, with probability count / total;
//! - a check of class `other` (lengths, `contains`) narrows nothing the
//!   model knows and is left out of its search class (classes that become
//!   equal merge);
//! - a delete is priced as an insert: both write one region of every
//!   subspace and every index entry of the object;
//! - `*` shapes, unknown kinds and unknown attributes are not modelled:
//!   they are reported beside the workload, and the probabilities are over
//!   the modelled operations.
//!
//! The object count is not observed; the caller gives it.

use crate::workload::{operator_applies, Class, ClassKind, Search, SearchOp, Workload};
use std::collections::BTreeMap;
use tessera_types::SpaceDesc;
use thiserror::Error;

/// The metric the daemons count shapes under.
pub const OP_SHAPES_METRIC: &str = "tessera_daemon_op_shapes_total";

/// The shape label of operations beyond the daemons' bound of shapes.
pub const OVERFLOW_SHAPE: &str = "*";

/// A kind and a shape, as the daemons label them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShapeLabel {
    /// `search`, `get`, `insert`, `modify` or `delete`.
    pub kind: String,
    /// The shape within its kind (see the module docs).
    pub shape: String,
}

/// The counts of one space, added up over daemons.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Operations by kind and shape.
    pub counts: BTreeMap<ShapeLabel, u64>,
}

/// Why observed counts could not be read or make no workload.
#[derive(Debug, Error)]
pub enum ObservedError {
    /// A sample's labels are not `name="value"` pairs.
    #[error("cannot read the labels {0:?}")]
    Labels(String),
    /// A sample lacks the `kind` or `shape` label, or its value is not a
    /// count.
    #[error("the sample {labels:?} {value} is not a shape count")]
    Sample {
        /// Its labels.
        labels: String,
        /// Its value.
        value: f64,
    },
    /// No operation the model prices was counted.
    #[error("no modelled operation on space {space:?} was counted yet")]
    Nothing {
        /// The space.
        space: String,
    },
    /// The object count is 0.
    #[error("a workload needs at least one object")]
    NoObjects,
}

/// Reads Prometheus labels `a="x",b="y"` (with `\"`, `\\` and `\n`
/// escapes) into pairs.
pub fn parse_labels(text: &str) -> Result<Vec<(String, String)>, ObservedError> {
    let bad = || ObservedError::Labels(text.to_string());
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=').ok_or_else(bad)?;
        let mut chars = after.strip_prefix('"').ok_or_else(bad)?.char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next().ok_or_else(bad)? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or_else(bad)?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        pairs.push((name.trim().to_string(), value));
        // `end` indexes the closing quote within `after` past its opening one.
        rest = after[end + 2..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(pairs)
}

impl Observed {
    /// Adds one sample of [`OP_SHAPES_METRIC`] with `labels` (the text
    /// between the braces) when it is of space `space`.
    pub fn add_sample(
        &mut self,
        space: &str,
        labels: &str,
        value: f64,
    ) -> Result<(), ObservedError> {
        let pairs = parse_labels(labels)?;
        let get = |name: &str| pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        if get("space").map(String::as_str) != Some(space) {
            return Ok(());
        }
        let sample = || ObservedError::Sample {
            labels: labels.to_string(),
            value,
        };
        let (Some(kind), Some(shape)) = (get("kind"), get("shape")) else {
            return Err(sample());
        };
        if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0) {
            return Err(sample());
        }
        let label = ShapeLabel {
            kind: kind.clone(),
            shape: shape.clone(),
        };
        // Counts are far below 2^53, so the float holds them exactly.
        *self.counts.entry(label).or_default() += value as u64;
        Ok(())
    }

    /// All operations counted.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

/// A workload made of observed counts.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedWorkload {
    /// The workload; its classes in the order of `counts`.
    pub workload: Workload,
    /// The operations behind each class.
    pub counts: Vec<u64>,
    /// Shapes left out, with their counts and why.
    pub unmodelled: Vec<(ShapeLabel, u64, &'static str)>,
}

/// A class before its probability is known; ordered so that the classes
/// come out in a fixed order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Search(Vec<(usize, SearchOp)>),
    Get,
    Modify(Vec<usize>),
    Insert,
}

/// The class a counted shape belongs to, or why it has none.
fn class_of(space: &SpaceDesc, label: &ShapeLabel) -> Result<Key, &'static str> {
    if label.shape == OVERFLOW_SHAPE {
        return Err("beyond the daemons' bound of distinct shapes");
    }
    let attr = |name: &str| space.attr_index(name).ok_or("an attribute the space lacks");
    let items = || label.shape.split(',').filter(|s| !s.is_empty());
    match label.kind.as_str() {
        "search" => {
            let mut checks = Vec::new();
            for item in items() {
                let (name, class) = item.split_once(':').ok_or("not attr:class")?;
                let a = attr(name)?;
                let op = match class {
                    "eq" => SearchOp::Eq,
                    "range" => SearchOp::Range,
                    "regex" => SearchOp::Regex,
                    "other" => continue,
                    _ => return Err("an unknown check class"),
                };
                if operator_applies(op, space.attrs[a].dtype) {
                    checks.push((a, op));
                }
            }
            checks.sort_unstable();
            Ok(Key::Search(checks))
        }
        "get" => Ok(Key::Get),
        "insert" | "delete" => Ok(Key::Insert),
        "modify" => {
            let mut attrs = items()
                .map(attr)
                .collect::<Result<Vec<usize>, &'static str>>()?;
            // The key never changes; a put naming it rewrites its value.
            attrs.retain(|&a| a != 0);
            attrs.sort_unstable();
            attrs.dedup();
            Ok(Key::Modify(attrs))
        }
        _ => Err("an unknown kind"),
    }
}

/// The workload of `observed` on `space` with `objects` objects (see the
/// module docs for the rules).
pub fn observed_workload(
    observed: &Observed,
    space: &SpaceDesc,
    objects: u64,
) -> Result<ObservedWorkload, ObservedError> {
    if objects == 0 {
        return Err(ObservedError::NoObjects);
    }
    let mut classes: BTreeMap<Key, u64> = BTreeMap::new();
    let mut unmodelled = Vec::new();
    for (label, &n) in observed.counts.iter().filter(|(_, &n)| n > 0) {
        match class_of(space, label) {
            Ok(key) => *classes.entry(key).or_default() += n,
            Err(why) => unmodelled.push((label.clone(), n, why)),
        }
    }
    let total: u64 = classes.values().sum();
    if total == 0 {
        return Err(ObservedError::Nothing {
            space: space.name.clone(),
        });
    }
    let (classes, counts): (Vec<Class>, Vec<u64>) = classes
        .into_iter()
        .map(|(key, n)| {
            let kind = match key {
                Key::Search(checks) => ClassKind::Search(Search {
                    checks,
                    results: None,
                    range_fraction: None,
                }),
                Key::Get => ClassKind::Get,
                Key::Modify(attrs) => ClassKind::Modify(attrs),
                Key::Insert => ClassKind::Insert,
            };
            let p = n as f64 / total as f64;
            (Class { p, kind }, n)
        })
        .unzip();
    Ok(ObservedWorkload {
        workload: Workload {
            space: space.clone(),
            objects,
            classes,
            object_bytes: None,
            index_entry_bytes: None,
            global_entry_bytes: BTreeMap::new(),
            distinct: BTreeMap::new(),
            range_fraction: None,
            churn_horizon_s: None,
            global_indexlets: BTreeMap::new(),
        },
        counts,
        unmodelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    const SPACE: &str = "space hotels key id attributes string city, int price, list(string) tags";

    fn observed(samples: &[&str]) -> Observed {
        let mut o = Observed::default();
        for s in samples {
            let (labels, value) = s.rsplit_once(' ').unwrap();
            o.add_sample("hotels", labels, value.parse().unwrap())
                .expect("a shape sample");
        }
        o
    }

    #[test]
    fn labels_are_read_with_their_escapes() {
        assert_eq!(
            parse_labels(r#"space="a\"b",kind="search", shape="x:eq,y:range""#).unwrap(),
            vec![
                ("space".to_string(), "a\"b".to_string()),
                ("kind".to_string(), "search".to_string()),
                ("shape".to_string(), "x:eq,y:range".to_string()),
            ]
        );
        assert!(parse_labels("").unwrap().is_empty());
        for bad in [r#"space="a"#, "space=a", r#"space"#, r#"a="\"#] {
            assert!(
                matches!(parse_labels(bad), Err(ObservedError::Labels(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn counts_of_every_daemon_add_up_to_class_probabilities() {
        let o = observed(&[
            r#"space="hotels",kind="search",shape="city:eq" 50"#,
            r#"space="hotels",kind="search",shape="city:eq" 20"#,
            r#"space="motels",kind="search",shape="city:eq" 1000"#,
            r#"space="hotels",kind="search",shape="city:eq,tags:other" 10"#,
            r#"space="hotels",kind="search",shape="price:range" 40"#,
            r#"space="hotels",kind="get",shape="" 30"#,
            r#"space="hotels",kind="insert",shape="" 25"#,
            r#"space="hotels",kind="delete",shape="" 5"#,
            r#"space="hotels",kind="modify",shape="price" 20"#,
            r#"space="hotels",kind="modify",shape="*" 7"#,
            r#"space="hotels",kind="search",shape="stars:eq" 3"#,
        ]);
        assert_eq!(o.total(), 50 + 20 + 10 + 40 + 30 + 25 + 5 + 20 + 7 + 3);
        let space = parse_space(SPACE).unwrap();
        let w = observed_workload(&o, &space, 1000).expect("a workload");
        let got: Vec<(ClassKind, u64)> = w
            .workload
            .classes
            .iter()
            .map(|c| c.kind.clone())
            .zip(w.counts.iter().copied())
            .collect();
        let search = |checks| {
            ClassKind::Search(Search {
                checks,
                results: None,
                range_fraction: None,
            })
        };
        // The `other` check on tags drops, so its class merges with
        // city:eq; deletes join inserts.
        assert_eq!(
            got,
            vec![
                (search(vec![(1, SearchOp::Eq)]), 80),
                (search(vec![(2, SearchOp::Range)]), 40),
                (ClassKind::Get, 30),
                (ClassKind::Modify(vec![2]), 20),
                (ClassKind::Insert, 30),
            ]
        );
        let modelled = 80 + 40 + 30 + 20 + 30;
        for (class, &n) in w.workload.classes.iter().zip(&w.counts) {
            assert_eq!(class.p, n as f64 / modelled as f64);
        }
        let sum: f64 = w.workload.classes.iter().map(|c| c.p).sum();
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
        let left: Vec<(&str, u64)> = w
            .unmodelled
            .iter()
            .map(|(l, n, _)| (l.shape.as_str(), *n))
            .collect();
        assert_eq!(left, vec![("*", 7), ("stars:eq", 3)]);
        assert_eq!(w.workload.objects, 1000);
    }

    #[test]
    fn a_workload_needs_counts_and_objects() {
        let space = parse_space(SPACE).unwrap();
        let only_overflow = observed(&[r#"space="hotels",kind="search",shape="*" 4"#]);
        assert!(matches!(
            observed_workload(&only_overflow, &space, 10),
            Err(ObservedError::Nothing { .. })
        ));
        let gets = observed(&[r#"space="hotels",kind="get",shape="" 4"#]);
        assert!(matches!(
            observed_workload(&gets, &space, 0),
            Err(ObservedError::NoObjects)
        ));
        let mut o = Observed::default();
        assert!(matches!(
            o.add_sample("hotels", r#"space="hotels",kind="get""#, 1.0),
            Err(ObservedError::Sample { .. })
        ));
        assert!(matches!(
            o.add_sample("hotels", r#"space="hotels",kind="get",shape="""#, 0.5),
            Err(ObservedError::Sample { .. })
        ));
    }
}
