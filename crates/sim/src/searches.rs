//! Searches while the nemesis runs, checked against the history.
//!
//! A client plans its search as the client library does
//! (`tessera_types::plan::plan_search`: the subspace whose regions the
//! checks narrow most, else the key subspace) and reads the planned
//! regions one after another, in small pages, at their tails. The daemon
//! reads each page through the region's local index or by a scan
//! (`tessera_daemon::search`), so the walks the daemons ship — one
//! equality's list, several equalities' lists switching to the rarest, a
//! range on an ordered axis — run here under crashes, cuts and relayouts.
//! In a replex space a failed region (no live daemon, or being refreshed:
//! `replex::failed_regions`) is read through its covering set, each lane
//! keeping only that region's objects (`replex::redirect_reads`,
//! `LostRegion::keeps`), as the client library reads it. When a region a
//! lane reads leaves the configuration (its subspace was removed, or a
//! relayout replaced it) or fails, the search plans again and reads every
//! new lane from its start; pages that fail on a stale configuration or a
//! missing lease are retried at the region's tail in a newer one.
//!
//! What a completed search saw turns into per-key events the
//! linearizability checker judges:
//!
//! - every object it returned is a [`KvOp::Found`] read that takes effect
//!   at some instant after the search began: the key holds that value
//!   then (of two copies of one key, met while an update relocates it, the
//!   higher version, as the client keeps). Not within the search: a search
//!   reads each region at its tail, where an update commits before it
//!   commits at the point leader, so a search may return an update's value
//!   while a get that follows it still returns the value before — as
//!   HyperDex's searches may. The claim still catches an object returned
//!   after an acknowledged update replaced or deleted it before the search
//!   began, and a value the key never held;
//! - every other key gets a [`KvOp::Missed`] event spanning the
//!   search: at some instant of it the key had no object matching the
//!   checks.
//!
//! The second claim is what the design promises
//! (docs/design/search-and-indexes.md, "The path of a search"): an update
//! acknowledged before a search begins is committed in its region at every
//! replica. An update still in flight may move an object from a region not
//! yet read to one already read, so keys with an update overlapping the
//! search are not claimed missed. Every returned object must also match
//! the checks; one that does not is a violation at once.

use crate::check::{update_overlaps, Event, KvOp, KvResult, ANY, EVENTS_PER_KEY_MAX};
use crate::clients::page_refused;
use crate::knobs::Rng;
use crate::report::Violation;
use crate::world::{Ev, World};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use tessera_protocol::{DaemonRequest, DaemonResponse, SearchAfter, SortBy};
use tessera_types::coordinate::key_bytes;
use tessera_types::plan::plan_search;
use tessera_types::replex::{failed_regions, redirect_reads, ReadLane};
use tessera_types::{Check, Configuration, PredOp, RegionId, Space, Value, Version};

/// Objects per page: small, so that searches page and cross epochs.
const PAGE_OBJECTS: u64 = 2;
/// Plans a search may make before it gives up (the client library gives
/// up too when layouts change faster than it reads).
const PLANS_MAX: u32 = 8;

/// What a search asks each region for, as the client library's calls do.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Form {
    /// `search`: objects in key order.
    Objects,
    /// `sorted_search`: objects in this order (every match: no limit).
    Sorted(SortBy),
    /// `count`: keys only, in key order (`DaemonRequest::SearchKeys`).
    Keys,
}

/// What a search returned of one key.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// An object: of two copies the higher version, and its `(a, b)`.
    Object(Version, (i64, i64)),
    /// Its key, from a keys-only search.
    Key,
}

