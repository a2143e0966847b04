//! The live dashboard a coordinator member serves beside its `/metrics`:
//! `GET /` is one HTML page (script and style inline, nothing fetched from
//! elsewhere) that polls `GET /api/cluster` about once a second and draws
//! what it answers.
//!
//! ```text
//!  browser ──GET /api/cluster──▶ snapshot(configuration, loads) ──▶ JSON
//!     ▲                                           ▲
//!     └─ draws daemons, region grids,             │ every second, while a
//!        parts, events (diffs of snapshots)       │ page polled lately
//!                                     LoadScraper ─┴─ GET each daemon's /metrics
//! ```
//!
//! The snapshot is the applied configuration (daemons and their state,
//! spaces with each subspace's grid of regions and their chains, local
//! indexes, part states with building progress, transfers, the tombstone
//! horizon, the epoch) plus each daemon's load. The load comes from the
//! daemons' own Prometheus pages, whose URLs the configuration carries:
//! heartbeats carry no load and adding it to the protocol would put the
//! dashboard on the daemons' path. The scraper only runs while someone
//! watches (a page polled within [`WATCH_WINDOW`]), so a coordinator
//! nobody looks at reads nothing.
//!
//! Events (a daemon going offline, a space appearing, a transfer starting)
//! are derived by the page from successive snapshots; the member keeps no
//! history.

use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_observe::http::{Response, StatusCode};
use tessera_types::{Configuration, DaemonId, DaemonState, PartState, Space};
use tokio::sync::watch;
use tokio::time::Instant;

/// The page, with its script and style.
pub(crate) const PAGE: &str = include_str!("dashboard.html");
/// Where the page reads its snapshots.
pub(crate) const API_PATH: &str = "/api/cluster";
/// How often the daemons' pages are read while someone watches.
pub(crate) const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);
/// How long after the last snapshot request the scraper keeps reading.
pub(crate) const WATCH_WINDOW: Duration = Duration::from_secs(10);
/// Two reads further apart than this give no rate.
const RATE_GAP_MAX: Duration = Duration::from_secs(5);
/// How long one daemon's page may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(800);

/// What one read of a daemon's page gave, added up over its series.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PageTotals {
    /// `tessera_daemon_requests_total`, every op and status.
    pub requests: f64,
    /// `tessera_daemon_request_duration_seconds_sum`, every op.
    pub latency_seconds: f64,
    /// `tessera_daemon_request_duration_seconds_count`, every op.
    pub latency_count: f64,
    pub regions: Option<f64>,
    pub regions_led: Option<f64>,
    pub disk_bytes: Option<f64>,
}

impl PageTotals {
    /// The totals of a daemon's metrics page.
    pub fn read(page: &str) -> PageTotals {
        let mut totals = PageTotals::default();
        for sample in tessera_observe::scrape::samples(page) {
            match sample.name {
                "tessera_daemon_requests_total" => totals.requests += sample.value,
                "tessera_daemon_request_duration_seconds_sum" => {
                    totals.latency_seconds += sample.value
                }
                "tessera_daemon_request_duration_seconds_count" => {
                    totals.latency_count += sample.value
                }
                "tessera_daemon_regions" => totals.regions = Some(sample.value),
                "tessera_daemon_regions_led" => totals.regions_led = Some(sample.value),
                "tessera_daemon_disk_bytes" => totals.disk_bytes = Some(sample.value),
                _ => {}
            }
        }
        totals
    }
}

/// A daemon's load as the last two reads of its page show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DaemonLoad {
    /// The last read that succeeded, and when.
    last: Option<(Instant, PageTotals)>,
    /// Requests per second between the last two reads.
    pub ops_per_s: Option<f64>,
    /// Mean request latency between the last two reads, in milliseconds
    /// (`None` when no request finished in between).
    pub latency_ms_mean: Option<f64>,
    /// Why the last read failed, if it did.
    pub error: Option<String>,
}

impl DaemonLoad {
    /// Takes in a successful read at `now`.
    pub fn update(&mut self, now: Instant, totals: PageTotals) {
        if let Some((then, before)) = self.last {
            let seconds = now.saturating_duration_since(then).as_secs_f64();
            let requests = totals.requests - before.requests;
            let count = totals.latency_count - before.latency_count;
            // A smaller total means the daemon restarted and its counters
            // began again, and a long gap (nobody watched, reads failed)
            // would show an old average as current: no rate for either.
            let fresh = seconds > 0.0 && seconds <= RATE_GAP_MAX.as_secs_f64();
            let sane = fresh && requests >= 0.0 && count >= 0.0;
            self.ops_per_s = sane.then(|| requests / seconds);
            self.latency_ms_mean = (sane && count > 0.0)
                .then(|| (totals.latency_seconds - before.latency_seconds) / count * 1000.0);
        }
        self.last = Some((now, totals));
        self.error = None;
    }

