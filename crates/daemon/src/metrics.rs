//! What a daemon serves at `/metrics`, kept by the shell: requests by
//! operation and status with their latency, chain and transfer messages by
//! kind, heartbeats and their answers; and read when scraped: the epoch,
//! the regions held and led, the bytes on disk, transfers in flight with
//! the records each has moved, and the node's search counters
//! ([`NodeStats`]).
//!
//! The node and its cores know nothing of this module: the shell counts
//! what passes through it (requests in, replies out, messages either way)
//! and copies the node's plain counters at each scrape.

use crate::core::ReplyTo;
use crate::node::NodeStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;
use tessera_observe::set_gauge;
use tessera_protocol::{
    ChainMsg, CoordResponse, DaemonRequest, DaemonResponse, HeartbeatAnswer, Message, TransferMsg,
};
use tessera_types::{Configuration, DaemonId};

/// A client operation, as the `op` label names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Get,
    /// An update without conditions (put, atomic operations …).
    Put,
    /// An update with checks, or that the object must not exist.
    CondPut,
    /// An update that deletes the object.
    Del,
    /// A page of a search.
    Search,
    /// A page of a keys-only search (count, group operations).
    SearchKeys,
    /// A page of a lookup in a global index's indexlet.
    Lookup,
    /// A step of a backup: drain, take, a page, release.
    Backup,
}

const OPS: [Op; 8] = [
    Op::Get,
    Op::Put,
    Op::CondPut,
    Op::Del,
    Op::Search,
    Op::SearchKeys,
    Op::Lookup,
    Op::Backup,
];

impl Op {
    pub fn of(request: &DaemonRequest) -> Op {
        match request {
            DaemonRequest::Get { .. } => Op::Get,
            DaemonRequest::Update(update) if update.flags.erase => Op::Del,
            DaemonRequest::Update(update)
                if !update.checks.is_empty() || update.flags.must_not_exist =>
            {
                Op::CondPut
            }
            DaemonRequest::Update(_) => Op::Put,
            DaemonRequest::Search { .. } => Op::Search,
            DaemonRequest::SearchKeys { .. } => Op::SearchKeys,
            DaemonRequest::Lookup { .. } => Op::Lookup,
            DaemonRequest::BackupDrain
            | DaemonRequest::BackupTake { .. }
            | DaemonRequest::BackupRead { .. }
            | DaemonRequest::BackupRelease { .. } => Op::Backup,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::CondPut => "cond_put",
            Op::Del => "del",
            Op::Search => "search",
            Op::SearchKeys => "search_keys",
            Op::Lookup => "lookup",
            Op::Backup => "backup",
        }
    }
}

/// The status of an answer, with HyperDex's names (`SUCCESS`, `NOTFOUND`,
/// `CMPFAIL` …); `WRONGEPOCH` when the client must fetch a configuration.
fn status_name(response: &DaemonResponse) -> &'static str {
    match response {
        DaemonResponse::Found { .. }
        | DaemonResponse::Done
        | DaemonResponse::SearchPage { .. }
        | DaemonResponse::KeysPage { .. }
        | DaemonResponse::LookupPage { .. }
        | DaemonResponse::BackupState { .. }
        | DaemonResponse::BackupPage { .. } => "SUCCESS",
        DaemonResponse::Failed { status, .. } => status.name(),
        DaemonResponse::CmpFail { .. } => "CMPFAIL",
        DaemonResponse::WrongEpoch { .. } => "WRONGEPOCH",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpStatus {
    op: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabel {
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessageLabel {
    direction: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabel {
    answer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: &'static str,
}

/// A shape of operation served (`crate::shapes`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShapeLabel {
    space: String,
    kind: &'static str,
    shape: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransferLabel {
    transfer: u64,
    region: u64,
    role: &'static str,
}

/// Which way a peer message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Sent,
    Received,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Sent => "sent",
            Direction::Received => "received",
        }
    }
}

fn message_kind(msg: &Message) -> &'static str {
    match msg {
        Message::Chain(ChainMsg::Forward(_)) => "forward",
        Message::Chain(ChainMsg::Ack(_)) => "ack",
        Message::Transfer(TransferMsg::Entries { .. }) => "transfer_entries",
        Message::Transfer(TransferMsg::Progress { .. }) => "transfer_progress",
        Message::Transfer(TransferMsg::Have { .. }) => "transfer_have",
        Message::Transfer(TransferMsg::Digest { .. }) => "transfer_digest",
        Message::Transfer(TransferMsg::Restart { .. }) => "transfer_restart",
        Message::Held(_) => "held",
        Message::Expected(_) => "expected",
        _ => "other",
    }
}

