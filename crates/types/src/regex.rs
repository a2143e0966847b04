//! The minimal regex dialect of API.md §6.3, run without backtracking.

/// One element of a compiled pattern.
#[derive(Clone, Copy, Debug)]
enum Atom {
    /// `.`: any byte.
    Any,
    Byte(u8),
}

/// Whether `pattern` (API.md §6.3) matches somewhere in `text`.
///
/// The dialect: literal bytes; `.` any byte; `c*` zero or more of the single
/// preceding byte or `.`; `^` as the first byte anchors at the start; `$` as
/// the last byte anchors at the end; `\x` is the byte `x` literally. Without
/// `^` a match may start anywhere; an empty pattern matches everything.
/// Nothing is an error: `^` elsewhere, `$` elsewhere, a `*` with nothing
/// before it, and a trailing lone `\` are literal bytes, and `**` is the same
/// as `*`.
///
/// Runs in `O(len(text) · len(pattern))` by simulating the pattern's
/// automaton on a set of states (no backtracking).
pub fn regex_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (anchored_start, anchored_end, items) = compile_regex(pattern);
    let m = items.len();
    // active[i]: the first i items have matched the text read so far.
    let mut active = vec![false; m + 1];
    let closure = |set: &mut Vec<bool>| {
        // A starred item may match zero times: state i reaches i + 1.
        for i in 0..m {
            if set[i] && items[i].1 {
                set[i + 1] = true;
            }
        }
    };
    active[0] = true;
    closure(&mut active);
    for (pos, &b) in text.iter().enumerate() {
        if active[m] && !anchored_end {
            return true;
        }
        let mut next = vec![false; m + 1];
        for i in 0..m {
            if !active[i] {
                continue;
            }
            let (atom, star) = items[i];
            let hit = match atom {
                Atom::Any => true,
                Atom::Byte(c) => c == b,
            };
            if hit {
                next[if star { i } else { i + 1 }] = true;
            }
        }
        if !anchored_start {
            // An unanchored match may begin after this byte.
            next[0] = true;
        }
        closure(&mut next);
        active = next;
        if pos + 1 == text.len() {
            break;
        }
    }
    active[m]
}

/// Splits a pattern into its anchors and `(atom, starred)` items.
fn compile_regex(pattern: &[u8]) -> (bool, bool, Vec<(Atom, bool)>) {
    let mut body = pattern;
    let anchored_start = body.first() == Some(&b'^');
    if anchored_start {
        body = &body[1..];
    }
    // A final `$` anchors unless it is escaped (an odd run of `\` before it).
    let mut anchored_end = false;
    if body.last() == Some(&b'$') {
        let backslashes = body[..body.len() - 1]
            .iter()
            .rev()
            .take_while(|&&c| c == b'\\')
            .count();
        if backslashes % 2 == 0 {
            anchored_end = true;
            body = &body[..body.len() - 1];
        }
    }
    let mut items: Vec<(Atom, bool)> = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        match c {
            b'\\' if i + 1 < body.len() => {
                items.push((Atom::Byte(body[i + 1]), false));
                i += 2;
                continue;
            }
            b'*' => match items.last_mut() {
                Some(last) => last.1 = true,
                None => items.push((Atom::Byte(b'*'), false)),
            },
            b'.' => items.push((Atom::Any, false)),
            _ => items.push((Atom::Byte(c), false)),
        }
        i += 1;
    }
    (anchored_start, anchored_end, items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn regex_dialect_table() {
        // (pattern, text, expected) — from the dialect's definition.
        let table: &[(&str, &str, bool)] = &[
            ("", "", true),
            ("", "anything", true),
            ("abc", "abc", true),
            ("abc", "xxabcxx", true),
            ("abc", "ab", false),
            ("abc", "acb", false),
            ("^ab", "abc", true),
            ("^ab", "cab", false),
            ("bc$", "abc", true),
            ("bc$", "abcd", false),
            ("^abc$", "abc", true),
            ("^abc$", "abcc", false),
            ("^$", "", true),
            ("^$", "a", false),
            ("$", "abc", true),
            ("^", "", true),
            ("a.c", "abc", true),
            ("a.c", "ac", false),
            ("a.c", "a\nc", true),
            ("ab*c", "ac", true),
            ("ab*c", "abbbbc", true),
            ("ab*c", "abxc", false),
            ("^a.*z$", "a123z", true),
            ("^a.*z$", "a123zq", false),
            ("^a*$", "", true),
            ("^a*$", "aaab", false),
            ("a\\.c", "a.c", true),
            ("a\\.c", "abc", false),
            ("a\\*", "a*", true),
            ("a\\*", "aaa", false),
            ("\\^a", "b^a", true),
            ("a^", "ba^", true),
            ("a$b", "a$b", true),
            ("a\\$", "a$", true),
            ("a\\$", "a", false),
            ("a\\\\$", "a\\", true),
            ("*a", "*a", true),
            ("*a", "a", false),
            ("x\\", "x\\", true),
            ("a**", "", true),
            ("^.*$", "anything", true),
            ("^.", "", false),
            ("b*", "", true),
            ("^ab*$", "a", true),
            ("a+", "aa", false),
            ("a+", "a+", true),
            ("[a]", "a", false),
            ("[a]", "[a]", true),
            ("aab", "aaab", true),
            (
                "^.*.*.*.*b$",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac",
                false,
            ),
        ];
        for (pattern, text, expected) in table {
            assert_eq!(
                regex_matches(pattern.as_bytes(), text.as_bytes()),
                *expected,
                "pattern {pattern:?} on {text:?}"
            );
        }
        assert!(regex_matches(b"a.b", b"a\x00b"));
        assert!(regex_matches(b"\xff", b"x\xffy"));
    }

    /// A brute-force reference for the dialect: backtracking over the
    /// compiled items at every start position.
    fn reference_match(pattern: &[u8], text: &[u8]) -> bool {
        fn here(items: &[(Atom, bool)], text: &[u8], end: bool) -> bool {
            match items.split_first() {
                None => !end || text.is_empty(),
                Some((&(atom, star), rest)) => {
                    let hit = |b: u8| match atom {
                        Atom::Any => true,
                        Atom::Byte(c) => c == b,
                    };
                    if star {
                        let mut i = 0;
                        loop {
                            if here(rest, &text[i..], end) {
                                return true;
                            }
                            if i < text.len() && hit(text[i]) {
                                i += 1;
                            } else {
                                return false;
                            }
                        }
                    } else {
                        !text.is_empty() && hit(text[0]) && here(rest, &text[1..], end)
                    }
                }
            }
        }
        let (start, end, items) = compile_regex(pattern);
        if start {
            return here(&items, text, end);
        }
        (0..=text.len()).any(|i| here(&items, &text[i..], end))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn regex_agrees_with_backtracking_reference(
            pattern in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'.'), Just(b'*'), Just(b'^'), Just(b'$'), Just(b'\\')], 0..7),
            text in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'*'), Just(b'$')], 0..8),
        ) {
            prop_assert_eq!(regex_matches(&pattern, &text), reference_match(&pattern, &text));
        }
    }
}