    /// Takes in a failed read: the rates are no longer current.
    pub fn failed(&mut self, why: String) {
        self.ops_per_s = None;
        self.latency_ms_mean = None;
        self.error = Some(why);
    }

    fn json(&self) -> Json {
        let totals = self.last.map(|(_, t)| t).unwrap_or_default();
        json!({
            "ops_per_s": self.ops_per_s,
            "latency_ms_mean": self.latency_ms_mean,
            "requests_total": self.last.map(|(_, t)| t.requests),
            "regions": totals.regions,
            "regions_led": totals.regions_led,
            "disk_bytes": totals.disk_bytes,
            "error": self.error,
        })
    }
}

/// The dashboard's state in a member: the loads and when a page last asked.
pub(crate) struct Dashboard {
    loads: Mutex<BTreeMap<DaemonId, DaemonLoad>>,
    watched_at: Mutex<Option<Instant>>,
}

impl Dashboard {
    pub fn new() -> Dashboard {
        Dashboard {
            loads: Mutex::new(BTreeMap::new()),
            watched_at: Mutex::new(None),
        }
    }

    fn loads(&self) -> std::sync::MutexGuard<'_, BTreeMap<DaemonId, DaemonLoad>> {
        // Plain bookkeeping: a panic elsewhere leaves nothing half-done.
        self.loads.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watched_at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.watched_at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer to `GET /api/cluster`; marks the dashboard as watched.
    pub fn api(&self, config: &Configuration, member: MemberView) -> Response {
        *self.watched_at() = Some(Instant::now());
        let body = snapshot(config, &self.loads(), &member).to_string();
        Response {
            status: StatusCode::Ok,
            content_type: "application/json",
            body,
        }
    }

    /// The answer to `GET /`.
    pub fn page() -> Response {
        Response {
            status: StatusCode::Ok,
            content_type: "text/html; charset=utf-8",
            body: PAGE.to_string(),
        }
    }

    /// Reads every daemon's metrics page once a [`SCRAPE_INTERVAL`] while
    /// the dashboard is watched; runs until the task is aborted.
    pub async fn scrape(self: Arc<Self>, config: watch::Receiver<Arc<Configuration>>) {
        let mut ticks = tokio::time::interval(SCRAPE_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let watched = self
                .watched_at()
                .is_some_and(|at| at.elapsed() < WATCH_WINDOW);
            if !watched {
                // Figures kept while nobody watches would be stale when
                // someone looks again.
                self.loads().clear();
                continue;
            }
            let config = config.borrow().clone();
            let mut reads = tokio::task::JoinSet::new();
            for daemon in config.daemons.values() {
                let Some(url) = daemon.metrics.clone() else {
                    continue;
                };
                if daemon.state != DaemonState::Available {
                    continue;
                }
                let id = daemon.id;
                reads.spawn(async move {
                    let read = tessera_observe::scrape::fetch(&url, SCRAPE_TIMEOUT).await;
                    (id, Instant::now(), read)
                });
            }
            while let Some(done) = reads.join_next().await {
                let Ok((id, at, read)) = done else { continue };
                let mut loads = self.loads();
                let load = loads.entry(id).or_default();
                match read {
                    Ok(page) => load.update(at, PageTotals::read(&page)),
                    Err(e) => load.failed(e.to_string()),
                }
            }
            // Only available daemons keep a load: an offline one's last
            // figures would read as current.
            self.loads().retain(|id, _| {
                config
                    .daemons
                    .get(id)
                    .is_some_and(|d| d.state == DaemonState::Available)
            });
        }
    }
}

/// What the snapshot says of the member that serves it.
pub(crate) struct MemberView {
    pub node_id: u64,
    /// Its Raft role, lower case (`leader`, `follower`, …).
    pub role: String,
}

