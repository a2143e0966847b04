//! Lookups through a global index while the nemesis runs, checked against
//! the history.
//!
//! A client walks the indexlets that can hold its range one after another,
//! in value order and in small pages, from their tails, as the client
//! library does; when an indexlet leaves the configuration (a split's new
//! part replaced it) it plans again and resumes after the last entry it
//! received. What it learns turns into per-key events the linearizability
//! checker judges:
//!
//! - every key an entry named is read with an ordinary get (the object is
//!   the ground truth; a get is checked like any other);
//! - every other key gets a [`KvOp::Missed`] event spanning the walk:
//!   the lookup claims that the key did not match at some instant of it.
//!
//! The claim is what the design promises (docs/design/global-indexes.md):
//! a write acknowledged before a lookup begins is found under its new
//! value. A write still in flight during the walk may move an entry behind
//! the walk's cursor and so hide a key whose old and new values both match;
//! keys with an update overlapping the walk are therefore not claimed.

use crate::check::{update_overlaps, Event, KvOp, KvResult, ANY, EVENTS_PER_KEY_MAX};
use crate::clients::page_refused;
use crate::report::Violation;
use crate::world::{Ev, World};
use std::collections::BTreeSet;
use tessera_protocol::{DaemonRequest, DaemonResponse, SearchAfter};
use tessera_types::lookup::order_interval;
use tessera_types::region::regions_intersecting;
use tessera_types::{
    Check, DataType, PredOp, RegionId, Space, SubspaceKind, SubspaceLayout, Value,
};

/// Entries per page: small, so that walks page and cross epochs.
const PAGE_ENTRIES: u64 = 2;

/// A lookup in progress.
pub(crate) struct LookupRun {
    /// The attribute (1 = `a`, 2 = `b`) and the inclusive range.
    attr: usize,
    lo: i64,
    hi: i64,
    invoke: u64,
    /// The indexlets still to read, in value order; the first is being read.
    lanes: Vec<RegionId>,
    /// Where the first lane's next page starts.
    after: Option<SearchAfter>,
    /// The last entry received: where a walk planned again resumes.
    last: Option<SearchAfter>,
    /// The keys the entries named.
    found: BTreeSet<i64>,
    msg_id: u64,
    pub(crate) deadline: u64,
}

impl LookupRun {
    fn checks(&self) -> Vec<Check> {
        let check = |op| Check {
            attr: self.attr,
            path: None,
            op,
        };
        if self.lo == self.hi {
            vec![check(PredOp::Eq(Value::Int(self.lo)))]
        } else {
            vec![
                check(PredOp::Ge(Value::Int(self.lo))),
                check(PredOp::Le(Value::Int(self.hi))),
            ]
        }
    }
}

/// `space`'s ready global index on `attr`, if any.
fn ready_index(space: &Space, attr: usize) -> Option<&SubspaceLayout> {
    space
        .subspaces
        .iter()
        .find(|l| l.kind == SubspaceKind::GlobalIndex && l.attrs == [attr] && l.state.is_ready())
}

/// The indexlets of `space`'s ready global index on `attr` that can hold a
/// value the checks admit, in value order; `None` without such an index.
fn plan(space: &Space, attr: usize, checks: &[Check]) -> Option<Vec<RegionId>> {
    let layout = ready_index(space, attr)?;
    let interval = order_interval(checks, attr, DataType::Int)?;
    Some(
        regions_intersecting(layout, &[interval])
            .into_iter()
            .map(|i| layout.regions[i].id)
            .collect(),
    )
}

impl World {
    /// Starts a lookup for client `c` instead of a get, if its
    /// configuration has a ready global index and the draw says so.
    pub(crate) fn try_start_lookup(&mut self, c: usize) -> bool {
        let Some(space) = self.clients[c]
            .config
            .as_ref()
            .and_then(|config| config.space_by_id(self.space).cloned())
        else {
            return false;
        };
        let indexed: Vec<usize> = [1, 2]
            .into_iter()
            .filter(|&attr| ready_index(&space, attr).is_some())
            .collect();
        if indexed.is_empty() || !self.lookup_rng.chance(500) {
            return false;
        }
        let attr = self.lookup_rng.pick(&indexed);
        let lo = self.lookup_rng.below(6) as i64 - 3;
        let hi = lo + self.lookup_rng.below(3) as i64;
        let mut run = LookupRun {
            attr,
            lo,
            hi,
            invoke: self.now,
            lanes: Vec::new(),
            after: None,
            last: None,
            found: BTreeSet::new(),
            msg_id: 0,
            deadline: 0,
        };
        run.lanes = plan(&space, attr, &run.checks()).unwrap_or_default();
        self.trace(|| format!("client {c} lookup attr {attr} in {lo}..={hi}"));
        self.clients[c].lookup = Some(run);
        self.report.lookups += 1;
        self.send_lookup(c);
        true
    }

