//! Macaroons as libmacaroons and pymacaroons serialize and verify them:
//! the token format (v1 packets and v2 binary, each base64 encoded) and
//! the chain of signatures, over RustCrypto's HMAC-SHA-256 and NaCl
//! secretbox (XSalsa20-Poly1305). No primitive is written here; only the
//! way the primitives chain into a macaroon signature.
//!
//! Signatures, as pymacaroons computes them (`K` = the root secret):
//!
//! ```text
//!   sig0        = HMAC(HMAC("macaroons-key-generator", K), identifier)
//!   first party = HMAC(sig, predicate)
//!   third party = HMAC(sig, HMAC(sig, vid) ‖ HMAC(sig, cid))
//!                 where vid = nonce ‖ secretbox(key = sig, caveat key)
//!   discharge   = HMAC(0³², HMAC(0³², root sig) ‖ HMAC(0³², its sig))
//! ```
//!
//! What this module does not do: decide which caveats hold (the caller
//! passes a predicate, see [`crate::auth`]), or mint macaroons outside
//! tests.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The length of a signature (a SHA-256 HMAC).
pub const SIGNATURE_LEN: usize = 32;
/// The length of a secretbox nonce at the front of a verification id.
const NONCE_LEN: usize = 24;
/// How many macaroons one verification may visit (the root and its
/// discharges, each time a caveat leads to one): a bound on the work a
/// hostile token set can ask for, cycles of discharges included.
pub const VISITS_MAX: usize = 64;
/// The largest serialized macaroon accepted, in bytes.
pub const SERIALIZED_LEN_MAX: usize = 64 * 1024;

/// One caveat: first party when `vid` is `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caveat {
    /// The predicate of a first-party caveat, or the identifier of the
    /// discharge a third-party caveat needs.
    pub id: Vec<u8>,
    /// The encrypted caveat key of a third-party caveat.
    pub vid: Option<Vec<u8>>,
    /// Where a third-party caveat's discharge comes from (not checked).
    pub location: Option<Vec<u8>>,
}

/// A decoded macaroon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Macaroon {
    pub location: Vec<u8>,
    pub identifier: Vec<u8>,
    pub caveats: Vec<Caveat>,
    pub signature: [u8; SIGNATURE_LEN],
}

/// Why a serialized macaroon could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseMacaroonError {
    /// The token is empty.
    #[error("the macaroon is empty")]
    Empty,
    /// The token is longer than [`SERIALIZED_LEN_MAX`].
    #[error("the macaroon has {0} bytes, more than the {SERIALIZED_LEN_MAX} accepted")]
    TooLong(usize),
    /// The token is not base64 (standard or URL-safe, padded or not).
    #[error("the macaroon is not base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// The decoded bytes start neither a v1 packet nor a v2 token.
    #[error("the macaroon is neither of format v1 nor v2")]
    UnknownFormat,
    /// A packet or field runs past the end of the token, or is malformed.
    #[error("the macaroon is malformed: {0}")]
    Malformed(&'static str),
    /// A v1 packet carries a field name this format does not have.
    #[error("the macaroon has an unknown field")]
    UnknownField,
    /// The signature is missing or not 32 bytes.
    #[error("the macaroon's signature is missing or not {SIGNATURE_LEN} bytes")]
    BadSignature,
}

/// Why a macaroon did not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyMacaroonError {
    /// The signature does not match the secret and the caveats.
    #[error("the signature does not match")]
    Signature,
    /// A first-party caveat does not hold.
    #[error("the caveat `{0}` does not hold")]
    Unmet(String),
    /// No discharge macaroon has the identifier a third-party caveat names.
    #[error("no discharge macaroon for a third-party caveat")]
    NoDischarge,
    /// A third-party caveat's verification id did not decrypt under the
    /// signature so far (forged, or not made for this macaroon).
    #[error("a third-party caveat's verification id does not decrypt")]
    VerificationId,
    /// The discharges lead to more than [`VISITS_MAX`] verifications.
    #[error("the discharges lead to more than {VISITS_MAX} verifications")]
    TooManyVisits,
}

