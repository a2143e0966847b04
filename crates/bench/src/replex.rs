//! Replex spaces against the HyperDex layout (issue 13, point 6; Replex,
//! USENIX ATC '16, §5.1): the same YCSB record, the same secondary
//! attribute (`recno`) searchable, the same failures tolerated, on one
//! cluster one layout after the other.
//!
//! - **HyperDex layout:** the key subspace and a `recno` subspace, each
//!   region replicated `f + 1` times: `2 (f + 1)` copies, and an insert
//!   walks them all.
//! - **Replex-2:** the key subspace and `replex recno`, one copy each:
//!   tolerates one failure with two copies.
//! - **Replex-3:** the key subspace, `hybrid k, recno groups n1, n2` and
//!   `replex recno`: tolerates two failures with three copies. The chain
//!   order is key → hybrid → replex, the paper's A → H → B.
//!
//! Each layout gets a fresh space: a YCSB load of `records` records
//! (insert throughput and latency, the paper's Fig. 8), then YCSB A, B, C
//! and F. Storage per object is measured where the daemons serve metrics:
//! the growth of their `disk_bytes` over the load, per record loaded
//! (the journal included, so it is the bytes a load leaves on disk), beside
//! the copies the configuration keeps of each object.

use crate::driver::{run_phase, Load, PhaseResult, Store};
use crate::scenarios::{fresh_space, wait_space, ycsb_letters, CompareSize};
use crate::stores::tessera::TesseraStore;
use crate::workload::{field_name, InsertSequence, LoadOps, Workload};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tessera_client::{Admin, Client, Configuration};

/// The YCSB workloads the paper runs beside the load (Fig. 10).
pub const REPLEX_YCSB: [char; 4] = ['a', 'b', 'c', 'f'];

/// How long one daemon's metrics page may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// A layout the benchmark compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ReplexLayout {
    /// The key subspace and a `recno` subspace, `f + 1` replicas each.
    HyperDex { tolerate: u32 },
    /// The key subspace and `replex recno`.
    Replex2,
    /// The key subspace, a hybrid of it and `recno`, and `replex recno`.
    Replex3,
}

impl ReplexLayout {
    /// The layouts of the paper's steady-state comparison, plus Replex-2
    /// and the HyperDex layout with its fault tolerance.
    pub const ALL: [ReplexLayout; 4] = [
        ReplexLayout::HyperDex { tolerate: 2 },
        ReplexLayout::Replex3,
        ReplexLayout::HyperDex { tolerate: 1 },
        ReplexLayout::Replex2,
    ];

    /// Its name in tables: `hyperdex-f2`, `replex-3`, ….
    pub fn name(self) -> String {
        match self {
            ReplexLayout::HyperDex { tolerate } => format!("hyperdex-f{tolerate}"),
            ReplexLayout::Replex2 => "replex-2".to_string(),
            ReplexLayout::Replex3 => "replex-3".to_string(),
        }
    }

    /// Failures tolerated.
    pub fn tolerate(self) -> u32 {
        match self {
            ReplexLayout::HyperDex { tolerate } => tolerate,
            ReplexLayout::Replex2 => 1,
            ReplexLayout::Replex3 => 2,
        }
    }

    /// Copies of every object.
    pub fn copies(self) -> u32 {
        match self {
            ReplexLayout::HyperDex { tolerate } => 2 * (tolerate + 1),
            ReplexLayout::Replex2 => 2,
            ReplexLayout::Replex3 => 3,
        }
    }

    /// The space description: the YCSB record (`k`, `recno`, 10 fields)
    /// with this layout's parts over `partitions` partitions.
    pub fn description(self, name: &str, partitions: u32) -> String {
        let fields: Vec<String> = (0..10).map(field_name).collect();
        let parts = match self {
            ReplexLayout::HyperDex { .. } => "subspace recno".to_string(),
            ReplexLayout::Replex2 => "replex recno".to_string(),
            ReplexLayout::Replex3 => {
                let (n1, n2) = hybrid_groups(partitions);
                format!("replex recno hybrid k, recno groups {n1}, {n2}")
            }
        };
        let tolerate = self.tolerate();
        format!(
            "space {name} key k attributes int recno, {} {parts} create {partitions} partitions tolerate {tolerate} {}",
            fields.join(", "),
            if tolerate == 1 { "failure" } else { "failures" }
        )
    }
}