    /// Sends the lookup's next page request in the client's configuration,
    /// planning again if its indexlet is gone from it.
    pub(crate) fn send_lookup(&mut self, c: usize) {
        let (msg_id, deadline) = self.next_page_send();
        let space_id = self.space;
        let client = &mut self.clients[c];
        let (Some(run), Some(config)) = (client.lookup.as_mut(), client.config.clone()) else {
            return;
        };
        run.msg_id = msg_id;
        run.deadline = deadline;
        let Some(space) = config.space_by_id(space_id) else {
            return self.finish_lookup(c, false);
        };
        if run
            .lanes
            .first()
            .is_some_and(|r| config.region(*r).is_none())
        {
            // A split's new part replaced the indexlet: continue after the
            // last entry received, in the new part's indexlets.
            match plan(space, run.attr, &run.checks()) {
                Some(lanes) => {
                    run.lanes = lanes;
                    run.after = run.last.clone();
                }
                None => return self.finish_lookup(c, false),
            }
        }
        let Some(&region) = run.lanes.first() else {
            return self.finish_lookup(c, true);
        };
        let req = DaemonRequest::Lookup {
            space: space_id,
            region,
            checks: run.checks(),
            descending: false,
            after: run.after.clone(),
            limit: Some(PAGE_ENTRIES),
        };
        self.send_page(c, msg_id, &config, region, req);
    }

    /// Client `c` hears the answer to its lookup's send `id`.
    pub(crate) fn lookup_hears(
        &mut self,
        c: usize,
        id: u64,
        resp: DaemonResponse,
    ) -> Result<(), Violation> {
        let Some(run) = self.clients[c].lookup.as_mut() else {
            return Ok(());
        };
        if run.msg_id != id {
            return Ok(());
        }
        match resp {
            DaemonResponse::LookupPage {
                entries,
                more,
                last,
            } => {
                for (_, key) in &entries {
                    let Value::Int(key) = key else {
                        return Err(Violation::UnexpectedLookupAnswer {
                            client: c,
                            answer: format!("an entry names key {key:?}"),
                        });
                    };
                    run.found.insert(*key);
                }
                if last.is_some() {
                    run.last.clone_from(&last);
                }
                match last {
                    Some(last) if more => run.after = Some(last),
                    _ => {
                        run.lanes.remove(0);
                        run.after = None;
                    }
                }
                self.send_lookup(c);
            }
            resp if page_refused(&resp) => {
                let deadline = self.retry_page_soon(c);
                if let Some(run) = self.clients[c].lookup.as_mut() {
                    run.deadline = deadline;
                }
            }
            other => {
                return Err(Violation::UnexpectedLookupAnswer {
                    client: c,
                    answer: format!("{other:?}"),
                })
            }
        }
        Ok(())
    }

    /// Ends client `c`'s lookup. When it `completed` its walk, every key it
    /// did not find is claimed missed (see the module docs) and every key
    /// it found is read next; each event takes one of the client's
    /// operations, which bounds every key's history as before.
    fn finish_lookup(&mut self, c: usize, completed: bool) {
        let Some(run) = self.clients[c].lookup.take() else {
            return;
        };
        let think = self.rng.below(30);
        self.at(think, Ev::ClientWake(c));
        if !completed {
            return;
        }
        self.trace(|| {
            format!(
                "client {c} lookup attr {} in {}..={} found {:?}",
                run.attr, run.lo, run.hi, run.found
            )
        });
        let (start, end) = (run.invoke, self.now);
        let mut budget = self.clients[c].ops_left;
        for key in 0..self.knobs.keys {
            if budget == 0 || run.found.contains(&key) {
                continue;
            }
            let events = self.history.entry(key).or_default();
            if update_overlaps(events, start, end) || events.len() >= EVENTS_PER_KEY_MAX - 8 {
                continue;
            }
            events.push(Event {
                op: match run.attr {
                    1 => KvOp::Missed {
                        a: (run.lo, run.hi),
                        b: ANY,
                    },
                    _ => KvOp::Missed {
                        a: ANY,
                        b: (run.lo, run.hi),
                    },
                },
                invoke: start,
                ret: Some((end, KvResult::Ok)),
            });
            budget -= 1;
            self.report.lookup_misses += 1;
        }
        let gets: Vec<i64> = run.found.into_iter().rev().take(budget).collect();
        budget -= gets.len();
        let client = &mut self.clients[c];
        client.ops_left = budget;
        client.lookup_gets = gets;
    }
}