/// The JSON the page draws (see docs/design/dashboard.md for its shape).
pub(crate) fn snapshot(
    config: &Configuration,
    loads: &BTreeMap<DaemonId, DaemonLoad>,
    member: &MemberView,
) -> Json {
    let daemons: Vec<Json> = config
        .daemons
        .values()
        .map(|d| {
            let state = match d.state {
                DaemonState::Available => "available",
                DaemonState::Offline => "offline",
            };
            json!({
                "id": d.id.0,
                "addr": d.addr,
                "state": state,
                "metrics": d.metrics,
                "load": loads.get(&d.id).map(DaemonLoad::json),
            })
        })
        .collect();
    let transfers: Vec<Json> = config
        .transfers
        .iter()
        .map(|t| {
            json!({"id": t.id, "region": t.region.0, "from": t.from.0, "to": t.to.0,
                   "replaces": t.replaces.map(|d| d.0)})
        })
        .collect();
    let coordinators: Vec<Json> = config
        .coordinators
        .iter()
        .map(|c| json!({"id": c.id, "addr": c.addr, "metrics": c.metrics}))
        .collect();
    json!({
        "epoch": config.epoch.0,
        "read_only": config.read_only,
        "tombstone_horizon": config.tombstone_horizon.0,
        "served_by": {"id": member.node_id, "role": member.role},
        "coordinators": coordinators,
        "daemons": daemons,
        "transfers": transfers,
        "spaces": config.spaces.iter().map(space_json).collect::<Vec<_>>(),
    })
}

/// A part's state word and, while it builds, its progress in percent.
fn state_json(state: PartState) -> (&'static str, Option<u8>) {
    match state {
        PartState::Building { progress } => (state.name(), Some(progress)),
        _ => (state.name(), None),
    }
}