// ------------------------------------------------------------ decoding

/// Decodes a serialized macaroon: base64 (either alphabet, padding
/// optional) of a v1 or v2 binary macaroon, as pymacaroons' and
/// libmacaroons' `serialize()` produce.
pub fn parse(serialized: &[u8]) -> Result<Macaroon, ParseMacaroonError> {
    let text = serialized.trim_ascii();
    if text.is_empty() {
        return Err(ParseMacaroonError::Empty);
    }
    if text.len() > SERIALIZED_LEN_MAX {
        return Err(ParseMacaroonError::TooLong(text.len()));
    }
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let url = GeneralPurpose::new(&alphabet::URL_SAFE, config);
    let standard = GeneralPurpose::new(&alphabet::STANDARD, config);
    let raw = url
        .decode(text)
        .or_else(|_| standard.decode(text))
        .map_err(ParseMacaroonError::Base64)?;
    parse_binary(&raw)
}

/// Decodes a binary macaroon (what the base64 text of [`parse`] holds):
/// v2 when it starts with the byte 2, v1 when with a hex digit.
pub fn parse_binary(raw: &[u8]) -> Result<Macaroon, ParseMacaroonError> {
    match raw.first() {
        Some(2) => parse_v2(&raw[1..]),
        Some(b'0'..=b'9' | b'a'..=b'f') => parse_v1(raw),
        _ => Err(ParseMacaroonError::UnknownFormat),
    }
}

fn signature_of(bytes: &[u8]) -> Result<[u8; SIGNATURE_LEN], ParseMacaroonError> {
    bytes
        .try_into()
        .map_err(|_| ParseMacaroonError::BadSignature)
}

/// v1: packets of a 4-hex-digit length (counting itself), `name value\n`.
fn parse_v1(mut rest: &[u8]) -> Result<Macaroon, ParseMacaroonError> {
    let mut m = Macaroon {
        location: Vec::new(),
        identifier: Vec::new(),
        caveats: Vec::new(),
        signature: [0; SIGNATURE_LEN],
    };
    let mut signed = false;
    while !rest.is_empty() {
        let header = rest
            .get(..4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or(ParseMacaroonError::Malformed(
                "a packet length is not 4 hex digits",
            ))?;
        if header < 4 + 2 || header > rest.len() {
            return Err(ParseMacaroonError::Malformed(
                "a packet's length is out of range",
            ));
        }
        let packet = &rest[4..header];
        rest = &rest[header..];
        let Some((body, b'\n')) = packet.split_last().map(|(last, body)| (body, *last)) else {
            return Err(ParseMacaroonError::Malformed(
                "a packet does not end in a newline",
            ));
        };
        let space = body
            .iter()
            .position(|&b| b == b' ')
            .ok_or(ParseMacaroonError::Malformed("a packet has no space"))?;
        let (name, value) = (&body[..space], body[space + 1..].to_vec());
        if signed {
            return Err(ParseMacaroonError::Malformed(
                "a packet follows the signature",
            ));
        }
        match name {
            b"location" => m.location = value,
            b"identifier" => m.identifier = value,
            b"cid" => m.caveats.push(Caveat {
                id: value,
                vid: None,
                location: None,
            }),
            b"vid" | b"cl" => {
                let caveat = m.caveats.last_mut().ok_or(ParseMacaroonError::Malformed(
                    "a `vid` or `cl` before any `cid`",
                ))?;
                let slot = if name == b"vid" {
                    &mut caveat.vid
                } else {
                    &mut caveat.location
                };
                *slot = Some(value);
            }
            b"signature" => {
                m.signature = signature_of(&value)?;
                signed = true;
            }
            _ => return Err(ParseMacaroonError::UnknownField),
        }
    }
    if !signed {
        return Err(ParseMacaroonError::BadSignature);
    }
    // A location is a hint of where a third party's discharge comes from;
    // a first-party caveat has none (v2 cannot even carry one).
    for caveat in &mut m.caveats {
        if caveat.vid.is_none() {
            caveat.location = None;
        }
    }
    Ok(m)
}

const V2_EOS: u64 = 0;
const V2_LOCATION: u64 = 1;
const V2_IDENTIFIER: u64 = 2;
const V2_VID: u64 = 4;
const V2_SIGNATURE: u64 = 6;

/// Reads an unsigned LEB128 varint of at most 9 bytes (no field needs more).
fn varint(rest: &mut &[u8]) -> Result<u64, ParseMacaroonError> {
    let mut n = 0u64;
    for (i, &b) in rest.iter().enumerate().take(9) {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *rest = &rest[i + 1..];
            return Ok(n);
        }
    }
    Err(ParseMacaroonError::Malformed(
        "a varint is truncated or too long",
    ))
}

