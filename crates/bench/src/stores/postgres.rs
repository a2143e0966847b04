//! PostgreSQL through `tokio-postgres` (the wire protocol, prepared
//! statements, one connection — one backend — per operation in flight).
//! The YCSB table has the key as primary key and `recno` with a B-tree
//! index, so equality and range reads on it use the index.

use super::Pool;
use crate::driver::{BoxFuture, Outcome, Store};
use crate::workload::{field_name, Op};
use anyhow::{bail, Context};
use tokio_postgres::{Client, NoTls, Statement};

/// One connection with its prepared statements.
pub struct PgConn {
    client: Client,
    insert: Statement,
    read: Statement,
    update: Vec<Statement>,
    scan: Statement,
    search_eq: Statement,
    update_recno: Statement,
    _task: tokio::task::JoinHandle<()>,
}

/// A connection to `conninfo` and the task that drives it (it ends when
/// the client is dropped).
pub async fn connect(conninfo: &str) -> anyhow::Result<(Client, tokio::task::JoinHandle<()>)> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .with_context(|| format!("connecting to postgres ({conninfo})"))?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "postgres connection ended");
        }
    });
    Ok((client, task))
}

/// Runs `sql` (statements separated by `;`) on a connection of its own.
pub async fn batch(conninfo: &str, sql: &str) -> anyhow::Result<()> {
    let (client, task) = connect(conninfo).await?;
    client.batch_execute(sql).await?;
    drop(client);
    let _ = task.await;
    Ok(())
}

impl PgConn {
    pub async fn connect(conninfo: &str, fieldcount: usize) -> anyhow::Result<PgConn> {
        let (client, task) = connect(conninfo).await?;
        let fields: Vec<String> = (0..fieldcount).map(field_name).collect();
        let placeholders: Vec<String> = (0..fieldcount).map(|i| format!("${}", i + 3)).collect();
        let insert = client
            .prepare(&format!(
                "INSERT INTO usertable (ycsb_key, recno{}{}) VALUES ($1, $2{}{})",
                if fields.is_empty() { "" } else { ", " },
                fields.join(", "),
                if fields.is_empty() { "" } else { ", " },
                placeholders.join(", ")
            ))
            .await?;
        let read = client
            .prepare("SELECT * FROM usertable WHERE ycsb_key = $1")
            .await?;
        let mut update = Vec::with_capacity(fieldcount);
        for f in &fields {
            update.push(
                client
                    .prepare(&format!(
                        "UPDATE usertable SET {f} = $2 WHERE ycsb_key = $1"
                    ))
                    .await?,
            );
        }
        let scan = client
            .prepare(
                "SELECT * FROM usertable WHERE recno >= $1 AND recno < $2 ORDER BY recno LIMIT $3",
            )
            .await?;
        let search_eq = client
            .prepare("SELECT * FROM usertable WHERE recno = $1")
            .await?;
        let update_recno = client
            .prepare("UPDATE usertable SET recno = $2 WHERE ycsb_key = $1")
            .await?;
        Ok(PgConn {
            client,
            insert,
            read,
            update,
            scan,
            search_eq,
            update_recno,
            _task: task,
        })
    }

    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        match op {
            Op::Insert { key, recno, fields } => {
                let texts: Vec<String> = fields
                    .iter()
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect();
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![key, recno];
                for t in &texts {
                    params.push(t);
                }
                self.client.execute(&self.insert, &params).await?;
                Ok(Outcome::Ok)
            }
            Op::Read { key } => found(self.client.query_opt(&self.read, &[key]).await?.is_some()),
            Op::Update {
                key, field, value, ..
            } => self.update(key, *field, value).await,
            Op::ReadModifyWrite {
                key, field, value, ..
            } => {
                self.client.query_opt(&self.read, &[key]).await?;
                self.update(key, *field, value).await
            }
            Op::Scan {
                start,
                window,
                count,
            } => {
                let end = start.saturating_add(*window);
                let limit = *count as i64;
                let rows = self
                    .client
                    .query(&self.scan, &[start, &end, &limit])
                    .await?;
                found(!rows.is_empty())
            }
            Op::SearchEq { recno } => found(
                !self
                    .client
                    .query(&self.search_eq, &[recno])
                    .await?
                    .is_empty(),
            ),
            Op::UpdateIndexed { key, recno } => {
                let n = self
                    .client
                    .execute(&self.update_recno, &[key, recno])
                    .await?;
                found(n > 0)
            }
        }
    }

    async fn update(&self, key: &str, field: usize, value: &[u8]) -> anyhow::Result<Outcome> {
        let statement = self
            .update
            .get(field)
            .with_context(|| format!("no field {field}"))?;
        let text = String::from_utf8_lossy(value).into_owned();
        let n = self.client.execute(statement, &[&key, &text]).await?;
        found(n > 0)
    }
}

fn found(yes: bool) -> anyhow::Result<Outcome> {
    Ok(if yes { Outcome::Ok } else { Outcome::NotFound })
}

/// PostgreSQL as a [`Store`].
pub struct PostgresStore {
    conninfo: String,
    fieldcount: usize,
    pool: Pool<PgConn>,
}

impl PostgresStore {
    pub fn new(conninfo: &str, fieldcount: usize) -> PostgresStore {
        PostgresStore {
            conninfo: conninfo.to_string(),
            fieldcount,
            pool: Pool::default(),
        }
    }

    /// Drops and creates `usertable` with its `recno` index.
    pub async fn create_table(&self) -> anyhow::Result<()> {
        let fields: String = (0..self.fieldcount)
            .map(|i| format!(", {} TEXT", field_name(i)))
            .collect();
        let sql = format!(
            "DROP TABLE IF EXISTS usertable;
             CREATE TABLE usertable (ycsb_key TEXT PRIMARY KEY, recno BIGINT NOT NULL{fields});
             CREATE INDEX usertable_recno ON usertable (recno);"
        );
        batch(&self.conninfo, &sql)
            .await
            .context("creating usertable")
    }
}

impl Store for PostgresStore {
    fn name(&self) -> &str {
        "postgres"
    }

    fn supports(&self, _kind: &str) -> bool {
        true
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(async move {
            if self.fieldcount == 0 && matches!(op, Op::Update { .. }) {
                bail!("no fields to update");
            }
            self.pool
                .with(
                    || PgConn::connect(&self.conninfo, self.fieldcount),
                    |conn| async move {
                        let r = conn.run(op).await;
                        (conn, r)
                    },
                )
                .await
        })
    }
}