/// The hybrid's group counts for `partitions` partitions: `n1 · n2 =
/// partitions` with `n1` the largest divisor not above its square root, so
/// that a lost region of either side is found in about √p regions (the
/// paper's 3 × 4 for 12).
pub fn hybrid_groups(partitions: u32) -> (u32, u32) {
    let p = partitions.max(1);
    let n1 = (1..=p)
        .take_while(|n| n * n <= p)
        .filter(|n| p.is_multiple_of(*n))
        .last()
        .unwrap_or(1);
    (n1, p / n1)
}

/// One layout's run.
#[derive(Clone, Debug, Serialize)]
pub struct LayoutRun {
    pub layout: String,
    pub tolerate: u32,
    pub description: String,
    /// Copies the configuration keeps of each object: the object-holding
    /// parts' chain lengths, added up.
    pub copies: u32,
    /// Disk bytes the load added, per record, over every daemon; `None`
    /// without metrics.
    pub disk_bytes_per_object: Option<f64>,
    /// `load`, then `ycsb-a`, `ycsb-b`, `ycsb-c`, `ycsb-f`.
    pub results: Vec<PhaseResult>,
}

/// Runs every layout of `layouts` against the cluster at `coordinator`,
/// one after the other, on a fresh space each.
pub async fn steady(
    coordinator: &str,
    layouts: &[ReplexLayout],
    size: CompareSize,
    partitions: u32,
) -> anyhow::Result<Vec<LayoutRun>> {
    let admin = Admin::new(coordinator);
    let client = Client::connect(coordinator).await?;
    let mut runs = Vec::new();
    for &layout in layouts {
        let name = format!("bench_{}", layout.name().replace('-', "_"));
        let description = layout.description(&name, partitions);
        eprintln!("bench replex: {}: {description}", layout.name());
        fresh_space(&admin, &name, &description).await?;
        wait_space(&client, &name).await?;
        let store: Arc<dyn Store> =
            Arc::new(TesseraStore::new(client.clone(), &name, size.fieldcount));
        let disk_before = disk_bytes(&admin.config().await?).await;
        let mut results = vec![load(store.clone(), size).await?];
        let config = admin.config().await?;
        let disk_after = disk_bytes(&config).await;
        let loaded = results[0].ops.values().map(|s| s.count).sum::<u64>();
        let (more, _) = ycsb_letters(store, size, size.records, &REPLEX_YCSB).await?;
        results.extend(more);
        for r in &mut results {
            r.store = layout.name();
        }
        runs.push(LayoutRun {
            layout: layout.name(),
            tolerate: layout.tolerate(),
            description,
            copies: copies(&config, &name).unwrap_or(0),
            disk_bytes_per_object: match (disk_before, disk_after) {
                (Some(b), Some(a)) if loaded > 0 => Some((a - b) / loaded as f64),
                _ => None,
            },
            results,
        });
        admin.rm_space(&name).await?;
    }
    Ok(runs)
}

/// The YCSB load of `size.records` records.
async fn load(store: Arc<dyn Store>, size: CompareSize) -> anyhow::Result<PhaseResult> {
    let w = Arc::new(Workload {
        fieldcount: size.fieldcount,
        fieldlength: size.fieldlength,
        ..Workload::core('a', size.records, 0).expect("workload a")
    });
    let seq = Arc::new(InsertSequence::new(0));
    let phase = Load {
        workers: size.workers,
        operations: size.records,
        time_limit: size.time_limit,
    };
    run_phase(store, "load", phase, move |i| {
        Box::new(LoadOps::new(w.clone(), seq.clone(), 1000 + i as u64))
    })
    .await
}

