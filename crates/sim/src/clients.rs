//! The clients: each issues operations one at a time, retries with the
//! same request id until it hears an answer, and records what it saw.

use crate::check::{Event, KvOp, KvResult};
use crate::knobs::Rng;
use crate::lookups::LookupRun;
use crate::report::Violation;
use crate::searches::SearchRun;
use crate::world::{Ev, Msg, Node, World, CLIENT_TIMEOUT_MS};

use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::chain::key_region;
use tessera_protocol::report::ReportLimit;
use tessera_protocol::{
    Action, ClientRef, CoordRequest, DaemonRequest, DaemonResponse, Mutation, NumOp, Reporter,
    Status, UpdateFlags, UpdateRequest,
};
use tessera_types::replex::no_live_daemon;
use tessera_types::{Check, Configuration, DaemonId, Epoch, PredOp, SpaceId, Value};

pub(crate) struct Current {
    pub(crate) key: i64,
    pub(crate) op: KvOp,
    pub(crate) request_no: u64,
    pub(crate) event: usize,
    pub(crate) msg_id: u64,
    pub(crate) deadline: u64,
    /// The epoch of the first send (`UpdateRequest::since`).
    pub(crate) since: Option<Epoch>,
}

pub(crate) struct SimClient {
    pub(crate) id: u64,
    pub(crate) config: Option<Arc<Configuration>>,
    pub(crate) ops_left: usize,
    pub(crate) request_no: u64,
    pub(crate) current: Option<Current>,
    /// Final reads: keys still to read after everything settled.
    pub(crate) final_reads: Vec<i64>,
    /// When it last reported each daemon unreachable (the client
    /// library's limit).
    pub(crate) reported: ReportLimit,
    /// A lookup through a global index in progress (`crate::lookups`).
    pub(crate) lookup: Option<LookupRun>,
    /// Keys a finished lookup found, to read next (last first).
    pub(crate) lookup_gets: Vec<i64>,
    /// A search in progress (`crate::searches`).
    pub(crate) search: Option<SearchRun>,
}

impl World {
    pub(crate) fn client_wake(&mut self, c: usize) {
        let client = &self.clients[c];
        if let Some(run) = &client.lookup {
            if self.now >= run.deadline {
                self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                self.send_lookup(c);
            }
            return;
        }
        if let Some(run) = &client.search {
            if self.now >= run.deadline {
                self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                self.send_search(c);
            }
            return;
        }
        match &client.current {
            Some(cur) if self.now >= cur.deadline => {
                // No answer in time: fetch the configuration, send again
                // with the same request id.
                self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                self.send_current(c);
            }
            Some(_) => {}
            None => self.start_next(c),
        }
    }

    pub(crate) fn start_next(&mut self, c: usize) {
        let keys = self.knobs.keys;
        let (key, op) = if self.phase2 {
            if !self.finals_started {
                return;
            }
            let Some(key) = self.clients[c].final_reads.pop() else {
                return;
            };
            (key, KvOp::Get)
        } else if let Some(key) = self.clients[c].lookup_gets.pop() {
            // A key a lookup found (its operation was counted then).
            (key, KvOp::Get)
        } else {
            if self.clients[c].ops_left == 0 {
                return;
            }
            self.clients[c].ops_left -= 1;
            let key = self.rng.below(keys as u64) as i64;
            // Values on both sides of zero: a global index's two indexlets
            // split there.
            let v = |rng: &mut Rng| rng.below(4) as i64 - 2;
            let op = match self.rng.below(10) {
                0..=2 => KvOp::Put {
                    a: v(&mut self.rng),
                    b: v(&mut self.rng),
                },
                3 => KvOp::CondPut {
                    a_is: v(&mut self.rng),
                    b: v(&mut self.rng),
                },
                4..=5 => KvOp::Add {
                    n: 3 + v(&mut self.rng),
                },
                6 => KvOp::Del,
                _ if self.try_start_lookup(c) => return,
                _ if self.try_start_search(c) => return,
                _ => KvOp::Get,
            };
            (key, op)
        };
        if op == KvOp::Get && self.key_region_lost(c, key) && self.start_redirected_get(c, key) {
            return;
        }
        let events = self.history.entry(key).or_default();
        events.push(Event {
            op,
            invoke: self.now,
            ret: None,
        });
        let event = events.len() - 1;
        if self.phase2 {
            self.finals.push((key, event));
        }
        let client = &mut self.clients[c];
        client.request_no += 1;
        client.current = Some(Current {
            key,
            op,
            request_no: client.request_no,
            event,
            msg_id: 0,
            deadline: 0,
            since: None,
        });
        self.report.operations += 1;
        self.send_current(c);
    }

