//! Tessera through the async `tessera_client::Client`.

use crate::driver::{BoxFuture, Outcome, Store};
use crate::workload::{field_name, Op};
use tessera_client::{Client, PredOp, Value};

/// The YCSB table as a Tessera space: the key `k`, the key's numeric
/// suffix as `int recno`, and `fieldcount` string fields. With
/// `recno_subspace`, `recno` has a subspace of its own, so scans and
/// equality searches on it contact few regions.
pub fn usertable_description(
    space: &str,
    fieldcount: usize,
    recno_subspace: bool,
    partitions: u32,
    tolerate: u32,
) -> String {
    let fields: Vec<String> = (0..fieldcount).map(field_name).collect();
    format!(
        "space {space} key k attributes int recno{}{} {} create {partitions} partitions tolerate {tolerate} {}",
        if fields.is_empty() { "" } else { ", " },
        fields.join(", "),
        if recno_subspace { "subspace recno" } else { "" },
        if tolerate == 1 { "failure" } else { "failures" },
    )
}

/// A Tessera space holding the YCSB record shape.
pub struct TesseraStore {
    client: Client,
    space: String,
    fields: Vec<String>,
}

impl TesseraStore {
    pub fn new(client: Client, space: &str, fieldcount: usize) -> TesseraStore {
        TesseraStore {
            client,
            space: space.to_string(),
            fields: (0..fieldcount).map(field_name).collect(),
        }
    }

    async fn get(&self, key: &str) -> anyhow::Result<Outcome> {
        Ok(match self.client.get(&self.space, Value::str(key)).await? {
            Some(_) => Outcome::Ok,
            None => Outcome::NotFound,
        })
    }

    async fn put_field(&self, key: &str, field: usize, value: &[u8]) -> anyhow::Result<Outcome> {
        let name = self
            .fields
            .get(field)
            .ok_or_else(|| anyhow::anyhow!("no field {field}"))?;
        self.client
            .put(
                &self.space,
                Value::str(key),
                [(name.as_str(), Value::String(value.to_vec()))],
            )
            .await?
            .into_result()?;
        Ok(Outcome::Ok)
    }

    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        match op {
            Op::Insert { key, recno, fields } => {
                let mut attrs: Vec<(&str, Value)> = Vec::with_capacity(fields.len() + 1);
                attrs.push(("recno", Value::Int(*recno)));
                for (name, value) in self.fields.iter().zip(fields.iter()) {
                    attrs.push((name.as_str(), Value::String(value.clone())));
                }
                self.client
                    .put(&self.space, Value::str(key), attrs)
                    .await?
                    .into_result()?;
                Ok(Outcome::Ok)
            }
            Op::Read { key } => self.get(key).await,
            Op::Update {
                key, field, value, ..
            } => self.put_field(key, *field, value).await,
            Op::ReadModifyWrite {
                key, field, value, ..
            } => {
                self.get(key).await?;
                self.put_field(key, *field, value).await
            }
            Op::Scan {
                start,
                window,
                count,
            } => {
                let stream = self.client.sorted_search_stream(
                    &self.space,
                    [
                        ("recno", PredOp::Ge(Value::Int(*start))),
                        (
                            "recno",
                            PredOp::Lt(Value::Int(start.saturating_add(*window))),
                        ),
                    ],
                    "recno",
                    *count,
                    false,
                );
                found_any(stream).await
            }
            Op::SearchEq { recno } => {
                let stream = self
                    .client
                    .search_stream(&self.space, [("recno", PredOp::Eq(Value::Int(*recno)))]);
                found_any(stream).await
            }
            Op::UpdateIndexed { key, recno } => {
                self.client
                    .put(
                        &self.space,
                        Value::str(key),
                        [("recno", Value::Int(*recno))],
                    )
                    .await?
                    .into_result()?;
                Ok(Outcome::Ok)
            }
        }
    }
}

impl Store for TesseraStore {
    fn name(&self) -> &str {
        "tessera"
    }

    fn supports(&self, _kind: &str) -> bool {
        true
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(self.run(op))
    }
}

/// Reads a search's every result as PostgreSQL's client reads a query's
/// rows: each object received and checked, none of its values decoded
/// (a [`tessera_client::RawRecord`], like tokio-postgres's `Row`).
async fn found_any(mut stream: tessera_client::SearchStream) -> anyhow::Result<Outcome> {
    let mut found = 0usize;
    while let Some(record) = stream.next_raw().await {
        record?;
        found += 1;
    }
    Ok(if found == 0 {
        Outcome::NotFound
    } else {
        Outcome::Ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_parses() {
        for (sub, fields) in [(true, 10), (false, 10), (true, 0)] {
            let d = usertable_description("usertable", fields, sub, 8, 1);
            let parsed =
                tessera_types::parse::parse_space(&d).unwrap_or_else(|e| panic!("{d}: {e}"));
            assert_eq!(parsed.attrs.len(), fields + 2, "{d}");
        }
    }
}