/// Requests being served, per shard of the `ReplyTo` space, so that
/// concurrent requests rarely share a lock.
const PENDING_SHARDS: usize = 16;
/// Requests tracked per shard; beyond it a request's latency is not
/// measured (a client that never reads its answers cannot grow this).
const PENDING_PER_SHARD_MAX: usize = 16 * 1024;

/// One daemon's metrics.
pub(crate) struct DaemonMetrics {
    registry: Registry,
    requests: Family<OpStatus, Counter>,
    /// Per [`OPS`] entry.
    latency: Vec<Histogram>,
    pending: Vec<Mutex<HashMap<ReplyTo, (Op, Instant)>>>,
    messages: Family<MessageLabel, Counter>,
    transfer_records: Family<MessageLabel, Counter>,
    /// Records moved per transfer: (transfer, sending) → records.
    moved: Mutex<HashMap<(u64, bool), u64>>,
    transfers: Family<RoleLabel, Gauge>,
    transfer_progress: Family<TransferLabel, Gauge>,
    heartbeats: Counter,
    heartbeat_answers: Family<AnswerLabel, Counter>,
    search_pages: Counter,
    search_examined: Counter,
    search_returned: Counter,
    walks_past_inline: Counter,
    tombstones_collected: Counter,
    stale_dropped: Counter,
    backfill_keys: Counter,
    backfill_entries: Counter,
    op_shapes: Family<ShapeLabel, Counter>,
    epoch: Gauge,
    regions: Gauge,
    regions_led: Gauge,
    disk_bytes: Gauge,
    /// CPU time this process used, user and system (`/proc/self/stat`).
    cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    serving: Gauge,
    poisoned: Gauge,
}

/// Raises a counter to `value`, a total the node keeps.
fn counter_to(counter: &Counter, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}

/// The CPU seconds, user plus system, a `/proc/<pid>/stat` line reports
/// (fields 14 and 15, in clock ticks of 1/100 s: Linux reports every
/// `/proc` time in USER_HZ, which is 100 whatever the kernel's HZ). The
/// command name (field 2) may hold spaces and parentheses, so fields are
/// counted after its last `)`. `None` for anything else.
fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// The bytes the files under `dir` (the engine's journal and tables)
/// take on disk: their allocated blocks, as `du` counts them, not their
/// lengths. The engine sets a new journal's length ahead of its writes
/// (a sparse file), so lengths would count many megabytes per daemon
/// that hold nothing, and a benchmark's bytes per object would read 0.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            Ok(_) => entry.metadata().map(|m| allocated(&m)).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(unix)]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    // `st_blocks` counts 512-byte units whatever the file system's block.
    std::os::unix::fs::MetadataExt::blocks(metadata).saturating_mul(512)
}

#[cfg(not(unix))]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    metadata.len()
}