/// One v2 field: its type and, unless it is EOS, its data.
fn field<'a>(rest: &mut &'a [u8]) -> Result<(u64, &'a [u8]), ParseMacaroonError> {
    let kind = varint(rest)?;
    if kind == V2_EOS {
        return Ok((kind, &[]));
    }
    let len = usize::try_from(varint(rest)?)
        .map_err(|_| ParseMacaroonError::Malformed("a field length is too large"))?;
    if len > rest.len() {
        return Err(ParseMacaroonError::Malformed("a field runs past the end"));
    }
    let (data, tail) = rest.split_at(len);
    *rest = tail;
    Ok((kind, data))
}

/// A v2 section: fields in strictly increasing type order, up to EOS.
fn section<'a>(rest: &mut &'a [u8]) -> Result<Vec<(u64, &'a [u8])>, ParseMacaroonError> {
    let mut fields: Vec<(u64, &[u8])> = Vec::new();
    loop {
        if rest.is_empty() {
            return Err(ParseMacaroonError::Malformed("a section runs past the end"));
        }
        let (kind, data) = field(rest)?;
        if kind == V2_EOS {
            return Ok(fields);
        }
        if fields.last().is_some_and(|(k, _)| *k >= kind) {
            return Err(ParseMacaroonError::Malformed("fields out of order"));
        }
        fields.push((kind, data));
    }
}

/// v2 (libmacaroons' `format.txt`), after the version byte.
fn parse_v2(mut rest: &[u8]) -> Result<Macaroon, ParseMacaroonError> {
    let header = section(&mut rest)?;
    let (location, identifier) = match header.as_slice() {
        [(V2_IDENTIFIER, id)] => (Vec::new(), id.to_vec()),
        [(V2_LOCATION, loc), (V2_IDENTIFIER, id)] => (loc.to_vec(), id.to_vec()),
        _ => {
            return Err(ParseMacaroonError::Malformed(
                "the header is not [location] identifier",
            ))
        }
    };
    let mut caveats = Vec::new();
    loop {
        let fields = section(&mut rest)?;
        let caveat = match fields.as_slice() {
            [] => break,
            [(V2_IDENTIFIER, id)] => Caveat {
                id: id.to_vec(),
                vid: None,
                location: None,
            },
            [(V2_IDENTIFIER, id), (V2_VID, vid)] => Caveat {
                id: id.to_vec(),
                vid: Some(vid.to_vec()),
                location: None,
            },
            [(V2_LOCATION, loc), (V2_IDENTIFIER, id), (V2_VID, vid)] => Caveat {
                id: id.to_vec(),
                vid: Some(vid.to_vec()),
                location: Some(loc.to_vec()),
            },
            _ => {
                return Err(ParseMacaroonError::Malformed(
                    "a caveat has unexpected fields",
                ))
            }
        };
        caveats.push(caveat);
    }
    let (kind, signature) = field(&mut rest)?;
    if kind != V2_SIGNATURE {
        return Err(ParseMacaroonError::BadSignature);
    }
    if !rest.is_empty() {
        return Err(ParseMacaroonError::Malformed("bytes follow the signature"));
    }
    Ok(Macaroon {
        location,
        identifier,
        caveats,
        signature: signature_of(signature)?,
    })
}