/// A search in progress.
pub(crate) struct SearchRun {
    /// The inclusive ranges of `a` and `b` the checks admit.
    a: (i64, i64),
    b: (i64, i64),
    /// A redirected get's key (and its value): the search checks key
    /// equality and judges that key alone.
    key: Option<(i64, Value)>,
    form: Form,
    invoke: u64,
    /// The regions still to read, each maybe standing in for a failed
    /// region of a replex space; the first is being read.
    lanes: Vec<ReadLane>,
    /// The space as planned: what a redirected lane keeps is decided by
    /// the layout the lanes were made from, as in the client library.
    planned_on: Option<Space>,
    /// Whether some plan read a failed region through its covering set.
    redirected: bool,
    /// Whether the page asked last stands in for a failed region whose
    /// parts the daemon finds in the configuration it was asked in: the
    /// daemon then ships only the objects the lane keeps
    /// (`DaemonRequest::Search::within`).
    filtered: bool,
    /// Where the first lane's next page starts.
    after: Option<SearchAfter>,
    plans: u32,
    /// What was returned, by key.
    found: BTreeMap<i64, Seen>,
    msg_id: u64,
    pub(crate) deadline: u64,
}

impl SearchRun {
    fn checks(&self) -> Vec<Check> {
        let ops = |(lo, hi): (i64, i64)| match (lo, hi) {
            ANY => vec![],
            _ if lo == hi => vec![PredOp::Eq(Value::Int(lo))],
            _ => vec![PredOp::Ge(Value::Int(lo)), PredOp::Le(Value::Int(hi))],
        };
        let key = self.key.iter().map(|(_, value)| Check {
            attr: 0,
            path: None,
            op: PredOp::Eq(value.clone()),
        });
        key.chain(
            [(1, self.a), (2, self.b)]
                .into_iter()
                .flat_map(|(attr, range)| {
                    ops(range).into_iter().map(move |op| Check {
                        attr,
                        path: None,
                        op,
                    })
                }),
        )
        .collect()
    }

    /// Whether position `next` comes after `prev` in the form's order.
    fn follows(&self, prev: &SearchAfter, next: &SearchAfter) -> bool {
        let order = match (self.form, &prev.sort_value, &next.sort_value) {
            (Form::Sorted(sort), Some(p), Some(n)) => sort.compare((p, &prev.key), (n, &next.key)),
            _ => prev.key.cmp(&next.key),
        };
        order == Ordering::Less
    }

    fn admits(&self, key: i64, (a, b): (i64, i64)) -> bool {
        self.key.as_ref().is_none_or(|&(k, _)| k == key)
            && (self.a.0..=self.a.1).contains(&a)
            && (self.b.0..=self.b.1).contains(&b)
    }

    /// Takes a page of what the first lane returned (each key, what was
    /// seen of it — `None`: what a redirected lane does not keep — and its
    /// position), in order after the page's start; moves
    /// to the next lane when no more follows. An error describes a page no
    /// correct daemon sends.
    fn take_page(
        &mut self,
        items: Vec<(i64, Option<Seen>, SearchAfter)>,
        more: bool,
    ) -> Result<(), String> {
        let mut prev = self.after.clone();
        for (key, seen, position) in items {
            if prev.as_ref().is_some_and(|p| !self.follows(p, &position)) {
                return Err(format!("key {key} out of order after {prev:?}"));
            }
            match (self.found.get(&key), seen) {
                (_, None) => {}
                (Some(Seen::Object(had, _)), Some(Seen::Object(version, _))) if *had >= version => {
                }
                (_, Some(seen)) => {
                    self.found.insert(key, seen);
                }
            }
            prev = Some(position);
        }
        match (more, prev) {
            (true, Some(last)) if Some(&last) != self.after.as_ref() => self.after = Some(last),
            (true, _) => return Err("an empty page with more to follow".into()),
            (false, _) => {
                self.lanes.remove(0);
                self.after = None;
            }
        }
        Ok(())
    }

    /// Plans the search in `config`'s `space`: its regions, in the plan's
    /// order, each failed one of a replex space (no live daemon, or being
    /// refreshed) replaced by the regions of its covering set, as the
    /// client library plans (`replex::redirect_reads`). `false` when a
    /// failed region has no covering set now: the search waits.
    fn plan(&mut self, config: &Configuration, space: &Space) -> bool {
        let plan = plan_search(space, &self.checks());
        let subspace = &space.subspaces[plan.subspace];
        let planned: Vec<RegionId> = plan
            .regions
            .iter()
            .map(|&i| subspace.regions[i].id)
            .collect();
        let Ok(lanes) = redirect_reads(space, &failed_regions(config, space), &planned) else {
            return false;
        };
        self.redirected |= lanes.iter().any(|l| l.lost.is_some());
        self.lanes = lanes;
        self.planned_on = Some(space.clone());
        self.after = None;
        self.plans += 1;
        true
    }