    pub(crate) fn send_current(&mut self, c: usize) {
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        let now = self.now;
        let space = self.space;
        let client = &mut self.clients[c];
        let Some(cur) = client.current.as_mut() else {
            return;
        };
        cur.msg_id = msg_id;
        cur.deadline = now + CLIENT_TIMEOUT_MS;
        let (key, op, request_no) = (cur.key, cur.op, cur.request_no);
        if op == KvOp::Get && self.key_region_lost(c, key) {
            // The key region lost its last live daemon while the get
            // waited: the client library's next attempt reads the
            // covering set instead. This attempt's outcome is never
            // heard, as for a client that gave up on it.
            let cur = self.clients[c].current.take().expect("checked");
            self.abandoned.insert((cur.key, cur.event));
            if !self.start_redirected_get(c, key) {
                self.at(0, Ev::ClientWake(c));
            }
            return;
        }
        let client = &mut self.clients[c];
        let Some(cur) = client.current.as_mut() else {
            return;
        };
        let key_value = self.knobs.key_value(key);
        let client_id = client.id;
        let target = client.config.as_ref().and_then(|config| {
            let space = config.space_by_id(space)?;
            let leader = *key_region(space, &key_value)?.chain.first()?;
            Some((leader, config.epoch))
        });
        if let Some((_, epoch)) = target {
            cur.since.get_or_insert(epoch);
        }
        let since = cur.since.unwrap_or_default();
        self.at(CLIENT_TIMEOUT_MS, Ev::ClientWake(c));
        let Some((leader, epoch)) = target else {
            self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
            return;
        };
        self.trace(|| format!("client {c} key {key} {op:?} #{request_no} -> {leader} at {epoch}"));
        self.report_if_severed(c, leader);
        let req = match op {
            KvOp::Get => DaemonRequest::Get {
                space,
                key: key_value,
                auth: Default::default(),
            },
            op => DaemonRequest::Update(update_request(
                space,
                key_value,
                op,
                ClientRef {
                    client_id,
                    request_no,
                },
                since,
            )),
        };
        self.send(
            Node::Client(c),
            Node::Daemon(leader),
            Msg::Request {
                id: msg_id,
                epoch,
                req,
            },
        );
    }

    pub(crate) fn client_receive(&mut self, c: usize, msg: Msg) -> Result<(), Violation> {
        match msg {
            Msg::Config(config) => {
                let client = &mut self.clients[c];
                let newer = client
                    .config
                    .as_ref()
                    .is_none_or(|old| config.epoch > old.epoch);
                if newer {
                    client.config = Some(config);
                    if client.current.is_some() {
                        self.send_current(c);
                    } else if client.lookup.is_some() {
                        self.send_lookup(c);
                    } else if client.search.is_some() {
                        self.send_search(c);
                    }
                }
            }
            Msg::Response { id, resp } if self.clients[c].lookup.is_some() => {
                self.lookup_hears(c, id, resp)?
            }
            Msg::Response { id, resp } if self.clients[c].search.is_some() => {
                self.search_hears(c, id, resp)?
            }
            Msg::Response { id, resp } => self.client_hears(c, id, resp)?,
            _ => {}
        }
        Ok(())
    }

    /// Whether client `c` reads `key` through the covering set, as the
    /// client library does (`Client::get_object`): the space is a replex
    /// space and the key region's chain names no live daemon in the
    /// client's configuration (a region being refreshed keeps its live
    /// point leader, which answers gets). Never for the final reads, which
    /// wait for the healed cluster's point leaders.
    pub(crate) fn key_region_lost(&self, c: usize, key: i64) -> bool {
        if self.phase2 || self.knobs.replex.is_none() {
            return false;
        }
        let Some(config) = self.clients[c].config.as_ref() else {
            return false;
        };
        config.space_by_id(self.space).is_some_and(|space| {
            space.desc.replex.is_some()
                && key_region(space, &self.knobs.key_value(key))
                    .is_some_and(|region| no_live_daemon(config, region))
        })
    }