// ------------------------------------------------------------ signatures

fn hmac(key: &[u8], data: &[u8]) -> [u8; SIGNATURE_LEN] {
    // HMAC takes a key of any length; this cannot fail.
    let mut mac = <HmacSha256 as hmac::KeyInit>::new_from_slice(key)
        .expect("HMAC-SHA-256 accepts keys of every length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

fn hmac2(key: &[u8], a: &[u8], b: &[u8]) -> [u8; SIGNATURE_LEN] {
    let mut both = [0u8; 2 * SIGNATURE_LEN];
    both[..SIGNATURE_LEN].copy_from_slice(&hmac(key, a));
    both[SIGNATURE_LEN..].copy_from_slice(&hmac(key, b));
    hmac(key, &both)
}

/// The key a root secret stands for (libmacaroons' key generator).
fn derived_key(secret: &[u8]) -> [u8; SIGNATURE_LEN] {
    hmac(b"macaroons-key-generator", secret)
}

/// The signature of a discharge bound to its root (`prepare_for_request`).
fn bind(root: &[u8; SIGNATURE_LEN], discharge: &[u8; SIGNATURE_LEN]) -> [u8; SIGNATURE_LEN] {
    hmac2(&[0; SIGNATURE_LEN], root, discharge)
}

// ------------------------------------------------------------ verifying

/// Verifies `root` against the object's `secret`: every first-party
/// caveat must satisfy `holds`, every third-party caveat must be
/// discharged by one of `discharges` (bound to `root`), whose caveats are
/// checked the same way.
pub fn verify(
    root: &Macaroon,
    secret: &[u8],
    discharges: &[Macaroon],
    holds: &dyn Fn(&[u8]) -> bool,
) -> Result<(), VerifyMacaroonError> {
    let mut visits = 0;
    Verification {
        root,
        discharges,
        holds,
        visits: &mut visits,
    }
    .check(root, &derived_key(secret))
}

struct Verification<'a> {
    root: &'a Macaroon,
    discharges: &'a [Macaroon],
    holds: &'a dyn Fn(&[u8]) -> bool,
    visits: &'a mut usize,
}

impl Verification<'_> {
    fn check(&mut self, m: &Macaroon, key: &[u8]) -> Result<(), VerifyMacaroonError> {
        *self.visits += 1;
        if *self.visits > VISITS_MAX {
            return Err(VerifyMacaroonError::TooManyVisits);
        }
        let mut sig = hmac(key, &m.identifier);
        for caveat in &m.caveats {
            match &caveat.vid {
                None => {
                    if !(self.holds)(&caveat.id) {
                        let text = String::from_utf8_lossy(&caveat.id).into_owned();
                        return Err(VerifyMacaroonError::Unmet(text));
                    }
                    sig = hmac(&sig, &caveat.id);
                }
                Some(vid) => {
                    let caveat_key = open_vid(&sig, vid)?;
                    let discharge = self
                        .discharges
                        .iter()
                        .find(|d| d.identifier == caveat.id)
                        .ok_or(VerifyMacaroonError::NoDischarge)?;
                    self.check(discharge, &caveat_key)?;
                    sig = hmac2(&sig, vid, &caveat.id);
                }
            }
        }
        if !std::ptr::eq(m, self.root) {
            sig = bind(&self.root.signature, &sig);
        }
        if bool::from(sig.ct_eq(&m.signature)) {
            Ok(())
        } else {
            Err(VerifyMacaroonError::Signature)
        }
    }
}