    /// Whether the plan no longer fits `config`: a region a lane reads is
    /// gone or has failed.
    fn plan_is_stale(&self, config: &Configuration, space: &Space) -> bool {
        let failed = failed_regions(config, space);
        self.planned_on.is_none()
            || self
                .lanes
                .iter()
                .any(|l| config.region(l.region).is_none() || failed.contains(&l.region))
    }
}

impl World {
    /// Starts a search for client `c` instead of a get, if the seed runs
    /// searches and the draw says so.
    pub(crate) fn try_start_search(&mut self, c: usize) -> bool {
        if !self.knobs.searches || !self.search_rng.chance(600) {
            return false;
        }
        if self.clients[c].config.is_none() {
            return false;
        }
        // Values on both sides of those written, so that some searches
        // find nothing.
        let rng = &mut self.search_rng;
        let point = |rng: &mut Rng| {
            let v = rng.below(6) as i64 - 3;
            (v, v)
        };
        let range = |rng: &mut Rng| {
            let lo = rng.below(6) as i64 - 3;
            (lo, lo + 1 + rng.below(3) as i64)
        };
        let (a, b) = match rng.below(7) {
            0 => (ANY, ANY),
            1 => (point(rng), ANY),
            2 => (ANY, point(rng)),
            3 => (ANY, range(rng)),
            4 => (range(rng), ANY),
            5 => (point(rng), point(rng)),
            _ => (point(rng), range(rng)),
        };
        let form = match rng.below(4) {
            0 => Form::Sorted(SortBy {
                attr: 1 + rng.below(2) as usize,
                descending: rng.chance(500),
            }),
            1 => Form::Keys,
            _ => Form::Objects,
        };
        self.start_search(c, a, b, None, form)
    }

    /// Starts client `c`'s get of `key` as the client library reads a key
    /// whose key region has no live daemon in a replex space
    /// (`Client::redirected_get`): a search for the key's equality, which
    /// reads the key region's covering set, each lane keeping only what
    /// the key region places. Not linearizable: judged as a search is
    /// (see the module docs), for that key alone.
    pub(crate) fn start_redirected_get(&mut self, c: usize, key: i64) -> bool {
        let value = self.knobs.key_value(key);
        self.start_search(c, ANY, ANY, Some((key, value)), Form::Objects)
    }

    /// Starts a search for client `c` of the objects whose `a` and `b`
    /// lie in these inclusive ranges, planned in the client's
    /// configuration; `false` if it has none with the space.
    pub(crate) fn start_search(
        &mut self,
        c: usize,
        a: (i64, i64),
        b: (i64, i64),
        key: Option<(i64, Value)>,
        form: Form,
    ) -> bool {
        let Some(space) = self.clients[c]
            .config
            .as_ref()
            .and_then(|config| config.space_by_id(self.space).cloned())
        else {
            return false;
        };
        let mut run = SearchRun {
            a,
            b,
            key,
            form,
            invoke: self.now,
            lanes: Vec::new(),
            planned_on: None,
            redirected: false,
            filtered: false,
            after: None,
            plans: 0,
            found: BTreeMap::new(),
            msg_id: 0,
            deadline: 0,
        };
        let config = self.clients[c].config.clone().expect("checked");
        run.plan(&config, &space);
        self.trace(|| {
            format!(
                "client {c} search {:?} {:?} over {:?}",
                run.form,
                run.checks(),
                run.lanes
            )
        });
        self.report.searches += u64::from(run.key.is_none());
        self.clients[c].search = Some(run);
        self.send_search(c);
        true
    }