fn space_json(space: &Space) -> Json {
    let name_of = |a: usize| space.desc.attrs.get(a).map_or("?", |x| x.name.as_str());
    let mut subspaces = Vec::new();
    let mut indexes = Vec::new();
    for part in space.parts() {
        let attributes: Vec<&str> = part.attrs.iter().map(|&a| name_of(a)).collect();
        let (state, progress) = state_json(part.state);
        let Some(layout) = part.layout else {
            indexes.push(json!({
                "id": part.id.0, "attributes": attributes, "path": part.path,
                "state": state, "progress": progress,
            }));
            continue;
        };
        // Intervals per dimension; region i is the cell whose mixed-radix
        // digits (last dimension fastest) spell i.
        let dims: Vec<usize> = layout.splits.iter().map(|s| s.len() + 1).collect();
        let regions: Vec<Json> = layout
            .regions
            .iter()
            .enumerate()
            .map(|(i, region)| {
                let mut cell = vec![0usize; dims.len()];
                let mut rest = i;
                for (d, n) in dims.iter().enumerate().rev() {
                    cell[d] = rest % n;
                    rest /= n;
                }
                let chain: Vec<u64> = region.chain.iter().map(|d| d.0).collect();
                json!({"id": region.id.0, "cell": cell, "chain": chain})
            })
            .collect();
        subspaces.push(json!({
            "id": part.id.0,
            "kind": part.kind.name(),
            "attributes": attributes,
            "state": state,
            "progress": progress,
            "dims": dims,
            "regions": regions,
        }));
    }
    json!({
        "id": space.id.0,
        "name": space.desc.name,
        "key": space.desc.key().name,
        "tolerate": space.desc.fault_tolerance,
        "subspaces": subspaces,
        "indexes": indexes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{DaemonInfo, Region, RegionId, SpaceId, SubspaceLayout};

    fn member() -> MemberView {
        MemberView {
            node_id: 1,
            role: "leader".into(),
        }
    }

    /// A space `s` keyed by `k` with attributes `a` and `b`, its key
    /// subspace cut in 2 and a subspace over (a, b) cut 2 × 3.
    fn config() -> Configuration {
        let desc = tessera_types::parse::parse_space(
            "space s key k attributes int a, int b subspace a, b tolerate 1 failure",
        )
        .expect("a valid description");
        let chain = |i: u64| vec![DaemonId(i % 2 + 1), DaemonId((i + 1) % 2 + 1)];
        let layout = |attrs: Vec<usize>, splits: Vec<Vec<u64>>, first: u64| {
            let cells: usize = splits.iter().map(|s| s.len() + 1).product();
            SubspaceLayout {
                attrs,
                splits,
                regions: (0..cells as u64)
                    .map(|i| Region {
                        id: RegionId(first + i),
                        chain: chain(i),
                    })
                    .collect(),
                part: tessera_types::PartId(if first == 0 { 0 } else { 1 }),
                state: if first == 0 {
                    PartState::Ready
                } else {
                    PartState::Building { progress: 37 }
                },
                kind: Default::default(),
            }
        };
        let space = Space {
            id: SpaceId(7),
            desc,
            subspaces: vec![
                layout(vec![0], vec![vec![1 << 63]], 0),
                layout(vec![1, 2], vec![vec![10], vec![20, 30]], 100),
            ],
            indexes: vec![],
        };
        let mut config = Configuration {
            epoch: tessera_types::Epoch(5),
            spaces: vec![space],
            ..Configuration::default()
        };
        for (id, state) in [(1, DaemonState::Available), (2, DaemonState::Offline)] {
            config.daemons.insert(
                DaemonId(id),
                DaemonInfo {
                    id: DaemonId(id),
                    addr: format!("127.0.0.1:{id}"),
                    state,
                    metrics: None,
                },
            );
        }
        config
    }

    #[test]
    fn the_snapshot_places_every_region_in_its_grid_cell() {
        let config = config();
        let snap = snapshot(&config, &BTreeMap::new(), &member());
        assert_eq!(snap["epoch"], 5);
        assert_eq!(snap["daemons"][1]["state"], "offline");
        let space = &snap["spaces"][0];
        assert_eq!(space["name"], "s");
        let grid = &space["subspaces"][1];
        assert_eq!(grid["kind"], "subspace");
        assert_eq!(grid["state"], "building");
        assert_eq!(grid["progress"], 37);
        assert_eq!(grid["dims"], json!([2, 3]));
        // Brute force: every region's cell bounds (from the layout itself)
        // must contain the lower corner of the cell the snapshot names.
        let layout = &config.spaces[0].subspaces[1];
        let mut seen = std::collections::BTreeSet::new();
        for (i, region) in grid["regions"].as_array().unwrap().iter().enumerate() {
            let cell: Vec<usize> = serde_json::from_value(region["cell"].clone()).unwrap();
            assert!(seen.insert(cell.clone()), "two regions in cell {cell:?}");
            for (d, (lo, _)) in layout.cell_bounds(i).into_iter().enumerate() {
                let expected_lo = if cell[d] == 0 {
                    0
                } else {
                    layout.splits[d][cell[d] - 1]
                };
                assert_eq!(lo, expected_lo, "region {i} dimension {d}");
            }
            assert_eq!(region["id"], layout.regions[i].id.0);
        }
        assert_eq!(seen.len(), 6);
        assert_eq!(space["subspaces"][0]["kind"], "key");
    }

    #[test]
    fn loads_become_rates_between_two_reads() {
        let page = |requests: u64, seconds: f64, count: u64| {
            format!(
                "tessera_daemon_requests_total{{op=\"get\",status=\"SUCCESS\"}} {requests}\n\
                 tessera_daemon_requests_total{{op=\"put\",status=\"SUCCESS\"}} 0\n\
                 tessera_daemon_request_duration_seconds_sum{{op=\"get\"}} {seconds}\n\
                 tessera_daemon_request_duration_seconds_count{{op=\"get\"}} {count}\n\
                 tessera_daemon_regions 4\n"
            )
        };
        let start = Instant::now();
        let mut load = DaemonLoad::default();
        load.update(start, PageTotals::read(&page(100, 1.0, 100)));
        assert_eq!(load.ops_per_s, None);
        load.update(
            start + Duration::from_secs(2),
            PageTotals::read(&page(300, 1.5, 300)),
        );
        assert_eq!(load.ops_per_s, Some(100.0));
        let mean = load.latency_ms_mean.unwrap();
        assert!((mean - 2.5).abs() < 1e-9, "{mean}");
        // Reads far apart: no rate, then rates again from there.
        load.update(
            start + Duration::from_secs(60),
            PageTotals::read(&page(900, 2.0, 900)),
        );
        assert_eq!(load.ops_per_s, None);
        load.update(
            start + Duration::from_secs(61),
            PageTotals::read(&page(1000, 2.1, 1000)),
        );
        assert_eq!(load.ops_per_s, Some(100.0));
        let mean = load.latency_ms_mean.unwrap();
        assert!((mean - 1.0).abs() < 1e-9, "{mean}");
        // A restart resets the counters: no rate rather than a negative one.
        load.update(
            start + Duration::from_secs(62),
            PageTotals::read(&page(5, 0.0, 5)),
        );
        assert_eq!(load.ops_per_s, None);
        load.failed("gone".into());
        assert_eq!(load.json()["error"], "gone");
        assert_eq!(load.json()["regions"], 4.0);
    }
}
