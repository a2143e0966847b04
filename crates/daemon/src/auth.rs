//! Authorization on spaces `with authorization` (API.md §10, the rule in
//! `docs/design/authorization.md`): which requests may touch which
//! objects, decided at the daemon from the object's secret and the
//! request's macaroons. The client is never trusted: it only forwards the
//! tokens its caller gave.
//!
//! The secret lives in the object as a hidden value after the space's
//! attributes (`values[attrs.len()]`, the `__secret` attribute of API.md),
//! so it travels down chains, transfers and backfills with the object and
//! every replica can judge a search; [`strip`] removes it from whatever
//! goes back to a client.

use crate::auth_macaroon::{self, Macaroon, ParseMacaroonError, VerifyMacaroonError};
use tessera_protocol::{Auth, AuthOp, UpdateRequest};
use tessera_types::{Check, Object, SpaceDesc, Value};

/// How many macaroons one request may carry.
pub const MACAROONS_MAX: usize = 32;

/// Why a request is not authorized (status UNAUTHORIZED).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The request carries no macaroon.
    #[error("the space requires authorization and the request carries no macaroon")]
    NoMacaroon,
    /// More than [`MACAROONS_MAX`] macaroons.
    #[error("the request carries {0} macaroons, more than the {MACAROONS_MAX} accepted")]
    TooMany(usize),
    /// A macaroon could not be decoded.
    #[error("macaroon {index} cannot be decoded: {source}")]
    Parse {
        index: usize,
        #[source]
        source: ParseMacaroonError,
    },
    /// No macaroon verifies against the object's secret; the cause is the
    /// first macaroon's.
    #[error("no macaroon authorizes this {op:?} of the object: {source}")]
    Verify {
        op: AuthOp,
        #[source]
        source: VerifyMacaroonError,
    },
    /// The object does not exist (or has no secret), so nothing can be
    /// verified; a write that creates an object must set its secret.
    #[error("the object does not exist or has no secret, so no macaroon can authorize it")]
    NoSecret,
    /// A predicate names the hidden secret.
    #[error("predicates may not name the hidden secret")]
    SecretPredicate,
    /// A `secret` was given for a space without authorization.
    #[error("the space has no authorization; it takes no secret")]
    SecretWithoutAuthorization,
}

/// A request's macaroons, decoded once and checked against many objects.
pub struct Credentials {
    macaroons: Vec<Macaroon>,
    received_unix_s: Option<u64>,
}

