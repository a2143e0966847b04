//! Every connection Tessera makes or accepts, plain TCP or TLS
//! (`docs/design/tls.md`).
//!
//! ```text
//!  dialer:   TcpStream::connect ─▶ Transport::connect  ─▶ Stream ─into_split─▶ framing
//!  listener: TcpListener::accept ─▶ Transport::accept ─▶ Stream ─into_split─▶ framing
//! ```
//!
//! A [`Transport`] is the one place that turns a `TcpStream` into the
//! [`Stream`] the framing code reads and writes, so plain and TLS
//! connections share all of it. Plain is the default; with TLS a dialer
//! checks the server's certificate against the cluster's CA and the name
//! it dialed, and a listener presents its own certificate. The halves of a
//! plain stream are tokio's owned halves, so plain connections cost what
//! they did before TLS existed.
//!
//! Servers ask for a client certificate but do not require one: clients
//! connect without, and a server dialing a peer presents its own, so that
//! a daemon can tell its peers ([`Stream::peer_certified`]) from anyone
//! else and take chain messages from them only. Who may change the
//! configuration is the admin credential's business
//! ([`crate::credential`]), and who may read an object is the macaroons'.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// The largest PEM file read (a certificate chain or a key): far above any
/// real one, and a bound on what a wrong path can make us allocate.
const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// The certificate files of a process, as given by `--tls-ca`,
/// `--tls-cert` and `--tls-key`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The PEM certificates of the authorities a dialer trusts.
    pub ca: PathBuf,
    /// The PEM certificate chain a listener presents (servers only).
    pub cert: Option<PathBuf>,
    /// The PEM private key of `cert` (servers only).
    pub key: Option<PathBuf>,
}

/// Why the TLS files could not be turned into a [`Transport`].
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file is larger than any certificate or key.
    #[error("{path} is larger than {max} bytes; is it a certificate?")]
    TooLarge { path: PathBuf, max: u64 },
    /// A file holds no PEM item of the kind expected, or bad PEM.
    #[error("{path} holds no usable {what}: {source}")]
    Pem {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A CA certificate was refused (not a CA, bad encoding).
    #[error("{path}: a certificate cannot serve as a CA: {source}")]
    Ca {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    /// A certificate was given without its key, or a key without its
    /// certificate.
    #[error("--tls-cert and --tls-key go together; only one was given")]
    CertWithoutKey,
    /// rustls refused the certificate and key (a key that does not match,
    /// an unsupported algorithm).
    #[error("the certificate and key cannot be used: {source}")]
    Config {
        #[source]
        source: rustls::Error,
    },
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TCP connection failed.
    #[error("cannot connect to {addr}: {source}")]
    Tcp {
        addr: String,
        #[source]
        source: io::Error,
    },
    /// The address has no host part that a certificate could name.
    #[error("{addr} is not a host:port a certificate can name")]
    ServerName { addr: String },
    /// The TLS handshake failed: the server does not speak TLS, or its
    /// certificate is not signed by the trusted CA or does not name `addr`.
    #[error("TLS handshake with {addr} failed (does it use TLS, with a certificate from this CA for this name?): {source}")]
    Handshake {
        addr: String,
        #[source]
        source: io::Error,
    },
    /// Connecting and the handshake did not finish in time.
    #[error("connecting to {addr} took longer than {after:?}")]
    Timeout { addr: String, after: Duration },
}

impl ConnectError {
    /// Whether the failure was the TLS handshake (as opposed to the
    /// network), which no retry will mend.
    pub fn is_handshake(&self) -> bool {
        matches!(self, ConnectError::Handshake { .. })
    }
}

/// How a process connects and accepts: plain TCP (the default) or TLS.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Transport {
    tls: Option<Arc<Tls>>,
}

struct Tls {
    connector: tokio_rustls::TlsConnector,
    /// Present when the process has a certificate to serve with.
    acceptor: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match &self.tls {
            None => "Transport(plain)",
            Some(tls) if tls.acceptor.is_some() => "Transport(tls, serving)",
            Some(_) => "Transport(tls)",
        })
    }
}

impl Transport {
    /// Plain TCP.
    pub fn plain() -> Transport {
        Transport::default()
    }

