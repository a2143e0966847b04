//! Target `macaroon`: the binary macaroons a client's `auth=` carries, as
//! the daemon decodes them (`auth_macaroon::parse_binary`, v1 and v2) and
//! then verifies them against a secret.
//!
//! Checks: no panic, no oversized allocation, in decoding or in verifying
//! whatever decodes (hostile caveats and verification ids included); an
//! accepted macaroon re-encoded as v2 decodes to the same macaroon (not
//! to the same bytes: an empty location and none, or a varint with
//! redundant bytes, are the same token).

use crate::runner::{outcome_of, Outcome, Target};
use tessera_daemon::auth_macaroon::{mint, parse_binary, verify};

pub const TARGET: Target = Target {
    name: "macaroon",
    about: "auth_macaroon::parse_binary (v1, v2) and verify; re-encoding as v2 keeps the macaroon",
    seeds,
    dictionary: &[
        b"location ",
        b"identifier ",
        b"cid ",
        b"vid ",
        b"cl ",
        b"signature ",
        b"op = read",
        b"time < ",
    ],
    input_bytes_max: 4096,
    run,
};

fn run(data: &[u8]) -> Outcome {
    let decoded = parse_binary(data);
    if let Ok(m) = &decoded {
        let holds = |c: &[u8]| c == b"op = read";
        let _ = verify(m, b"secret", std::slice::from_ref(m), &holds);
        let again = parse_binary(&mint::binary_v2(m));
        assert_eq!(again.as_ref(), Ok(m), "re-encoding changed {m:?}");
    }
    outcome_of(&decoded)
}

fn seeds() -> Vec<Vec<u8>> {
    let mut plain = mint::new(b"tessera", b"account-1", b"secret");
    mint::first_party(&mut plain, b"op = read");
    let mut third = plain.clone();
    mint::third_party(&mut third, b"auth", b"key", b"user = alice", [7; 24]);
    let discharge = mint::bound(&third, &mint::discharge(b"auth", b"user = alice", b"key"));
    let packet = |name: &str, value: &[u8]| {
        let mut p = format!("{:04x}{name} ", 4 + name.len() + 2 + value.len()).into_bytes();
        p.extend_from_slice(value);
        p.push(b'\n');
        p
    };
    let v1: Vec<u8> = [
        packet("location", b"tessera"),
        packet("identifier", b"account-1"),
        packet("cid", b"op = read"),
        packet("signature", &plain.signature),
    ]
    .concat();
    vec![
        mint::binary_v2(&plain),
        mint::binary_v2(&third),
        mint::binary_v2(&discharge),
        v1,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode() {
        for seed in seeds() {
            assert!(parse_binary(&seed).is_ok(), "{seed:?}");
        }
        // The v1 seed is the plain v2 macaroon in the other format.
        let all = seeds();
        assert_eq!(parse_binary(&all[3]), parse_binary(&all[0]));
    }
}
