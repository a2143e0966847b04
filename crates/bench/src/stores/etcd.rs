//! etcd through its v3 HTTP/JSON gateway (`/v3/kv/put`, `/v3/kv/range`) on
//! loopback, with a minimal keep-alive HTTP/1.1 client. Ranges are
//! linearizable (etcd's default); a record is one value.

use super::{encode_record, Pool};
use crate::driver::{BoxFuture, Outcome, Store};
use crate::workload::Op;
use anyhow::{bail, Context};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (the gateway's encoding of `bytes`).
pub fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// One keep-alive HTTP/1.1 connection.
pub struct HttpConn {
    stream: BufReader<TcpStream>,
    host: String,
}

impl HttpConn {
    pub async fn connect(addr: &str) -> anyhow::Result<HttpConn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(HttpConn {
            stream: BufReader::new(stream),
            host: addr.to_string(),
        })
    }

    /// POSTs a JSON body; returns the status code and the body.
    pub async fn post_json(&mut self, path: &str, body: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            bail!("the server closed the connection");
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the server closed the connection in the headers");
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.parse::<usize>()?);
                } else if name.eq_ignore_ascii_case("transfer-encoding")
                    && value.eq_ignore_ascii_case("chunked")
                {
                    chunked = true;
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.stream.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .with_context(|| format!("bad chunk size {line:?}"))?;
                let mut chunk = vec![0u8; size + 2];
                self.stream.read_exact(&mut chunk).await?;
                if size == 0 {
                    break;
                }
                chunk.truncate(size);
                body.extend_from_slice(&chunk);
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).await?;
        } else {
            bail!("a response without a length (keep-alive impossible)");
        }
        Ok((status, body))
    }
}

/// etcd as a [`Store`]: READ is a linearizable range on one key, INSERT
/// and UPDATE put the whole record.
/// Connections go to the members in turn, as etcd's own client balances
/// them (a follower passes a put to the leader).
pub struct EtcdStore {
    name: String,
    addrs: Vec<String>,
    next: AtomicUsize,
    pool: Pool<HttpConn>,
}

impl EtcdStore {
    /// A store named `name` on the members at `addrs` (comma-separated).
    pub fn new(name: &str, addrs: &str) -> EtcdStore {
        EtcdStore {
            name: name.to_string(),
            addrs: addrs.split(',').map(str::to_string).collect(),
            next: AtomicUsize::new(0),
            pool: Pool::default(),
        }
    }

    fn next_addr(&self) -> &str {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        &self.addrs[i % self.addrs.len()]
    }

    async fn post(&self, path: &'static str, body: String) -> anyhow::Result<Vec<u8>> {
        self.pool
            .with(
                || HttpConn::connect(self.next_addr()),
                |mut conn| async move {
                    let r = conn.post_json(path, &body).await;
                    let r = match r {
                        Ok((200, body)) => Ok(body),
                        Ok((status, body)) => Err(anyhow::anyhow!(
                            "etcd answered {status}: {}",
                            String::from_utf8_lossy(&body)
                        )),
                        Err(e) => Err(e),
                    };
                    (conn, r)
                },
            )
            .await
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> anyhow::Result<Outcome> {
        let body = format!(
            "{{\"key\":\"{}\",\"value\":\"{}\"}}",
            base64(key.as_bytes()),
            base64(&value)
        );
        self.post("/v3/kv/put", body).await?;
        Ok(Outcome::Ok)
    }

    async fn get(&self, key: &str) -> anyhow::Result<Outcome> {
        let body = format!("{{\"key\":\"{}\"}}", base64(key.as_bytes()));
        let answer = self.post("/v3/kv/range", body).await?;
        let json: serde_json::Value = serde_json::from_slice(&answer)?;
        Ok(match json.get("kvs").and_then(|k| k.as_array()) {
            Some(kvs) if !kvs.is_empty() => Outcome::Ok,
            _ => Outcome::NotFound,
        })
    }

    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        match op {
            Op::Insert { key, fields, .. } => self.put(key, encode_record(fields)).await,
            Op::Update { key, record, .. } => self.put(key, encode_record(record)).await,
            Op::Read { key } => self.get(key).await,
            Op::ReadModifyWrite { key, record, .. } => {
                self.get(key).await?;
                self.put(key, encode_record(record)).await
            }
            other => bail!("etcd does not support {}", other.kind()),
        }
    }
}

impl Store for EtcdStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn supports(&self, kind: &str) -> bool {
        matches!(kind, "INSERT" | "READ" | "UPDATE" | "READ-MODIFY-WRITE")
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(self.run(op))
    }
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