    /// TLS from PEM files: the CA always, the certificate and key when
    /// the process serves.
    pub fn tls(files: &TlsFiles) -> Result<Transport, TlsConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_pem::<CertificateDer<'static>>(&files.ca, "CA certificate")? {
            roots.add(cert).map_err(|source| TlsConfigError::Ca {
                path: files.ca.clone(),
                source,
            })?;
        }
        let roots = Arc::new(roots);
        let client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsConfigError::Config { source })?
            .with_root_certificates(roots.clone());
        let (client, acceptor) = match (&files.cert, &files.key) {
            (None, None) => (client.with_no_client_auth(), None),
            (Some(cert), Some(key)) => {
                let chain = read_pem::<CertificateDer<'static>>(cert, "certificate")?;
                let key_der = read_key(key)?;
                let config = |source| TlsConfigError::Config { source };
                // A server dials its peers with its own certificate.
                let client = client
                    .with_client_auth_cert(chain.clone(), key_der.clone_key())
                    .map_err(config)?;
                let peers = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots,
                    provider.clone(),
                )
                .allow_unauthenticated()
                .build()
                .map_err(|e| config(rustls::Error::General(e.to_string())))?;
                let mut server = rustls::ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(config)?
                    .with_client_cert_verifier(peers)
                    .with_single_cert(chain, key_der)
                    .map_err(config)?;
                // Connections live long and are few, so resumption saves
                // nothing; and a peer connection is only written, so
                // tickets would sit unread in its socket and turn its
                // close into a reset that the other side logs.
                server.send_tls13_tickets = 0;
                let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
                (client, Some(acceptor))
            }
            _ => return Err(TlsConfigError::CertWithoutKey),
        };
        Ok(Transport {
            tls: Some(Arc::new(Tls {
                connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
                acceptor,
            })),
        })
    }

    /// Whether connections are encrypted.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether this transport can accept: plain always, TLS only with a
    /// certificate and key.
    pub fn can_serve(&self) -> bool {
        self.tls.as_ref().is_none_or(|tls| tls.acceptor.is_some())
    }

    /// Opens a connection to `addr` (`host:port`), handshake included,
    /// within `timeout`. Nagle is off: every frame is a request or an
    /// answer someone waits for.
    pub async fn connect(&self, addr: &str, timeout: Duration) -> Result<Stream, ConnectError> {
        let timed_out = || ConnectError::Timeout {
            addr: addr.to_string(),
            after: timeout,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out())?
            .map_err(|source| ConnectError::Tcp {
                addr: addr.to_string(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let name = server_name(addr).ok_or_else(|| ConnectError::ServerName {
            addr: addr.to_string(),
        })?;
        let stream = tokio::time::timeout_at(deadline, tls.connector.connect(name, tcp))
            .await
            .map_err(|_| timed_out())?
            .map_err(|source| ConnectError::Handshake {
                addr: addr.to_string(),
                source,
            })?;
        Ok(Stream::Tls(Box::new(stream.into())))
    }

    /// Turns an accepted TCP connection into a [`Stream`], with the TLS
    /// handshake when this transport encrypts. A peer that does not finish
    /// it within `timeout` is an error; one whose first byte is not a TLS
    /// record (a plain client) is handed back, so that the server can tell
    /// it why in its own protocol.
    pub async fn accept(&self, tcp: TcpStream, timeout: Duration) -> Result<Stream, AcceptError> {
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let Some(acceptor) = &tls.acceptor else {
            return Err(AcceptError::NoCertificate);
        };
        let handshake = async {
            let mut first = [0u8; 1];
            if tcp.peek(&mut first).await? == 1 && first[0] != TLS_HANDSHAKE_RECORD {
                return Ok(Err(tcp));
            }
            acceptor.accept(tcp).await.map(Ok)
        };
        match tokio::time::timeout(timeout, handshake).await {
            Err(_) => Err(AcceptError::TimedOut { after: timeout }),
            Ok(Err(source)) => Err(AcceptError::Handshake { source }),
            Ok(Ok(Err(tcp))) => Err(AcceptError::Plain { tcp }),
            Ok(Ok(Ok(stream))) => Ok(Stream::Tls(Box::new(stream.into()))),
        }
    }
}

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Why an accepted connection could not be served.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The peer speaks plain TCP to a TLS listener; its connection is
    /// handed back untouched.
    #[error("a plain TCP client connected to a TLS port")]
    Plain { tcp: TcpStream },
    /// The handshake failed (a client that does not trust this
    /// certificate, a broken one).
    #[error("TLS handshake failed: {source}")]
    Handshake {
        #[source]
        source: io::Error,
    },
    /// The handshake did not finish in time.
    #[error("no TLS handshake within {after:?}")]
    TimedOut { after: Duration },
    /// TLS without a certificate and key cannot accept.
    #[error("TLS without a certificate cannot accept connections")]
    NoCertificate,
}

/// The name a dialer expects the server's certificate to carry: the host
/// of `host:port` (an IP address or a DNS name).
fn server_name(addr: &str) -> Option<ServerName<'static>> {
    let (host, _port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_string()).ok()
}

