//! The command line's TLS and admin-credential flags (`docs/design/tls.md`):
//! [`ServerSecurity`] for `coordinator` and `daemon`, [`ClientSecurity`]
//! for every command that talks to a cluster. Each flag can come from the
//! environment instead, so that scripts need not repeat it.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use tessera_client::{AdminToken, CoordLink, TlsFiles, Transport};

/// TLS and the admin credential of a server.
#[derive(Args, Clone, Debug, Default)]
pub struct ServerSecurity {
    /// PEM certificates of the CA that signed the cluster's certificates:
    /// turns TLS on, for what this server accepts and what it dials.
    #[arg(long, env = "TESSERA_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// This server's PEM certificate chain (with --tls-ca).
    #[arg(long, env = "TESSERA_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "TESSERA_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// A file holding the admin credential (at least 16 bytes): a
    /// coordinator refuses configuration changes without it; a daemon and
    /// a member send it.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
}

impl ServerSecurity {
    /// The transport and credential these flags ask for.
    pub fn link(&self) -> anyhow::Result<CoordLink> {
        let transport = match &self.tls_ca {
            Some(ca) => Transport::tls(&TlsFiles {
                ca: ca.clone(),
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
            })
            .context("TLS")?,
            None if self.tls_cert.is_some() || self.tls_key.is_some() => {
                anyhow::bail!("--tls-cert and --tls-key need --tls-ca (the cluster's CA)")
            }
            None => Transport::plain(),
        };
        Ok(CoordLink {
            transport,
            admin_token: admin_token(self.admin_token_file.as_ref())?,
        })
    }
}

/// TLS and the admin credential of a command that talks to a cluster.
#[derive(Args, Clone, Debug, Default)]
pub struct ClientSecurity {
    /// PEM certificates of the cluster's CA: connect with TLS.
    #[arg(long, env = "TESSERA_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A file holding the admin credential, for configuration changes on
    /// a cluster that requires it.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
}

impl ClientSecurity {
    /// The transport and credential these flags ask for.
    pub fn link(&self) -> anyhow::Result<CoordLink> {
        ServerSecurity {
            tls_ca: self.tls_ca.clone(),
            admin_token_file: self.admin_token_file.clone(),
            ..ServerSecurity::default()
        }
        .link()
    }
}

fn admin_token(path: Option<&PathBuf>) -> anyhow::Result<Option<AdminToken>> {
    path.map(|path| AdminToken::from_file(path).context("--admin-token-file"))
        .transpose()
}
