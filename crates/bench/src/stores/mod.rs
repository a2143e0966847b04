//! The systems under test: Tessera and the baselines (Redis, etcd,
//! PostgreSQL, HyperDex), each behind
//! [`crate::driver::Store`].

pub mod etcd;
pub mod hyperdex;
pub mod postgres;
pub mod redis;
pub mod tessera;

use std::future::Future;
use tokio::sync::Mutex;

/// Connections handed out one per in-flight operation and returned after
/// it, so with `W` workers at most `W` connections exist.
pub struct Pool<C> {
    idle: Mutex<Vec<C>>,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Pool {
            idle: Mutex::new(Vec::new()),
        }
    }
}

impl<C> Pool<C> {
    /// Runs `f` with an idle connection, or a new one from `open`. A
    /// connection whose operation failed is dropped rather than reused.
    pub async fn with<T, O, OF, F, FF>(&self, open: O, f: F) -> anyhow::Result<T>
    where
        O: FnOnce() -> OF,
        OF: Future<Output = anyhow::Result<C>>,
        F: FnOnce(C) -> FF,
        FF: Future<Output = (C, anyhow::Result<T>)>,
    {
        let idle = self.idle.lock().await.pop();
        let conn = match idle {
            Some(c) => c,
            None => open().await?,
        };
        let (conn, result) = f(conn).await;
        if result.is_ok() {
            self.idle.lock().await.push(conn);
        }
        result
    }
}

/// A record as one value, for stores without fields: the fields joined by
/// the unit separator byte (0x1f), which random values never contain.
pub fn encode_record(fields: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.len() + 1).sum());
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(0x1f);
        }
        out.extend_from_slice(f);
    }
    out
}