/// Whether a server listening on `addr` can be reached only from this
/// machine; one that is not, without TLS, warns at start.
pub fn is_loopback_only(addr: &std::net::SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The warning a server prints when it listens beyond loopback in plain
/// TCP, or `None` when it has nothing to warn about.
pub fn plain_listener_warning(
    addr: &std::net::SocketAddr,
    transport: &Transport,
) -> Option<String> {
    if transport.is_tls() || is_loopback_only(addr) {
        return None;
    }
    Some(format!(
        "listening on {addr} without TLS: anyone who can reach this port can read and \
         change traffic; pass --tls-ca, --tls-cert and --tls-key (docs/design/tls.md)"
    ))
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    use std::io::Read;
    let read = |source| TlsConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(TlsConfigError::TooLarge {
            path: path.to_path_buf(),
            max: PEM_FILE_BYTES_MAX,
        });
    }
    Ok(bytes)
}

fn read_pem<T: PemObject>(path: &Path, what: &'static str) -> Result<Vec<T>, TlsConfigError> {
    let bytes = read_bounded(path)?;
    let pem = |source| TlsConfigError::Pem {
        path: path.to_path_buf(),
        what,
        source,
    };
    let items = T::pem_slice_iter(&bytes)
        .collect::<Result<Vec<T>, _>>()
        .map_err(pem)?;
    if items.is_empty() {
        return Err(pem(rustls::pki_types::pem::Error::NoItemsFound));
    }
    Ok(items)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let bytes = read_bounded(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|source| TlsConfigError::Pem {
        path: path.to_path_buf(),
        what: "private key",
        source,
    })
}

/// One connection, plain or TLS, as the framing code sees it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// Whether the other end presented a certificate signed by the
    /// cluster's CA: a server of the cluster, not a client. Always false
    /// in plain TCP.
    pub fn peer_certified(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            // The verifier refused any certificate the CA did not sign,
            // so one that is there is the cluster's.
            Stream::Tls(tls) => tls.get_ref().1.peer_certificates().is_some(),
        }
    }

    /// The TCP connection underneath, for socket options.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
        }
    }

    /// Splits the stream so that one task reads while another writes.
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(tcp) => {
                let (read, write) = tcp.into_split();
                (ReadHalf::Plain(read), WriteHalf::Plain(write))
            }
            Stream::Tls(tls) => {
                let (read, write) = tokio::io::split(*tls);
                (ReadHalf::Tls(read), WriteHalf::Tls(write))
            }
        }
    }
}

/// The reading half of a [`Stream`].
pub enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<tokio_rustls::TlsStream<TcpStream>>),
}