/// The caveat key a verification id carries: `nonce ‖ secretbox(…)` under
/// the signature so far.
fn open_vid(sig: &[u8; SIGNATURE_LEN], vid: &[u8]) -> Result<Vec<u8>, VerifyMacaroonError> {
    if vid.len() < NONCE_LEN {
        return Err(VerifyMacaroonError::VerificationId);
    }
    let (nonce, sealed) = vid.split_at(NONCE_LEN);
    let cipher = XSalsa20Poly1305::new(sig.into());
    cipher
        .decrypt(Nonce::from_slice(nonce), sealed)
        .map_err(|_| VerifyMacaroonError::VerificationId)
}

// ------------------------------------------------------------ minting (tests)

/// Minting, for tests of the daemon and of this module. The daemon never
/// mints; clients do, with their own libraries.
pub mod mint {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    /// A new macaroon with no caveats.
    pub fn new(location: &[u8], identifier: &[u8], secret: &[u8]) -> Macaroon {
        Macaroon {
            location: location.to_vec(),
            identifier: identifier.to_vec(),
            caveats: Vec::new(),
            signature: hmac(&derived_key(secret), identifier),
        }
    }

    /// Adds a first-party caveat.
    pub fn first_party(m: &mut Macaroon, predicate: &[u8]) {
        m.signature = hmac(&m.signature, predicate);
        m.caveats.push(Caveat {
            id: predicate.to_vec(),
            vid: None,
            location: None,
        });
    }

    /// Adds a third-party caveat whose discharge is minted with
    /// `caveat_secret` under identifier `id`; `nonce` as the caller picks.
    pub fn third_party(
        m: &mut Macaroon,
        location: &[u8],
        caveat_secret: &[u8],
        id: &[u8],
        nonce: [u8; NONCE_LEN],
    ) {
        let cipher = XSalsa20Poly1305::new((&m.signature).into());
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                derived_key(caveat_secret).as_slice(),
            )
            .expect("secretbox sealing of 32 bytes cannot fail");
        let vid: Vec<u8> = nonce.iter().copied().chain(sealed).collect();
        m.signature = hmac2(&m.signature, &vid, id);
        m.caveats.push(Caveat {
            id: id.to_vec(),
            vid: Some(vid),
            location: Some(location.to_vec()),
        });
    }

    /// The discharge of a third-party caveat, minted by the third party.
    pub fn discharge(location: &[u8], id: &[u8], caveat_secret: &[u8]) -> Macaroon {
        new(location, id, caveat_secret)
    }

    /// `discharge` bound to `root` (pymacaroons' `prepare_for_request`).
    pub fn bound(root: &Macaroon, discharge: &Macaroon) -> Macaroon {
        let mut d = discharge.clone();
        d.signature = bind(&root.signature, &discharge.signature);
        d
    }

    /// Serializes in the v2 binary format, base64 URL-safe without padding.
    pub fn serialize_v2(m: &Macaroon) -> Vec<u8> {
        URL_SAFE_NO_PAD.encode(binary_v2(m)).into_bytes()
    }

    /// The v2 binary format (libmacaroons' `format.txt`).
    pub fn binary_v2(m: &Macaroon) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, kind: u64, data: &[u8]) {
            put_varint(out, kind);
            put_varint(out, data.len() as u64);
            out.extend_from_slice(data);
        }
        fn put_varint(out: &mut Vec<u8>, mut n: u64) {
            while n >= 0x80 {
                out.push((n as u8) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
        }
        let mut out = vec![2];
        if !m.location.is_empty() {
            put(&mut out, V2_LOCATION, &m.location);
        }
        put(&mut out, V2_IDENTIFIER, &m.identifier);
        out.push(0);
        for c in &m.caveats {
            if let Some(loc) = &c.location {
                put(&mut out, V2_LOCATION, loc);
            }
            put(&mut out, V2_IDENTIFIER, &c.id);
            if let Some(vid) = &c.vid {
                put(&mut out, V2_VID, vid);
            }
            out.push(0);
        }
        out.push(0);
        put(&mut out, V2_SIGNATURE, &m.signature);
        out
    }
}