impl Credentials {
    /// Decodes the macaroons of `auth`; at least one is required.
    pub fn parse(auth: &Auth) -> Result<Credentials, AuthorizeError> {
        if auth.macaroons.is_empty() {
            return Err(AuthorizeError::NoMacaroon);
        }
        if auth.macaroons.len() > MACAROONS_MAX {
            return Err(AuthorizeError::TooMany(auth.macaroons.len()));
        }
        let macaroons = auth
            .macaroons
            .iter()
            .enumerate()
            .map(|(index, m)| {
                auth_macaroon::parse(m).map_err(|source| AuthorizeError::Parse { index, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(Credentials {
            macaroons,
            received_unix_s: auth.received_unix_s,
        })
    }

    /// Whether some macaroon, with the others as its discharges, verifies
    /// against `secret` for `op`. HyperDex's form — the first macaroon the
    /// root, the rest its discharges — is one case of this rule.
    pub fn authorize(&self, secret: &[u8], op: AuthOp) -> Result<(), AuthorizeError> {
        let holds = |caveat: &[u8]| caveat_holds(caveat, op, self.received_unix_s);
        let mut first_error = None;
        for root in &self.macaroons {
            match auth_macaroon::verify(root, secret, &self.macaroons, &holds) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(AuthorizeError::Verify {
            op,
            source: first_error.unwrap_or(VerifyMacaroonError::Signature),
        })
    }

    /// [`Credentials::authorize`] on an object that may not exist.
    pub fn authorize_object(
        &self,
        desc: &SpaceDesc,
        object: Option<&Object>,
        op: AuthOp,
    ) -> Result<(), AuthorizeError> {
        let secret = object
            .and_then(|o| secret_of(desc, o))
            .ok_or(AuthorizeError::NoSecret)?;
        self.authorize(secret, op)
    }
}

/// Whether `request` may write the key whose newest object is `old`: on
/// a space `with authorization` an existing object needs a macaroon for
/// `op = write`, and a missing one may only be created with a secret
/// (API.md §10). Other spaces take no secret.
pub fn authorize_update(
    desc: &SpaceDesc,
    old: Option<&Object>,
    request: &UpdateRequest,
) -> Result<(), AuthorizeError> {
    if !desc.authorization {
        return match request.secret {
            Some(_) => Err(AuthorizeError::SecretWithoutAuthorization),
            None => Ok(()),
        };
    }
    check_predicates(desc, &request.checks)?;
    match old {
        None if request.secret.is_some() && !request.flags.erase => Ok(()),
        None => Err(AuthorizeError::NoSecret),
        Some(old) => {
            Credentials::parse(&request.auth)?.authorize_object(desc, Some(old), AuthOp::Write)
        }
    }
}

/// The first-party caveats a daemon understands; any other is unmet.
fn caveat_holds(caveat: &[u8], op: AuthOp, now_unix_s: Option<u64>) -> bool {
    match caveat {
        b"op = read" => op == AuthOp::Read,
        b"op = write" => op == AuthOp::Write,
        _ => match caveat.strip_prefix(b"time < ") {
            Some(limit) => {
                let limit = std::str::from_utf8(limit)
                    .ok()
                    .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|l| l.parse::<u64>().ok());
                matches!((now_unix_s, limit), (Some(now), Some(limit)) if now < limit)
            }
            None => false,
        },
    }
}

/// How many values an object of `desc` stores: one per attribute, and
/// the hidden secret on a space `with authorization`.
pub fn stored_len(desc: &SpaceDesc) -> usize {
    desc.attrs.len() + usize::from(desc.authorization)
}

/// The object's secret, when the space has authorization and the object
/// carries one.
pub fn secret_of<'a>(desc: &SpaceDesc, object: &'a Object) -> Option<&'a [u8]> {
    if !desc.authorization {
        return None;
    }
    match object.values.get(desc.attrs.len()) {
        Some(Value::String(secret)) => Some(secret),
        _ => None,
    }
}

/// Sets the object's hidden secret (the object has one value per
/// attribute, and perhaps an old secret).
pub fn set_secret(desc: &SpaceDesc, object: &mut Object, secret: &[u8]) {
    object.values.truncate(desc.attrs.len());
    object.values.push(Value::String(secret.to_vec()));
}

/// The object as a client may see it: without the hidden secret.
pub fn strip(desc: &SpaceDesc, mut object: Object) -> Object {
    object.values.truncate(desc.attrs.len());
    object
}

/// Refuses predicates that name the hidden secret (they would let a
/// search or a conditional update probe it).
pub fn check_predicates(desc: &SpaceDesc, checks: &[Check]) -> Result<(), AuthorizeError> {
    if checks.iter().any(|c| c.attr >= desc.attrs.len()) {
        return Err(AuthorizeError::SecretPredicate);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caveats_hold_only_in_their_exact_forms() {
        let cases: [(&[u8], AuthOp, Option<u64>, bool); 12] = [
            (b"op = read", AuthOp::Read, None, true),
            (b"op = read", AuthOp::Write, None, false),
            (b"op = write", AuthOp::Write, None, true),
            (b"op = write", AuthOp::Read, None, false),
            (b"op=read", AuthOp::Read, None, false),
            (b"time < 100", AuthOp::Read, Some(99), true),
            (b"time < 100", AuthOp::Read, Some(100), false),
            (b"time < 100", AuthOp::Read, None, false),
            (b"time < -1", AuthOp::Read, Some(0), false),
            (
                b"time < 99999999999999999999999",
                AuthOp::Read,
                Some(0),
                false,
            ),
            (b"time < ", AuthOp::Read, Some(0), false),
            (b"account = bob", AuthOp::Read, Some(0), false),
        ];
        for (caveat, op, now, expected) in cases {
            assert_eq!(
                caveat_holds(caveat, op, now),
                expected,
                "{:?} {op:?} {now:?}",
                String::from_utf8_lossy(caveat)
            );
        }
    }
}