/// The writing half of a [`Stream`]. With TLS, bytes reach the socket
/// only when written out by a flush or a later write: writers flush after
/// each batch of frames.
pub enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ReadHalf::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(s) => Pin::new(s).poll_write(cx, buf),
            WriteHalf::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(s) => Pin::new(s).poll_flush(cx),
            WriteHalf::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(s) => Pin::new(s).poll_shutdown(cx),
            WriteHalf::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certs::TestPki;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    const WAIT: Duration = Duration::from_secs(10);

    /// A listener that accepts one connection over `server` and echoes
    /// what it reads, then says whether the peer was certified, or
    /// reports why it could not accept.
    async fn echo_once(
        server: Transport,
    ) -> (String, tokio::task::JoinHandle<Result<bool, String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let stream = server.accept(tcp, WAIT).await.map_err(|e| match e {
                AcceptError::Plain { .. } => "plain".to_string(),
                other => other.to_string(),
            })?;
            let certified = stream.peer_certified();
            let (mut read, mut write) = stream.into_split();
            let mut buf = [0u8; 5];
            read.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            write.write_all(&buf).await.map_err(|e| e.to_string())?;
            write.flush().await.map_err(|e| e.to_string())?;
            Ok(certified)
        });
        (addr, task)
    }

    #[tokio::test]
    async fn tls_carries_bytes_and_refuses_strangers() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::generate(dir.path(), "good");
        let other = TestPki::generate(dir.path(), "other");
        let server = Transport::tls(&pki.server_files()).unwrap();
        let client = Transport::tls(&pki.client_files()).unwrap();
        assert!(server.can_serve() && !client.can_serve());

        // The right CA: bytes go through both ways, by IP and by name; a
        // client is not certified, a server dialing a peer is.
        for (host, dialer, certified) in [
            ("127.0.0.1", &client, false),
            ("localhost", &client, false),
            ("127.0.0.1", &server, true),
        ] {
            let (addr, task) = echo_once(server.clone()).await;
            let addr = addr.replace("127.0.0.1", host);
            let (mut read, mut write) = dialer.connect(&addr, WAIT).await.unwrap().into_split();
            write.write_all(b"hello").await.unwrap();
            write.flush().await.unwrap();
            let mut back = [0u8; 5];
            read.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"hello");
            assert_eq!(task.await.unwrap(), Ok(certified), "{host}");
        }
        // A dialer that trusts the cluster but presents another CA's
        // certificate is refused by the server, not taken for a client.
        let foreign_peer = Transport::tls(&TlsFiles {
            ca: pki.ca.clone(),
            cert: Some(other.cert.clone()),
            key: Some(other.key.clone()),
        })
        .unwrap();
        let (addr, task) = echo_once(server.clone()).await;
        // In TLS 1.3 the dialer may finish before the server checks it.
        if let Ok(stream) = foreign_peer.connect(&addr, WAIT).await {
            let (_read, mut write) = stream.into_split();
            let _ = write.write_all(b"hello").await;
            let _ = write.flush().await;
        }
        assert!(task.await.unwrap().is_err());

        // Another CA's client refuses the server's certificate.
        let stranger = Transport::tls(&other.client_files()).unwrap();
        let (addr, task) = echo_once(server.clone()).await;
        let refused = stranger.connect(&addr, WAIT).await.err().expect("refused");
        assert!(refused.is_handshake(), "{refused}");
        assert!(task.await.unwrap().is_err());

        // A plain client is handed back to the server as such.
        let (addr, task) = echo_once(server.clone()).await;
        let (_read, mut write) = Transport::plain()
            .connect(&addr, WAIT)
            .await
            .unwrap()
            .into_split();
        write.write_all(&[0, 0, 0, 1, 0]).await.unwrap();
        assert_eq!(task.await.unwrap(), Err("plain".to_string()));

        // A TLS client meeting a plain server fails its handshake.
        let (addr, _task) = echo_once(Transport::plain()).await;
        let refused = client.connect(&addr, WAIT).await.err().expect("refused");
        assert!(refused.is_handshake(), "{refused}");
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::generate(dir.path(), "good");
        let missing = TlsFiles {
            ca: dir.path().join("nope.pem"),
            ..pki.client_files()
        };
        assert!(matches!(
            Transport::tls(&missing),
            Err(TlsConfigError::Read { .. })
        ));
        // A key where the CA should be holds no certificate.
        let key_as_ca = TlsFiles {
            ca: pki.key.clone(),
            ..pki.client_files()
        };
        assert!(matches!(
            Transport::tls(&key_as_ca),
            Err(TlsConfigError::Pem { .. })
        ));
        let half = TlsFiles {
            key: None,
            ..pki.server_files()
        };
        assert!(matches!(
            Transport::tls(&half),
            Err(TlsConfigError::CertWithoutKey)
        ));
        // Another certificate's key does not match.
        let other = TestPki::generate(dir.path(), "other");
        let mismatched = TlsFiles {
            key: Some(other.key.clone()),
            ..pki.server_files()
        };
        assert!(matches!(
            Transport::tls(&mismatched),
            Err(TlsConfigError::Config { .. })
        ));
    }

    #[test]
    fn a_plain_listener_beyond_loopback_warns() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::generate(dir.path(), "good");
        let tls = Transport::tls(&pki.server_files()).unwrap();
        let plain = Transport::plain();
        let wide: std::net::SocketAddr = "0.0.0.0:1982".parse().unwrap();
        let lan: std::net::SocketAddr = "10.1.2.3:1982".parse().unwrap();
        let local: std::net::SocketAddr = "127.0.0.1:1982".parse().unwrap();
        let local6: std::net::SocketAddr = "[::1]:1982".parse().unwrap();
        for addr in [wide, lan] {
            let warning = plain_listener_warning(&addr, &plain).expect("a warning");
            assert!(warning.contains("without TLS") && warning.contains(&addr.to_string()));
            assert_eq!(plain_listener_warning(&addr, &tls), None);
        }
        for addr in [local, local6] {
            assert_eq!(plain_listener_warning(&addr, &plain), None);
        }
    }

    #[test]
    fn server_names_come_from_the_host() {
        assert!(matches!(
            server_name("127.0.0.1:1982"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:1982"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("db.example:1982"),
            Some(ServerName::DnsName(_))
        ));
        assert_eq!(server_name("no-port"), None);
    }
}