    /// Client `c` hears the answer to its send `id`.
    fn client_hears(&mut self, c: usize, id: u64, resp: DaemonResponse) -> Result<(), Violation> {
        let Some(cur) = self.clients[c].current.as_ref() else {
            return Ok(());
        };
        if cur.msg_id != id {
            return Ok(()); // an answer to an earlier send
        }
        self.trace(|| format!("client {c} key {} {:?} hears {resp:?}", cur.key, cur.op));
        match hear(cur.op, &resp) {
            Heard::Result(result) => {
                let cur = self.clients[c].current.take().expect("checked");
                self.trace(|| format!("client {c} key {} {:?} -> {result:?}", cur.key, cur.op));
                if cur.op.is_update() && result == KvResult::Ok {
                    let client = ClientRef {
                        client_id: self.clients[c].id,
                        request_no: cur.request_no,
                    };
                    self.check_acknowledged(c, cur.key, client)?;
                }
                self.history.get_mut(&cur.key).expect("recorded")[cur.event].ret =
                    Some((self.now, result));
                let think = self.rng.below(30);
                self.at(think, Ev::ClientWake(c));
            }
            Heard::Unknown => {
                // Refused as too old to tell: the operation may or may not
                // have taken effect, as for a client that gave up.
                let cur = self.clients[c].current.take().expect("checked");
                self.trace(|| format!("client {c} key {} {:?} -> unknown", cur.key, cur.op));
                self.report.unknown_outcomes += 1;
                self.abandoned.insert((cur.key, cur.event));
                let think = self.rng.below(30);
                self.at(think, Ev::ClientWake(c));
            }
            Heard::Retry => {
                // Stale configuration, or a point leader without a
                // lease: ask for the configuration, try again soon.
                self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                if let Some(cur) = self.clients[c].current.as_mut() {
                    cur.deadline = self.now + 100;
                }
                self.at(100, Ev::ClientWake(c));
            }
            Heard::Unexpected => {
                return Err(Violation::UnexpectedAnswer {
                    client: c,
                    key: cur.key,
                    op: cur.op,
                    answer: Box::new(resp),
                })
            }
        }
        Ok(())
    }
}

/// Whether a page of a lookup or a search was refused for a stale
/// configuration, a replica that left, or a missing lease: the client
/// asks again in a newer configuration ([`World::retry_page_soon`]).
pub(crate) fn page_refused(resp: &DaemonResponse) -> bool {
    matches!(
        resp,
        DaemonResponse::WrongEpoch { .. }
            | DaemonResponse::Failed {
                status: Status::Reconfigure | Status::Offline | Status::UnknownSpace,
                ..
            }
    )
}

impl World {
    /// A new message id for client `c`'s next page request, and when the
    /// client stops waiting for its answer.
    pub(crate) fn next_page_send(&mut self) -> (u64, u64) {
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        (msg_id, self.now + CLIENT_TIMEOUT_MS)
    }

    /// Sends client `c`'s page request `req` (send `msg_id`) for `region`
    /// to the region's tail in `config`, or, if the region has no replica
    /// now, asks for a newer configuration. Either way the client wakes
    /// when it stops waiting.
    pub(crate) fn send_page(
        &mut self,
        c: usize,
        msg_id: u64,
        config: &Configuration,
        region: tessera_types::RegionId,
        req: DaemonRequest,
    ) {
        self.at(CLIENT_TIMEOUT_MS, Ev::ClientWake(c));
        let Some(&tail) = config.region(region).and_then(|(_, _, r)| r.chain.last()) else {
            self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
            return;
        };
        self.trace(|| format!("client {c} page of {region} -> {tail}"));
        self.report_if_severed(c, tail);
        self.send(
            Node::Client(c),
            Node::Daemon(tail),
            Msg::Request {
                id: msg_id,
                epoch: config.epoch,
                req,
            },
        );
    }

    /// Client `c`'s page was refused ([`page_refused`]): it fetches the
    /// configuration and asks again soon. Returns its new deadline.
    pub(crate) fn retry_page_soon(&mut self, c: usize) -> u64 {
        self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
        self.at(100, Ev::ClientWake(c));
        self.now + 100
    }

