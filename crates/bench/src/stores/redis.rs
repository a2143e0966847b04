//! Redis through a minimal RESP2 client: a record is one string value
//! (GET / SET), as a key-value store without fields holds it.

use super::{encode_record, Pool};
use crate::driver::{BoxFuture, Outcome, Store};
use crate::workload::Op;
use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One Redis connection.
pub struct RedisConn {
    stream: BufReader<TcpStream>,
}

/// A RESP reply (the kinds GET, SET and PING answer with).
#[derive(Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
}

impl RedisConn {
    pub async fn connect(addr: &str) -> anyhow::Result<RedisConn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to redis at {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(RedisConn {
            stream: BufReader::new(stream),
        })
    }

    /// Sends one command and reads its reply.
    pub async fn command(&mut self, args: &[&[u8]]) -> anyhow::Result<Reply> {
        let mut out = Vec::with_capacity(64 + args.iter().map(|a| a.len() + 16).sum::<usize>());
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.get_mut().write_all(&out).await?;
        self.read_reply().await
    }

    async fn read_reply(&mut self) -> anyhow::Result<Reply> {
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            bail!("redis closed the connection");
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let (tag, rest) = line.split_at(1.min(line.len()));
        match tag {
            "+" => Ok(Reply::Simple(rest.to_string())),
            "-" => bail!("redis error: {rest}"),
            ":" => Ok(Reply::Int(rest.parse()?)),
            "$" => {
                let len: i64 = rest.parse()?;
                if len < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut buf = vec![0u8; len as usize + 2];
                self.stream.read_exact(&mut buf).await?;
                buf.truncate(len as usize);
                Ok(Reply::Bulk(Some(buf)))
            }
            other => bail!("unexpected redis reply {other:?}"),
        }
    }
}

/// Redis as a [`Store`]: READ is GET, INSERT and UPDATE are SET of the
/// whole record (Redis strings have no fields).
pub struct RedisStore {
    addr: String,
    pool: Pool<RedisConn>,
}

impl RedisStore {
    pub fn new(addr: &str) -> RedisStore {
        RedisStore {
            addr: addr.to_string(),
            pool: Pool::default(),
        }
    }

    async fn call(&self, args: Vec<Vec<u8>>) -> anyhow::Result<Reply> {
        self.pool
            .with(
                || RedisConn::connect(&self.addr),
                |mut conn| async move {
                    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                    let r = conn.command(&refs).await;
                    (conn, r)
                },
            )
            .await
    }

    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        match op {
            Op::Insert { key, fields, .. } => self.set(key, encode_record(fields)).await,
            Op::Update { key, record, .. } => self.set(key, encode_record(record)).await,
            Op::Read { key } => self.get(key).await,
            Op::ReadModifyWrite { key, record, .. } => {
                self.get(key).await?;
                self.set(key, encode_record(record)).await
            }
            other => bail!("redis does not support {}", other.kind()),
        }
    }

    async fn set(&self, key: &str, value: Vec<u8>) -> anyhow::Result<Outcome> {
        match self
            .call(vec![b"SET".to_vec(), key.as_bytes().to_vec(), value])
            .await?
        {
            Reply::Simple(s) if s == "OK" => Ok(Outcome::Ok),
            other => bail!("SET answered {other:?}"),
        }
    }

    async fn get(&self, key: &str) -> anyhow::Result<Outcome> {
        match self
            .call(vec![b"GET".to_vec(), key.as_bytes().to_vec()])
            .await?
        {
            Reply::Bulk(Some(_)) => Ok(Outcome::Ok),
            Reply::Bulk(None) => Ok(Outcome::NotFound),
            other => bail!("GET answered {other:?}"),
        }
    }
}

impl Store for RedisStore {
    fn name(&self) -> &str {
        "redis"
    }

    fn supports(&self, kind: &str) -> bool {
        matches!(kind, "INSERT" | "READ" | "UPDATE" | "READ-MODIFY-WRITE")
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(self.run(op))
    }
}