    /// Sends the search's next page request in the client's configuration,
    /// planning again if its region is gone from it.
    pub(crate) fn send_search(&mut self, c: usize) {
        let (msg_id, deadline) = self.next_page_send();
        let space_id = self.space;
        let client = &mut self.clients[c];
        let (Some(run), Some(config)) = (client.search.as_mut(), client.config.clone()) else {
            return;
        };
        run.msg_id = msg_id;
        run.deadline = deadline;
        let Some(space) = config.space_by_id(space_id) else {
            return self.finish_search(c, false);
        };
        if run.plan_is_stale(&config, space) {
            // The layout changed under the search, or a region it reads
            // failed: read every region of the new plan from its start.
            if run.plans >= PLANS_MAX {
                return self.finish_search(c, false);
            }
            if !run.plan(&config, space) {
                // No covering set now: wait for a newer configuration.
                let deadline = self.retry_page_soon(c);
                if let Some(run) = self.clients[c].search.as_mut() {
                    run.deadline = deadline;
                }
                return;
            }
            self.report.search_replans += u64::from(run.plans > 1);
        }
        let Some(lane) = run.lanes.first() else {
            return self.finish_search(c, true);
        };
        let region = lane.region;
        let within = lane
            .lost
            .as_ref()
            .zip(run.planned_on.as_ref())
            .and_then(|(lost, planned)| lost.within(planned));
        let stands_in = lane.lost.is_some();
        run.filtered = within
            .as_ref()
            .is_some_and(|w| w.lost_region(space).is_some());
        let req = match run.form {
            // A redirected lane reads whole objects: a key alone does not
            // say whether the lost region places the object.
            Form::Keys if !stands_in => DaemonRequest::SearchKeys {
                space: space_id,
                region,
                checks: run.checks(),
                after: run.after.as_ref().map(|a| a.key.clone()),
                auth: Default::default(),
                op: Default::default(),
            },
            form => DaemonRequest::Search {
                space: space_id,
                region,
                checks: run.checks(),
                sort: match form {
                    Form::Sorted(sort) => Some(sort),
                    _ => None,
                },
                after: run.after.clone(),
                limit: Some(PAGE_OBJECTS),
                auth: Default::default(),
                within,
            },
        };
        self.send_page(c, msg_id, &config, region, req);
    }

