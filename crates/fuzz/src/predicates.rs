//! Target `predicates`: the JSON a user types after `tessera search` or
//! `tessera count`, read the way the binary reads it (`json::parse`, then
//! `json::predicates_from_json` against the space's schema), then resolved
//! to checks and evaluated as a daemon would; the same text also goes
//! through the `put` and key readers (`attrs_from_json`, `key_from_arg`)
//! and the timestamp reader.
//!
//! Checks: no panic; every predicate names an attribute the JSON object
//! names; a timestamp that reads formats back to text that reads the same.

use crate::runner::{outcome_of, Outcome, Target};
use crate::samples;
use std::sync::OnceLock;
use tessera_cli::json;
use tessera_types::predicate::validate_check;
use tessera_types::value::split_attr_path;
use tessera_types::{coordinate_interval, Check, Object, SpaceDesc, Value};

pub const TARGET: Target = Target {
    name: "predicates",
    about: "the CLI's JSON predicates (and put attributes, keys, timestamps) against two schemas",
    seeds,
    dictionary: DICTIONARY,
    input_bytes_max: 1024,
    run,
};

const DICTIONARY: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\"",
    b"\\u0000",
    b"\\\"",
    b"null",
    b"true",
    b"-0",
    b"1e308",
    b"-9223372036854775808",
    b"18446744073709551616",
    b"0.5",
    b"\"eq\":",
    b"\"lt\":",
    b"\"le\":",
    b"\"gt\":",
    b"\"ge\":",
    b"\"regex\":",
    b"\"contains\":",
    b"\"len_eq\":",
    b"\"len_le\":",
    b"\"len_ge\":",
    b"\"s\":",
    b"\"n\":",
    b"\"f\":",
    b"\"t\":",
    b"\"d\":",
    b"\"l\":",
    b"\"m\":",
    b"\"d.a[0]\":",
    b"\"n.x\":",
    b"\"1970-01-01T00:00:00Z\"",
    b"\"9999-12-31T23:59:60.999999999+23:59\"",
    b".*",
    b"^$",
    b"\\\\",
];

/// The schemas the JSON is read against, each with objects to evaluate
/// checks on: the sample space (every type) and one with an int key and a
/// set, as in the CLI's own tests.
fn schemas() -> &'static [(SpaceDesc, Vec<Object>)] {
    static SCHEMAS: OnceLock<Vec<(SpaceDesc, Vec<Object>)>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let sample = vec![Object {
            values: vec![
                Value::str("key"),
                Value::Int(5),
                Value::Float(2.5),
                Value::Timestamp(86_400_000_000),
                Value::Document(r#"{"a":[1,"x",{"b":null}],"c":"text"}"#.into()),
                Value::List(vec![Value::Int(3), Value::Int(-1)]),
                Value::Map(vec![(Value::str("w"), Value::Float(0.5))]),
            ],
        }];
        let second = tessera_types::parse_space(
            "space t key int k attributes s, float f, set(int) ns, map(int, string) m, \
             document d, timestamp(second) ts",
        )
        .expect("a valid description");
        let second_objects = vec![Object {
            values: vec![
                Value::Int(1),
                Value::str("ab"),
                Value::Float(-1.0),
                Value::Set(vec![Value::Int(1), Value::Int(2)]),
                Value::Map(vec![(Value::Int(1), Value::str("one"))]),
                Value::Document("[]".into()),
                Value::Timestamp(-1),
            ],
        }];
        vec![(samples::space_desc(), sample), (second, second_objects)]
    })
}

fn run(data: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(data);
    if let Some(micros) = json::parse_rfc3339(&text) {
        let formatted = json::format_rfc3339(micros);
        assert_eq!(
            json::parse_rfc3339(&formatted),
            Some(micros),
            "{text:?} read as {micros}, written as {formatted:?}"
        );
    }
    let parsed = json::parse(&text);
    let outcome = outcome_of(&parsed);
    let Ok(value) = parsed else {
        return outcome;
    };
    let mut accepted = false;
    let mut feature = outcome.feature;
    for (desc, objects) in schemas() {
        let _ = json::key_from_arg(desc, &text);
        let _ = json::attrs_from_json(desc, &value);
        let predicates = json::predicates_from_json(desc, &value);
        if let Ok(predicates) = &predicates {
            let object = value.as_object().expect("predicates come from an object");
            for (name, op) in predicates {
                assert!(object.contains_key(name), "{name:?} is not in {value}");
                if let Some(check) = resolve(desc, name, op.clone()) {
                    evaluate(desc, &check, objects);
                }
            }
        }
        let this = outcome_of(&predicates);
        accepted |= this.accepted;
        feature = feature.rotate_left(11) ^ this.feature;
    }
    Outcome { accepted, feature }
}

/// The check a predicate on `name` becomes, as the client resolves it (an
/// attribute, or a path inside a document attribute); `None` for an
/// unknown attribute, which the client refuses.
fn resolve(desc: &SpaceDesc, name: &str, op: tessera_types::PredOp) -> Option<Check> {
    if let Some(attr) = desc.attr_index(name) {
        return Some(Check::new(attr, op));
    }
    let (attr, path) = split_attr_path(name)?;
    Some(Check::at_path(desc.attr_index(attr)?, path, op))
}

/// What a daemon does with a check: validates it, evaluates it on objects
/// and narrows its attribute's coordinates.
fn evaluate(desc: &SpaceDesc, check: &Check, objects: &[Object]) {
    if validate_check(desc, check).is_err() {
        return;
    }
    for object in objects {
        let _ = check.matches(object);
    }
    let _ = coordinate_interval(check, desc.attrs[check.attr].dtype);
}

fn seeds() -> Vec<Vec<u8>> {
    samples::texts(&[
        r#"{"s": "x"}"#,
        r#"{"n": {"ge": 1, "lt": 10}}"#,
        r#"{"f": {"gt": 0.5}, "t": {"le": "2024-05-01T12:00:00.5Z"}}"#,
        r#"{"t": {"eq": 1714564800000000}, "k": {"regex": "^ke.*y$"}}"#,
        r#"{"l": {"contains": 3, "len_ge": 1}, "m": {"len_le": 2}}"#,
        r#"{"d.a[1]": "x", "d.c": {"regex": "te.t"}}"#,
        r#"{"d": {"a": [1, "x", {"b": null}]}}"#,
        r#"{"ns": {"contains": 1}, "m": {"1": "one"}, "ts": {"ge": "2001-02-03t04:05:06-07:30"}}"#,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_reads_against_some_schema() {
        for seed in seeds() {
            let text = String::from_utf8(seed).expect("seeds are text");
            let value = json::parse(&text).expect("seeds are JSON");
            assert!(
                schemas()
                    .iter()
                    .any(|(d, _)| json::predicates_from_json(d, &value).is_ok()),
                "{text}"
            );
        }
    }

    #[test]
    fn an_unknown_attribute_is_refused_without_a_crash() {
        assert!(!run(br#"{"nope": 1}"#).accepted);
    }
}
