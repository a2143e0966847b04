//! The command line's TLS and admin-credential flags (`docs/design/tls.md`):
//! [`ServerSecurity`] for `coordinator` and `daemon`, [`ClientSecurity`]
//! for every command that talks to a cluster. Each flag can come from the
//! environment instead, so that scripts need not repeat it.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use tessera_client::{AdminToken, CoordLink, TlsFiles, Transport};

/// TLS and the admin credential of a server: the client's flags, and the
/// certificate it serves with.
#[derive(Args, Clone, Debug, Default)]
pub struct ServerSecurity {
    #[command(flatten)]
    pub client: ClientSecurity,
    /// This server's PEM certificate chain (with --tls-ca).
    #[arg(long, env = "TESSERA_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "TESSERA_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

impl ServerSecurity {
    /// The transport and credential these flags ask for.
    pub fn link(&self) -> anyhow::Result<CoordLink> {
        self.client
            .link_serving(self.tls_cert.clone(), self.tls_key.clone())
    }
}

/// TLS and the admin credential of anything that talks to a cluster.
#[derive(Args, Clone, Debug, Default)]
pub struct ClientSecurity {
    /// PEM certificates of the CA that signed the cluster's certificates:
    /// turns TLS on for every connection.
    #[arg(long, env = "TESSERA_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A file holding the admin credential (at least 16 bytes): a
    /// coordinator started with it refuses configuration changes without
    /// it; daemons, members and admin commands send it.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
}

impl ClientSecurity {
    /// The transport and credential these flags ask for.
    pub fn link(&self) -> anyhow::Result<CoordLink> {
        self.link_serving(None, None)
    }

    /// [`ClientSecurity::link`] for a process that also serves with
    /// `cert` and `key`.
    fn link_serving(
        &self,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> anyhow::Result<CoordLink> {
        let transport = match &self.tls_ca {
            Some(ca) => Transport::tls(&TlsFiles {
                ca: ca.clone(),
                cert,
                key,
            })
            .context("TLS")?,
            None if cert.is_some() || key.is_some() => {
                anyhow::bail!("--tls-cert and --tls-key need --tls-ca (the cluster's CA)")
            }
            None => Transport::plain(),
        };
        let admin_token = self
            .admin_token_file
            .as_ref()
            .map(|path| AdminToken::from_file(path).context("--admin-token-file"))
            .transpose()?;
        Ok(CoordLink {
            transport,
            admin_token,
        })
    }
}