    /// Client `c` hears the answer to its search's send `id`.
    pub(crate) fn search_hears(
        &mut self,
        c: usize,
        id: u64,
        resp: DaemonResponse,
    ) -> Result<(), Violation> {
        let Some(run) = self.clients[c].search.as_mut() else {
            return Ok(());
        };
        if run.msg_id != id {
            return Ok(());
        }
        let unexpected = |answer: String| Violation::UnexpectedSearchAnswer { client: c, answer };
        match resp {
            DaemonResponse::SearchPage { objects, more }
                if !matches!(run.form, Form::Keys)
                    || run.lanes.first().is_some_and(|l| l.lost.is_some()) =>
            {
                let lane = run.lanes.first().cloned();
                let mut items = Vec::with_capacity(objects.len());
                for (version, bytes) in &objects {
                    let object = bytes
                        .decode()
                        .map_err(|e| unexpected(format!("an undecodable object: {e}")))?;
                    let (Some(key), Some(Value::Int(a)), Some(Value::Int(b)), 3) = (
                        object.values.first().and_then(|k| self.knobs.key_of(k)),
                        object.values.get(1),
                        object.values.get(2),
                        object.values.len(),
                    ) else {
                        return Err(unexpected(format!("an object {:?}", object.values)));
                    };
                    if !run.admits(key, (*a, *b)) {
                        return Err(unexpected(format!(
                            "key {key} = ({a}, {b}), which {:?} does not match",
                            run.checks()
                        )));
                    }
                    let position = SearchAfter {
                        key: key_bytes(&object.values[0]),
                        sort_value: match run.form {
                            Form::Sorted(sort) => Some(object.values[sort.attr].clone()),
                            _ => None,
                        },
                    };
                    // A lane standing in for a failed region keeps only
                    // that region's objects, each from one lane.
                    let kept = match lane
                        .as_ref()
                        .and_then(|l| Some((l.region, l.lost.as_ref()?)))
                    {
                        None => true,
                        Some((region, lost)) => run
                            .planned_on
                            .as_ref()
                            .and_then(|space| lost.keeps(space, region, &object))
                            .ok_or_else(|| unexpected(format!("an object {:?}", object.values)))?,
                    };
                    if lane.as_ref().is_some_and(|l| l.lost.is_some()) {
                        self.report.redirect_shipped += 1;
                        self.report.redirect_kept += u64::from(kept);
                    }
                    // A daemon told which failed region the lane stands in
                    // for ships only what the lane keeps.
                    if !kept && run.filtered {
                        return Err(unexpected(format!(
                            "key {key} = ({a}, {b}), which the lane does not keep"
                        )));
                    }
                    let seen = match run.form {
                        Form::Keys => Seen::Key,
                        _ => Seen::Object(*version, (*a, *b)),
                    };
                    items.push((key, kept.then_some(seen), position));
                }
                let keys: Vec<(i64, Option<Seen>)> =
                    items.iter().map(|(k, s, _)| (*k, *s)).collect();
                run.take_page(items, more).map_err(unexpected)?;
                self.trace(|| format!("client {c} search page: {keys:?}, more: {more}"));
                self.send_search(c);
            }
            DaemonResponse::KeysPage { keys, more } if matches!(run.form, Form::Keys) => {
                let mut items = Vec::with_capacity(keys.len());
                for key in &keys {
                    let Some(k) = self.knobs.key_of(key) else {
                        return Err(unexpected(format!("a key {key:?}")));
                    };
                    let position = SearchAfter {
                        key: key_bytes(key),
                        sort_value: None,
                    };
                    items.push((k, Some(Seen::Key), position));
                }
                let keys: Vec<(i64, Option<Seen>)> =
                    items.iter().map(|(k, s, _)| (*k, *s)).collect();
                run.take_page(items, more).map_err(unexpected)?;
                self.trace(|| format!("client {c} search page: {keys:?}, more: {more}"));
                self.send_search(c);
            }
            resp if page_refused(&resp) => {
                let deadline = self.retry_page_soon(c);
                if let Some(run) = self.clients[c].search.as_mut() {
                    run.deadline = deadline;
                }
            }
            other => return Err(unexpected(format!("{other:?}"))),
        }
        Ok(())
    }

