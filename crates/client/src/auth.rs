//! What a client sends for a space `with authorization` (API.md §10): the
//! caller's macaroons, and the secret of objects it creates. The client
//! checks neither; the daemons decide (`docs/design/authorization.md`).

use crate::client::Client;
use std::sync::Arc;
use tessera_protocol::Auth;

/// The macaroons and the secret a [`Client`] handle attaches to its
/// requests; empty on a handle from [`Client::connect`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Authorization {
    /// Serialized macaroons (pymacaroons' or libmacaroons' `serialize()`
    /// text), carried by every request.
    pub macaroons: Vec<Vec<u8>>,
    /// The secret every update through the handle gives its object
    /// (`put(..., secret=)`).
    pub secret: Option<Vec<u8>>,
}

impl Client {
    /// A handle on the same connections whose every request — key
    /// operations, searches, counts, group operations — carries
    /// `macaroons`: serialized tokens, the first usually minted with the
    /// object's secret, the others its discharges.
    pub fn with_auth<I, M>(&self, macaroons: I) -> Client
    where
        I: IntoIterator<Item = M>,
        M: Into<Vec<u8>>,
    {
        self.with_authorization(Authorization {
            macaroons: macaroons.into_iter().map(Into::into).collect(),
            secret: self.authorization().secret.clone(),
        })
    }

    /// A handle whose every update sets the object's secret: on a space
    /// `with authorization` an object is created only so. Refused
    /// (UNAUTHORIZED) on other spaces.
    pub fn with_secret(&self, secret: impl Into<Vec<u8>>) -> Client {
        self.with_authorization(Authorization {
            macaroons: self.authorization().macaroons.clone(),
            secret: Some(secret.into()),
        })
    }

    /// The macaroons in the protocol's form.
    pub(crate) fn auth(&self) -> Auth {
        Auth::new(self.authorization().macaroons.clone())
    }

    /// The secret updates set, if any.
    pub(crate) fn secret(&self) -> Option<Vec<u8>> {
        self.authorization().secret.clone()
    }

    fn with_authorization(&self, authorization: Authorization) -> Client {
        let mut handle = self.clone();
        handle.set_authorization(Arc::new(authorization));
        handle
    }
}