    /// If a cut keeps client `c` from connecting to `daemon`, the client
    /// tells the coordinator (as the client library does, at most once per
    /// [`ReportLimit`]'s interval per daemon): evidence of a gray failure.
    pub(crate) fn report_if_severed(&mut self, c: usize, daemon: DaemonId) {
        if !self.severed(Node::Client(c), Node::Daemon(daemon)) {
            return;
        }
        let now = Duration::from_millis(self.now);
        let client = &mut self.clients[c];
        if !client.reported.allow(daemon, now) {
            return;
        }
        let request = CoordRequest::Unreachable {
            daemon,
            reporter: Reporter::Client(client.id),
        };
        self.send(
            Node::Client(c),
            Node::Coord,
            Msg::Coord {
                request,
                sent: self.now,
            },
        );
    }
}

/// What a client makes of an answer.
enum Heard {
    /// The operation is over, with this result.
    Result(KvResult),
    /// The daemon could not serve it now: try again.
    Retry,
    /// The update was refused as too old to tell whether it took effect.
    Unknown,
    /// No correct daemon answers `op` so.
    Unexpected,
}

fn hear(op: KvOp, resp: &DaemonResponse) -> Heard {
    match (resp, op) {
        (DaemonResponse::Done, KvOp::Get) => Heard::Retry,
        (DaemonResponse::Done, _) => Heard::Result(KvResult::Ok),
        (DaemonResponse::Found { object, .. }, KvOp::Get) => match object.decode() {
            Ok(object) => match (&object.values[1], &object.values[2]) {
                (Value::Int(a), Value::Int(b)) => Heard::Result(KvResult::Value(*a, *b)),
                _ => Heard::Unexpected,
            },
            Err(_) => Heard::Unexpected,
        },
        (DaemonResponse::CmpFail { .. }, _) => Heard::Result(KvResult::CmpFail),
        (DaemonResponse::Failed { status, .. }, _) => match status {
            Status::NotFound => Heard::Result(KvResult::NotFound),
            Status::CmpFail => Heard::Result(KvResult::CmpFail),
            Status::Reconfigure | Status::Offline => Heard::Retry,
            Status::Timeout if op != KvOp::Get => Heard::Unknown,
            _ => Heard::Unexpected,
        },
        (DaemonResponse::WrongEpoch { .. }, _) => Heard::Retry,
        _ => Heard::Unexpected,
    }
}

impl SimClient {
    pub(crate) fn new(id: u64, ops: usize) -> SimClient {
        SimClient {
            id,
            config: None,
            ops_left: ops,
            request_no: 0,
            current: None,
            final_reads: Vec::new(),
            reported: ReportLimit::default(),
            lookup: None,
            lookup_gets: Vec::new(),
            search: None,
        }
    }

    /// Whether it waits for an answer (an operation, a lookup or a
    /// search).
    pub(crate) fn busy(&self) -> bool {
        self.current.is_some() || self.lookup.is_some() || self.search.is_some()
    }
}

pub(crate) fn update_request(
    space: SpaceId,
    key: Value,
    op: KvOp,
    client: ClientRef,
    since: Epoch,
) -> UpdateRequest {
    let set = |attr, v| Mutation {
        attr,
        path: None,
        action: Action::Set(Value::Int(v)),
    };
    let exist = UpdateFlags {
        must_exist: true,
        ..UpdateFlags::default()
    };
    let (flags, checks, mutations) = match op {
        KvOp::Put { a, b } => (UpdateFlags::default(), vec![], vec![set(1, a), set(2, b)]),
        KvOp::CondPut { a_is, b } => (
            exist,
            vec![Check {
                attr: 1,
                path: None,
                op: PredOp::Eq(Value::Int(a_is)),
            }],
            vec![set(2, b)],
        ),
        KvOp::Add { n } => (
            exist,
            vec![],
            vec![Mutation {
                attr: 1,
                path: None,
                action: Action::Num(NumOp::Add, Value::Int(n)),
            }],
        ),
        KvOp::Del => (
            UpdateFlags {
                erase: true,
                ..exist
            },
            vec![],
            vec![],
        ),
        KvOp::Get | KvOp::Found | KvOp::FoundKey | KvOp::Missed { .. } => {
            unreachable!("a read is not an update")
        }
    };
    UpdateRequest {
        space,
        key,
        client,
        since,
        flags,
        checks,
        mutations,
        auth: Default::default(),
        secret: None,
    }
}