impl DaemonMetrics {
    pub fn new() -> DaemonMetrics {
        // 100 µs to about 3.3 s.
        let latency = Family::<OpLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 16))
        });
        let mut m = DaemonMetrics {
            registry: Registry::with_prefix("tessera_daemon"),
            requests: Family::default(),
            // Handles on the family's histograms (they share their
            // buckets), so observing takes no lookup.
            latency: OPS
                .iter()
                .map(|op| latency.get_or_create_owned(&OpLabel { op: op.name() }))
                .collect(),
            pending: (0..PENDING_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            messages: Family::default(),
            transfer_records: Family::default(),
            moved: Mutex::new(HashMap::new()),
            transfers: Family::default(),
            transfer_progress: Family::default(),
            heartbeats: Counter::default(),
            heartbeat_answers: Family::default(),
            search_pages: Counter::default(),
            search_examined: Counter::default(),
            search_returned: Counter::default(),
            walks_past_inline: Counter::default(),
            tombstones_collected: Counter::default(),
            stale_dropped: Counter::default(),
            backfill_keys: Counter::default(),
            backfill_entries: Counter::default(),
            op_shapes: Family::default(),
            epoch: Gauge::default(),
            regions: Gauge::default(),
            regions_led: Gauge::default(),
            disk_bytes: Gauge::default(),
            cpu_seconds: Counter::default(),
            serving: Gauge::default(),
            poisoned: Gauge::default(),
        };
        let r = &mut m.registry;
        r.register(
            "requests",
            "Client requests answered, by operation and status",
            m.requests.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Time from a request's arrival to its answer, by operation",
            latency,
        );
        r.register(
            "peer_messages",
            "Messages to and from peer daemons, by direction and kind (forward, ack, transfer_*, held)",
            m.messages.clone(),
        );
        r.register(
            "transfer_records",
            "Records moved by state transfers, by direction",
            m.transfer_records.clone(),
        );
        r.register(
            "transfers",
            "State transfers in flight, as source or target",
            m.transfers.clone(),
        );
        r.register(
            "transfer_progress_records",
            "Records a transfer in flight has moved so far (sent as source, received as target)",
            m.transfer_progress.clone(),
        );
        r.register(
            "heartbeats",
            "Heartbeats sent to the coordinator",
            m.heartbeats.clone(),
        );
        r.register(
            "heartbeat_answers",
            "Answers to heartbeats, by kind (renewed, no_lease, offline, held_offline, stop, not_leader, failed, error)",
            m.heartbeat_answers.clone(),
        );
        r.register("search_pages", "Search pages read", m.search_pages.clone());
        r.register(
            "search_objects_examined",
            "Objects search pages looked at (scanned, or loaded through an index)",
            m.search_examined.clone(),
        );
        r.register(
            "search_objects_returned",
            "Objects or keys search pages returned",
            m.search_returned.clone(),
        );
        r.register(
            "search_walks_past_inline",
            "Search pages whose walk tested a check on more objects than are read where the request arrives, read again on a page thread",
            m.walks_past_inline.clone(),
        );
        r.register(
            "tombstones_collected",
            "Tombstones deleted below the tombstone horizon",
            m.tombstones_collected.clone(),
        );
        r.register(
            "stale_keys_dropped",
            "Keys a transfer's target deleted because the region no longer held them",
            m.stale_dropped.clone(),
        );
        r.register(
            "backfill_keys",
            "Objects a point leader sent down their chain to fill a building subspace",
            m.backfill_keys.clone(),
        );
        r.register(
            "backfill_entries",
            "Objects whose index entries were written for a building part",
            m.backfill_entries.clone(),
        );
        r.register(
            "op_shapes",
            "Operations served by space, kind (search, get, insert, modify, delete) and shape (a search's attr:class list, a modify's changed attributes; * beyond the bound), each counted once in the cluster",
            m.op_shapes.clone(),
        );
        r.register(
            "epoch",
            "The epoch of the installed configuration",
            m.epoch.clone(),
        );
        r.register(
            "regions",
            "Regions whose chain holds this daemon",
            m.regions.clone(),
        );
        r.register(
            "regions_led",
            "Key regions this daemon is point leader of",
            m.regions_led.clone(),
        );
        r.register(
            "disk_bytes",
            "Bytes the engine's files in the data directory take on disk (allocated blocks)",
            m.disk_bytes.clone(),
        );
        r.register(
            "process_cpu_seconds",
            "CPU time the daemon process used, user and system, in seconds",
            m.cpu_seconds.clone(),
        );
        r.register(
            "serving",
            "1 while the daemon answers clients (its lease holds)",
            m.serving.clone(),
        );
        r.register(
            "poisoned",
            "1 once the daemon's storage failed",
            m.poisoned.clone(),
        );
        m
    }

    fn pending(&self, to: ReplyTo) -> std::sync::MutexGuard<'_, HashMap<ReplyTo, (Op, Instant)>> {
        let shard = (to.id as usize ^ to.conn as usize) % PENDING_SHARDS;
        crate::node::lock(&self.pending[shard])
    }

    /// A client request arrived.
    pub fn request_started(&self, to: ReplyTo, op: Op) {
        let mut pending = self.pending(to);
        if pending.len() < PENDING_PER_SHARD_MAX {
            pending.insert(to, (op, Instant::now()));
        }
    }

    /// A request is answered: counted by operation and status, and its
    /// latency observed. An answer to a request not tracked (beyond the
    /// bound) is not counted.
    pub fn request_answered(&self, to: ReplyTo, response: &DaemonResponse) {
        let Some((op, started)) = self.pending(to).remove(&to) else {
            return;
        };
        let status = status_name(response);
        self.requests
            .get_or_create(&OpStatus {
                op: op.name(),
                status,
            })
            .inc();
        if let Some(i) = OPS.iter().position(|o| *o == op) {
            self.latency[i].observe(started.elapsed().as_secs_f64());
        }
    }

    /// A client connection closed: its unanswered requests are forgotten.
    pub fn connection_closed(&self, conn: u64) {
        for shard in &self.pending {
            crate::node::lock(shard).retain(|to, _| to.conn != conn);
        }
    }

    /// A message to or from a peer daemon.
    pub fn peer_message(&self, direction: Direction, msg: &Message) {
        let label = MessageLabel {
            direction: direction.name(),
            kind: message_kind(msg),
        };
        self.messages.get_or_create(&label).inc();
        if let Message::Transfer(TransferMsg::Entries {
            transfer, entries, ..
        }) = msg
        {
            let records = entries.len() as u64;
            let label = MessageLabel {
                direction: direction.name(),
                kind: "record",
            };
            self.transfer_records.get_or_create(&label).inc_by(records);
            let sending = direction == Direction::Sent;
            *crate::node::lock(&self.moved)
                .entry((*transfer, sending))
                .or_default() += records;
        }
    }

    /// A heartbeat went out and `answer` came back (`None`: no answer).
    pub fn heartbeat(&self, answer: Option<&CoordResponse>) {
        self.heartbeats.inc();
        let answer = match answer {
            Some(CoordResponse::Heartbeat(answer)) => match answer {
                HeartbeatAnswer::Renewed => "renewed",
                HeartbeatAnswer::NoLeaseUntil { .. } => "no_lease",
                HeartbeatAnswer::Offline => "offline",
                HeartbeatAnswer::HeldOffline => "held_offline",
                HeartbeatAnswer::Stop(_) => "stop",
            },
            Some(CoordResponse::NotLeader { .. }) => "not_leader",
            Some(_) => "failed",
            None => "error",
        };
        self.heartbeat_answers
            .get_or_create(&AnswerLabel { answer })
            .inc();
    }

    /// Reads what the node and the disk say now, and encodes everything.
    pub fn render(
        &self,
        me: DaemonId,
        config: &Configuration,
        stats: &NodeStats,
        serving: bool,
        poisoned: bool,
        data_dir: &Path,
    ) -> tessera_observe::http::Response {
        set_gauge(&self.epoch, config.epoch.0);
        let (mut held, mut led) = (0u64, 0u64);
        for space in &config.spaces {
            for (si, layout) in space.subspaces.iter().enumerate() {
                for region in &layout.regions {
                    held += u64::from(region.chain.contains(&me));
                    led += u64::from(si == 0 && region.chain.first() == Some(&me));
                }
            }
        }
        set_gauge(&self.regions, held);
        set_gauge(&self.regions_led, led);
        set_gauge(&self.disk_bytes, dir_bytes(data_dir));
        if let Some(total) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| cpu_seconds(&stat))
        {
            let now = self.cpu_seconds.get();
            if total > now {
                self.cpu_seconds.inc_by(total - now);
            }
        }
        self.serving.set(i64::from(serving));
        self.poisoned.set(i64::from(poisoned));
        counter_to(
            &self.search_pages,
            stats.search_pages.load(Ordering::Relaxed),
        );
        counter_to(
            &self.search_examined,
            stats.search_examined.load(Ordering::Relaxed),
        );
        for (counter, total) in [
            (&self.search_returned, &stats.search_returned),
            (&self.walks_past_inline, &stats.walks_past_inline),
            (&self.tombstones_collected, &stats.tombstones_collected),
            (&self.stale_dropped, &stats.stale_dropped),
            (&self.backfill_keys, &stats.backfill_keys),
            (&self.backfill_entries, &stats.backfill_entries),
        ] {
            counter_to(counter, total.load(Ordering::Relaxed));
        }
        let shapes = stats.shapes.snapshot();
        let space_of = |id| config.space_by_id(id).map(|s| &s.desc);
        for (space, kind, shape, count) in shapes.labelled(space_of) {
            let label = ShapeLabel {
                space: space.to_string(),
                kind,
                shape,
            };
            counter_to(&self.op_shapes.get_or_create(&label), count);
        }
        // Transfers in flight are the configuration's; what each moved is
        // the shell's count. Finished ones are forgotten here.
        let live: Vec<(u64, u64, bool)> = config
            .transfers
            .iter()
            .filter(|t| t.from == me || t.to == me)
            .map(|t| (t.id, t.region.0, t.from == me))
            .collect();
        let mut moved = crate::node::lock(&self.moved);
        moved.retain(|(id, _), _| live.iter().any(|t| t.0 == *id));
        self.transfer_progress.clear();
        let (mut sources, mut targets) = (0u64, 0u64);
        for &(transfer, region, sending) in &live {
            if sending {
                sources += 1;
            } else {
                targets += 1;
            }
            let label = TransferLabel {
                transfer,
                region,
                role: if sending { "source" } else { "target" },
            };
            let records = moved.get(&(transfer, sending)).copied().unwrap_or(0);
            set_gauge(&self.transfer_progress.get_or_create(&label), records);
        }
        drop(moved);
        set_gauge(
            &self.transfers.get_or_create(&RoleLabel { role: "source" }),
            sources,
        );
        set_gauge(
            &self.transfers.get_or_create(&RoleLabel { role: "target" }),
            targets,
        );
        tessera_observe::metrics_response(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::Status;

    fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(labels)?;
            rest.trim().parse().ok()
        })
    }

    #[test]
    fn answers_are_counted_by_operation_and_status() {
        let m = DaemonMetrics::new();
        let a = ReplyTo { conn: 1, id: 1 };
        let b = ReplyTo { conn: 1, id: 2 };
        let c = ReplyTo { conn: 2, id: 1 };
        m.request_started(a, Op::Put);
        m.request_started(b, Op::Put);
        m.request_started(c, Op::Get);
        m.request_answered(a, &DaemonResponse::Done);
        m.request_answered(
            b,
            &DaemonResponse::Failed {
                status: Status::NotFound,
                reason: String::new(),
            },
        );
        // Answered twice (a retry's duplicate): counted once.
        m.request_answered(a, &DaemonResponse::Done);
        m.connection_closed(2);
        m.request_answered(c, &DaemonResponse::Done);
        let config = Configuration::default();
        let stats = NodeStats::default();
        stats.search_examined.store(7, Ordering::Relaxed);
        stats.walks_past_inline.store(3, Ordering::Relaxed);
        let page = m.render(
            DaemonId(1),
            &config,
            &stats,
            true,
            false,
            Path::new("/nonexistent"),
        );
        let text = page.body;
        let put_ok = sample(
            &text,
            "tessera_daemon_requests_total",
            r#"{op="put",status="SUCCESS"}"#,
        );
        assert_eq!(put_ok, Some(1.0), "{text}");
        let put_nf = sample(
            &text,
            "tessera_daemon_requests_total",
            r#"{op="put",status="NOTFOUND"}"#,
        );
        assert_eq!(put_nf, Some(1.0));
        assert_eq!(
            sample(
                &text,
                "tessera_daemon_requests_total",
                r#"{op="get",status="SUCCESS"}"#
            ),
            None
        );
        assert_eq!(
            sample(
                &text,
                "tessera_daemon_request_duration_seconds_count",
                r#"{op="put"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, "tessera_daemon_search_objects_examined_total", ""),
            Some(7.0)
        );
        assert_eq!(
            sample(&text, "tessera_daemon_search_walks_past_inline_total", ""),
            Some(3.0)
        );
        assert_eq!(sample(&text, "tessera_daemon_serving", ""), Some(1.0));
    }

    #[test]
    fn cpu_seconds_adds_user_and_system_ticks_after_the_command_name() {
        // pid, a command name with a space and a parenthesis, state, then
        // fields 4..13, utime (14) = 250 ticks, stime (15) = 175 ticks.
        let stat = "4242 (tess (x) d) S 1 2 3 4 5 6 7 8 9 10 250 175 0 0 20 0";
        assert_eq!(cpu_seconds(stat), Some(4.25));
        assert_eq!(cpu_seconds("no parenthesis here"), None);
        assert_eq!(cpu_seconds("1 (short) S 1 2"), None);
        // This process has run code, and its reading only grows.
        let read = || cpu_seconds(&std::fs::read_to_string("/proc/self/stat").unwrap()).unwrap();
        let before = read();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(read() >= before);
    }

    #[test]
    fn disk_bytes_count_what_is_written_not_what_is_reserved() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("journals");
        std::fs::create_dir(&nested).unwrap();
        // A journal as the engine opens one: its length set far ahead of
        // the few bytes written into it.
        let journal = std::fs::File::create(nested.join("0")).unwrap();
        journal.set_len(64 << 20).unwrap();
        std::io::Write::write_all(&mut &journal, &[7u8; 8192]).unwrap();
        journal.sync_all().unwrap();
        std::fs::write(dir.path().join("table"), vec![1u8; 20_000]).unwrap();
        let bytes = dir_bytes(dir.path());
        assert!(bytes >= 8192 + 20_000, "{bytes} bytes for 28,192 written");
        assert!(
            bytes < 1 << 20,
            "{bytes} bytes: the reserved length was counted"
        );
    }
}