    /// Ends client `c`'s search. When it `completed` every planned region,
    /// what it returned and what it did not become events (see the module
    /// docs); each takes one of the client's operations, which bounds
    /// every key's history as before.
    fn finish_search(&mut self, c: usize, completed: bool) {
        let Some(run) = self.clients[c].search.take() else {
            return;
        };
        let think = self.rng.below(30);
        self.at(think, Ev::ClientWake(c));
        if !completed {
            self.report.search_gave_up += 1;
            return;
        }
        self.trace(|| format!("client {c} search {:?} found {:?}", run.checks(), run.found));
        self.report.search_redirected += u64::from(run.redirected);
        self.report.redirected_gets += u64::from(run.key.is_some());
        let (start, end) = (run.invoke, self.now);
        // A redirected get took its operation when it began as a get.
        let mut budget = match run.key {
            Some(_) => 1,
            None => self.clients[c].ops_left,
        };
        let keys = match &run.key {
            Some((key, _)) => *key..*key + 1,
            None => 0..self.knobs.keys,
        };
        for key in keys {
            if budget == 0 {
                break;
            }
            let events = self.history.entry(key).or_default();
            if events.len() >= EVENTS_PER_KEY_MAX - 8 {
                continue;
            }
            let (op, result, ret) = match run.found.get(&key) {
                Some(&Seen::Object(_, (a, b))) => {
                    self.report.search_found += 1;
                    (KvOp::Found, KvResult::Value(a, b), u64::MAX)
                }
                Some(Seen::Key) => {
                    self.report.search_found += 1;
                    (KvOp::FoundKey, KvResult::Ok, u64::MAX)
                }
                None => {
                    if update_overlaps(events, start, end) {
                        continue;
                    }
                    self.report.search_misses += 1;
                    (KvOp::Missed { a: run.a, b: run.b }, KvResult::Ok, end)
                }
            };
            events.push(Event {
                op,
                invoke: start,
                ret: Some((ret, result)),
            });
            budget -= 1;
        }
        if run.key.is_none() {
            self.clients[c].ops_left = budget;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Form;
    use crate::check::ANY;
    use crate::knobs::{Knobs, ReplexSpace, Rng};
    use crate::world::testing::quiet_knobs;
    use crate::world::World;
    use tessera_coordinator::state::{Command, CommandResult};
    use tessera_daemon::chain::key_region;
    use tessera_types::PartId;

    #[test]
    fn a_search_whose_subspace_is_removed_under_it_plans_again_and_misses_nothing() {
        let knobs = Knobs {
            searches: true,
            keys: 5,
            ..quiet_knobs()
        };
        let mut world = World::new(7, knobs, Rng::new(7));
        // The clients' own operations (searches among them) are over.
        world.run_until(8_000);
        assert!(world.clients.iter().all(|c| !c.busy() && c.ops_left == 0));
        let before = world.report.clone();
        // The subspace on `a` goes; the daemons learn of it, the idle
        // clients do not.
        let result = world.apply(Command::RmSubspace {
            space: "kv".into(),
            part: PartId(1),
        });
        assert!(
            !matches!(result, CommandResult::Failed { .. }),
            "{result:?}"
        );
        world.run_until(9_000);
        // An equality on `a`, planned on the client's older configuration,
        // reads one region of the subspace on `a`: its page is refused
        // for its epoch, and in the newest configuration the region is gone.
        // Its five keys' events are the client's last operations.
        world.clients[0].ops_left = 5;
        let planned = world.clients[0].config.clone().expect("a configuration");
        assert!(planned.epoch < world.configuration().epoch);
        assert!(world.start_search(0, (1, 1), ANY, None, Form::Objects));
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        let report = &world.report;
        assert_eq!(report.searches, before.searches + 1);
        assert_eq!(report.search_replans, before.search_replans + 1);
        // Every key became an event: found or checked missed.
        assert_eq!(
            report.search_found + report.search_misses,
            before.search_found + before.search_misses + 5
        );
    }

    #[test]
    fn a_get_whose_key_region_lost_its_daemon_reads_the_covering_set() {
        let knobs = Knobs {
            keys: 5,
            replex: Some(ReplexSpace {
                attr: 1,
                hybrid: None,
            }),
            ..quiet_knobs()
        };
        let mut world = World::new(11, knobs, Rng::new(11));
        world.run_until(8_000);
        assert!(world.clients.iter().all(|c| !c.busy() && c.ops_left == 0));
        let before = world.report.clone();
        // Key 2's key region loses its one daemon: crashed, and taken
        // offline in the configuration the client reads.
        let key = 2;
        let config = world.configuration();
        let space = config.space_by_id(world.space).expect("the space");
        let region = key_region(space, &world.knobs.key_value(key)).expect("a key region");
        let daemon = region.chain[0];
        assert_eq!(region.chain.len(), 1, "a replex region has one daemon");
        let untouched = (0..5)
            .find(|&k| {
                key_region(space, &world.knobs.key_value(k))
                    .is_some_and(|r| !r.chain.contains(&daemon))
            })
            .expect("a key whose region another daemon holds");
        world.crash(daemon);
        let result = world.apply(Command::DaemonOffline { id: daemon });
        assert!(
            !matches!(result, CommandResult::Failed { .. }),
            "{result:?}"
        );
        world.clients[0].config = Some(world.configuration().into());
        assert!(world.key_region_lost(0, key));
        assert!(!world.key_region_lost(0, untouched));
        assert!(world.start_redirected_get(0, key));
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        let report = &world.report;
        assert_eq!(report.redirected_gets, before.redirected_gets + 1);
        assert_eq!(report.search_redirected, before.search_redirected + 1);
        assert_eq!(report.searches, before.searches);
        // Its one key became an event: found or checked missed.
        assert_eq!(
            report.search_found + report.search_misses,
            before.search_found + before.search_misses + 1
        );
    }
}
