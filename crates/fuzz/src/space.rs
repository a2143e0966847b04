//! Target `space`: text given to `add-space` / `validate-space`, through
//! `parse_space`.
//!
//! Checks: no panic; an accepted description formats (`format_space`) to
//! text that parses to an equal description, also on one line; a refusal
//! names a line and column inside the text or just past its end.

use crate::runner::{outcome_of, Outcome, Target};
use crate::samples;
use tessera_types::{format_space, parse_space};

pub const TARGET: Target = Target {
    name: "space",
    about: "parse_space; accepted text formats and parses back equal, errors point into the text",
    seeds,
    dictionary: DICTIONARY,
    input_bytes_max: 1024,
    run,
};

/// The language's keywords and punctuation, and numbers at the edges of
/// what the options accept.
const DICTIONARY: &[&[u8]] = &[
    b" space ",
    b" key ",
    b" attribute ",
    b" attributes ",
    b" subspace ",
    b" index ",
    b" create ",
    b" partition ",
    b" partitions ",
    b" tolerate ",
    b" failure ",
    b" failures ",
    b" with ",
    b" authorization ",
    b" string ",
    b" int ",
    b" int64 ",
    b" float ",
    b" document ",
    b" timestamp(second) ",
    b"timestamp",
    b"(",
    b")",
    b",",
    b" list(int) ",
    b" set(string) ",
    b" map(string, float) ",
    b"map(",
    b"week",
    b"month",
    b"#",
    b"\n",
    b"\r\n",
    b"\t",
    b" __x ",
    b" _ ",
    b" 0 ",
    b" 1 ",
    b" 65536 ",
    b" 65537 ",
    b" 4294967295 ",
    b" 4294967296 ",
    b"\xc3\xa9",
];

fn run(data: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(data);
    let parsed = parse_space(&text);
    match &parsed {
        Ok(desc) => {
            let formatted = format_space(desc);
            let again = parse_space(&formatted)
                .unwrap_or_else(|e| panic!("formatted text refused: {e}\n{formatted}"));
            assert_eq!(&again, desc, "format/parse changed the description");
            let one_line = parse_space(&formatted.replace('\n', " "))
                .unwrap_or_else(|e| panic!("one-line text refused: {e}"));
            assert_eq!(&one_line, desc, "newlines changed the description");
        }
        Err(e) => {
            let lines: Vec<&str> = text.split('\n').collect();
            assert!(
                (1..=lines.len()).contains(&e.line),
                "error line {} outside {} lines",
                e.line,
                lines.len()
            );
            let columns = lines[e.line - 1].chars().count() + 1;
            assert!(
                (1..=columns).contains(&e.column),
                "error column {} outside line {} of {} characters",
                e.column,
                e.line,
                columns - 1
            );
        }
    }
    outcome_of(&parsed)
}

fn seeds() -> Vec<Vec<u8>> {
    samples::texts(&[
        "space kv key k attributes v",
        "space phonebook key username attributes first, last, int phone subspace\n\
         first, last, phone create 8 partitions tolerate 2 failures",
        "space s key int k attributes a, float b subspace b index a with authorization",
        "space s key k create 1 partition tolerate 0 failures",
        "# every type\nspace all key int64 id\nattribute string s,\n  int i, float f, document d,\n\
         timestamp(month) t, list(string) ls, set(int) si, map(string, float) msf\n\
         subspace s, i\nsubspace t\nindex f\nindex ls # comment\n",
        "space t\tkey timestamp(week) when\r\nattributes map(int,int) m, set(float) sf create 65536 partitions",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_parses() {
        for seed in seeds() {
            let text = String::from_utf8(seed).expect("seeds are text");
            assert!(parse_space(&text).is_ok(), "{text}");
        }
    }

    #[test]
    fn a_refusal_is_an_outcome_not_a_crash() {
        let outcome = run(b"space s key k create 0 partitions");
        assert!(!outcome.accepted);
    }
}