/// Copies of each object of space `name`: for every part that holds
/// objects, the length of its first region's chain.
fn copies(config: &Configuration, name: &str) -> Option<u32> {
    let space = config.space(name)?;
    Some(
        space
            .subspaces
            .iter()
            .filter(|l| l.kind.holds_objects())
            .filter_map(|l| l.regions.first())
            .map(|r| r.chain.len() as u32)
            .sum(),
    )
}

/// The bytes on disk of every daemon that serves metrics; `None` when one
/// does not, or its page cannot be read.
async fn disk_bytes(config: &Configuration) -> Option<f64> {
    let mut total = 0.0;
    for daemon in config.daemons.values() {
        let url = daemon.metrics.as_ref()?;
        let page = tessera_observe::scrape::fetch(url, SCRAPE_TIMEOUT)
            .await
            .ok()?;
        total += tessera_observe::scrape::samples(&page)
            .find(|s| s.name == "tessera_daemon_disk_bytes")?
            .value;
    }
    Some(total)
}

/// The table of a run: per phase, each layout's throughput and its main
/// operation's p50 and p99, then Replex ÷ HyperDex at equal fault
/// tolerance.
pub fn table(runs: &[LayoutRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>6} {:>16}   {:<8} {:>10} {:>9} {:>9}",
        "layout", "copies", "disk B/object", "phase", "ops/s", "p50 µs", "p99 µs"
    );
    for run in runs {
        for r in &run.results {
            let main = r.ops.iter().max_by_key(|(_, s)| s.count);
            let (p50, p99) = main.map_or((0, 0), |(_, s)| (s.p50_us, s.p99_us));
            let _ = writeln!(
                out,
                "{:<12} {:>6} {:>16}   {:<8} {:>10.0} {:>9} {:>9}",
                run.layout,
                run.copies,
                run.disk_bytes_per_object
                    .map_or("-".to_string(), |b| format!("{b:.0}")),
                r.phase,
                r.throughput,
                p50,
                p99
            );
        }
    }
    for replex in runs.iter().filter(|r| r.layout.starts_with("replex")) {
        let Some(hyperdex) = runs
            .iter()
            .find(|h| h.layout.starts_with("hyperdex") && h.tolerate == replex.tolerate)
        else {
            continue;
        };
        let _ = writeln!(
            out,
            "\n{} ÷ {} (same failures tolerated: {}):",
            replex.layout, hyperdex.layout, replex.tolerate
        );
        for r in &replex.results {
            let Some(h) = hyperdex.results.iter().find(|h| h.phase == r.phase) else {
                continue;
            };
            let p50 = |x: &PhaseResult| {
                x.ops
                    .iter()
                    .max_by_key(|(_, s)| s.count)
                    .map_or(0, |(_, s)| s.p50_us)
            };
            let _ = writeln!(
                out,
                "  {:<8} throughput ×{:.2}, p50 ×{:.2}",
                r.phase,
                r.throughput / h.throughput.max(1e-9),
                p50(r) as f64 / p50(h).max(1) as f64
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    #[test]
    fn hybrid_groups_multiply_to_the_partitions_nearest_the_square_root() {
        assert_eq!(hybrid_groups(12), (3, 4));
        assert_eq!(hybrid_groups(24), (4, 6));
        assert_eq!(hybrid_groups(16), (4, 4));
        assert_eq!(hybrid_groups(7), (1, 7));
        assert_eq!(hybrid_groups(1), (1, 1));
    }

    #[test]
    fn every_layout_describes_a_space_with_its_copies_and_tolerance() {
        for layout in ReplexLayout::ALL {
            for partitions in [4, 12, 24] {
                let text = layout.description("t", partitions);
                let space = parse_space(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(space.fault_tolerance, layout.tolerate(), "{text}");
                let copies = match &space.replex {
                    Some(r) => 1 + r.replexes.len() + r.hybrids.len(),
                    None => (1 + space.subspaces.len()) * (space.fault_tolerance as usize + 1),
                };
                assert_eq!(copies as u32, layout.copies(), "{text}");
            }
        }
    }
}
