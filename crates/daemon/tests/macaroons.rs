//! The daemon's macaroon verifier against pymacaroons: every case of
//! `macaroons/fixtures.json` was minted and judged by pymacaroons
//! (`macaroons/mint.py`); the daemon must decide the same. Then garbled
//! and random tokens, which must be refused with an error, never a panic.

use proptest::prelude::*;
use tessera_daemon::auth::{AuthorizeError, Credentials};
use tessera_daemon::auth_macaroon::{self, mint};
use tessera_protocol::{Auth, AuthOp};

#[derive(serde::Deserialize)]
struct Fixtures {
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    tokens: Vec<String>,
    secret: String,
    op: String,
    now: u64,
    expected: bool,
}

fn fixtures() -> Vec<Case> {
    let text = include_str!("macaroons/fixtures.json");
    let fixtures: Fixtures = serde_json::from_str(text).expect("fixtures.json parses");
    fixtures.cases
}

fn auth(tokens: &[String], now: u64) -> Auth {
    Auth {
        macaroons: tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
        received_unix_s: Some(now),
    }
}

fn op(name: &str) -> AuthOp {
    match name {
        "read" => AuthOp::Read,
        "write" => AuthOp::Write,
        other => panic!("fixture op {other}"),
    }
}

#[test]
fn decides_as_pymacaroons_does() {
    let cases = fixtures();
    assert!(cases.len() >= 40, "the fixtures hold every case");
    assert!(cases.iter().any(|c| c.expected) && cases.iter().any(|c| !c.expected));
    for case in cases {
        let decided = Credentials::parse(&auth(&case.tokens, case.now))
            .and_then(|c| c.authorize(case.secret.as_bytes(), op(&case.op)));
        assert_eq!(
            decided.is_ok(),
            case.expected,
            "{} ({}): {decided:?}",
            case.name,
            case.op
        );
    }
}

#[test]
fn minting_here_gives_pymacaroons_signatures() {
    // The v2 "op = read" token of the fixtures, minted by pymacaroons
    // with location "tessera", identifier "account-1".
    let case = fixtures()
        .into_iter()
        .find(|c| c.name == "v2 op = read")
        .expect("the fixture exists");
    let theirs = auth_macaroon::parse(case.tokens[0].as_bytes()).expect("parses");
    let mut ours = mint::new(b"tessera", b"account-1", case.secret.as_bytes());
    mint::first_party(&mut ours, b"op = read");
    assert_eq!(ours, theirs);
    assert_eq!(
        auth_macaroon::parse(&mint::serialize_v2(&ours)).expect("round trip"),
        theirs
    );
}

#[test]
fn no_macaroon_or_too_many_is_refused() {
    assert_eq!(
        Credentials::parse(&Auth::default()).err(),
        Some(AuthorizeError::NoMacaroon)
    );
    let many = Auth::new(vec![b"x".to_vec(); 33]);
    assert_eq!(
        Credentials::parse(&many).err(),
        Some(AuthorizeError::TooMany(33))
    );
}

#[test]
fn garbled_tokens_are_refused_without_panicking() {
    for case in fixtures().into_iter().filter(|c| c.expected) {
        let original = auth_macaroon::parse(case.tokens[0].as_bytes()).expect("parses");
        let token = case.tokens[0].as_bytes();
        let mut variants: Vec<Vec<u8>> = (0..token.len()).map(|n| token[..n].to_vec()).collect();
        for i in 0..token.len() {
            for replacement in [b'A', b'_', b'-', b'z', b'=', b'!'] {
                let mut t = token.to_vec();
                t[i] = replacement;
                variants.push(t);
            }
        }
        for variant in variants {
            let mut tokens = vec![String::from_utf8_lossy(&variant).into_owned()];
            tokens.extend(case.tokens[1..].iter().cloned());
            let credentials = Credentials::parse(&auth(&tokens, case.now));
            // Locations are hints, not signed (in every macaroon library):
            // a token that differs only there is the same token.
            let same = auth_macaroon::parse(&variant)
                .is_ok_and(|m| without_locations(m) == without_locations(original.clone()));
            if !same {
                let decided =
                    credentials.and_then(|c| c.authorize(case.secret.as_bytes(), op(&case.op)));
                assert!(
                    decided.is_err(),
                    "{}: garbled {variant:?} authorized",
                    case.name
                );
            }
        }
    }
}

fn without_locations(mut m: auth_macaroon::Macaroon) -> auth_macaroon::Macaroon {
    m.location.clear();
    for c in &mut m.caveats {
        c.location = None;
    }
    m
}

#[test]
fn cycles_of_discharges_end() {
    // Two discharges that each demand the other: verification must stop
    // at its visit bound instead of recursing forever.
    let mut root = mint::new(b"", b"root", b"secret");
    mint::third_party(&mut root, b"tp", b"k1", b"d1", [1; 24]);
    let mut d1 = mint::discharge(b"tp", b"d1", b"k1");
    mint::third_party(&mut d1, b"tp", b"k2", b"d2", [2; 24]);
    let mut d2 = mint::discharge(b"tp", b"d2", b"k2");
    mint::third_party(&mut d2, b"tp", b"k1", b"d1", [3; 24]);
    let tokens: Vec<String> = [
        root.clone(),
        mint::bound(&root, &d1),
        mint::bound(&root, &d2),
    ]
    .iter()
    .map(|m| String::from_utf8(mint::serialize_v2(m)).expect("base64 is text"))
    .collect();
    let decided = Credentials::parse(&auth(&tokens, 0))
        .expect("parses")
        .authorize(b"secret", AuthOp::Read);
    assert!(decided.is_err());
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = auth_macaroon::parse(&bytes);
        // Also as base64 of random bytes, which reaches the binary decoders.
        use base64::Engine as _;
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        let _ = auth_macaroon::parse(text.as_bytes());
        let mut v2 = vec![2u8];
        v2.extend_from_slice(&bytes);
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&v2);
        let _ = auth_macaroon::parse(text.as_bytes());
    }
}
