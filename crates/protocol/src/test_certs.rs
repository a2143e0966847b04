//! Throwaway certificate authorities for tests (feature `test-certs`):
//! generated afresh by each test, never written anywhere but a temporary
//! directory. Not for production: the keys are as good as their test.

use std::path::{Path, PathBuf};

/// A CA and one certificate it signed for `localhost` and `127.0.0.1`, as
/// PEM files in a directory.
pub struct TestPki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestPki {
    /// Generates the CA and the server certificate into `dir`, the files
    /// named after `name` (so that two authorities can share a directory).
    pub fn generate(dir: &Path, name: &str) -> TestPki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().expect("generate a CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("tessera test CA {name}"));
        let ca = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        let key = KeyPair::generate().expect("generate a server key");
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("server params");
        let cert = params
            .signed_by(&key, &ca, &ca_key)
            .expect("sign the server certificate");
        let write = |suffix: &str, pem: String| {
            let path = dir.join(format!("{name}-{suffix}.pem"));
            std::fs::write(&path, pem).expect("write a PEM file");
            path
        };
        TestPki {
            ca: write("ca", ca.pem()),
            cert: write("cert", cert.pem()),
            key: write("key", key.serialize_pem()),
        }
    }

    /// The files as a server's TLS configuration.
    pub fn server_files(&self) -> crate::transport::TlsFiles {
        crate::transport::TlsFiles {
            ca: self.ca.clone(),
            cert: Some(self.cert.clone()),
            key: Some(self.key.clone()),
        }
    }

    /// The CA alone, as a client's TLS configuration.
    pub fn client_files(&self) -> crate::transport::TlsFiles {
        crate::transport::TlsFiles {
            ca: self.ca.clone(),
            cert: None,
            key: None,
        }
    }
}
