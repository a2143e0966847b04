//! The one gate every coordinator request passes: the admin credential
//! (`docs/design/tls.md`).
//!
//! A member started with an admin token refuses, with UNAUTHORIZED, every
//! request that changes the configuration ([`Access::Admin`] from an
//! operator, [`Access::Cluster`] from a daemon or another member) unless
//! it carries the same token. Reads of the configuration stay open: a
//! client needs them to route, and the configuration holds no secret (a
//! space's macaroon secret lives only on its daemons). Which request is
//! which is `CoordRequest::access`'s decision, so a new request — a
//! backup — is gated by being classified, not by code here.

use tessera_protocol::credential::Access;
use tessera_protocol::{AdminStatus, AdminToken, CoordRequest, CoordResponse};

/// Whether `request`, sent with `offered` (the token beside it, if any),
/// may run on a member that requires `required`; the refusal to send back
/// otherwise.
pub fn admit(
    required: Option<&AdminToken>,
    offered: Option<&[u8]>,
    request: &CoordRequest,
) -> Result<(), CoordResponse> {
    let Some(required) = required else {
        return Ok(());
    };
    if request.access() == Access::Open {
        return Ok(());
    }
    let reason = match offered {
        Some(token) if required.matches(token) => return Ok(()),
        Some(_) => "the admin credential does not match this cluster's",
        None => "this request changes the configuration and needs the admin credential (--admin-token-file or TESSERA_ADMIN_TOKEN_FILE)",
    };
    Err(CoordResponse::Failed {
        status: AdminStatus::Unauthorized,
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::DaemonId;

    fn refused(result: Result<(), CoordResponse>) -> bool {
        match result {
            Ok(()) => false,
            Err(CoordResponse::Failed { status, .. }) => {
                assert_eq!(status, AdminStatus::Unauthorized);
                true
            }
            Err(other) => panic!("refused with {other:?}"),
        }
    }

    #[test]
    fn changes_need_the_token_and_reads_do_not() {
        let token = AdminToken::new(b"0123456789abcdef").unwrap();
        let requests = [
            (CoordRequest::RmSpace { name: "s".into() }, true),
            (CoordRequest::ServerKill { id: DaemonId(3) }, true),
            (
                CoordRequest::Heartbeat {
                    id: DaemonId(3),
                    epoch: tessera_types::Epoch(1),
                },
                true,
            ),
            (CoordRequest::Raft { payload: vec![] }, true),
            (CoordRequest::Status, false),
            (CoordRequest::Stability, false),
            (
                CoordRequest::GetConfig {
                    known: tessera_types::Epoch(0),
                    wait_ms: 0,
                },
                false,
            ),
        ];
        for (request, gated) in requests {
            // Without a token on the member, everything passes.
            assert!(!refused(admit(None, None, &request)), "{request:?}");
            assert!(!refused(admit(None, Some(b"x"), &request)), "{request:?}");
            assert_eq!(refused(admit(Some(&token), None, &request)), gated);
            assert_eq!(
                refused(admit(Some(&token), Some(b"0123456789abcdeF"), &request)),
                gated
            );
            assert_eq!(
                refused(admit(Some(&token), Some(b"0123456789abcdef0"), &request)),
                gated
            );
            assert!(!refused(admit(
                Some(&token),
                Some(b"0123456789abcdef"),
                &request
            )));
        }
    }
}
