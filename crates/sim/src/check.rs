//! Per-key linearizability of a recorded history.
//!
//! Each key is an independent register-like object, so the history is
//! checked key by key (linearizability is compositional). For one key the
//! search tries every order consistent with real time — an operation may
//! come next only if no other unplaced operation returned before it was
//! invoked — replaying each against the sequential model and pruning
//! `(placed set, state)` pairs already seen. Operations that never returned
//! may take effect at any point after their invocation, or not at all.

use std::collections::HashSet;

/// The operations the simulated clients issue, on objects `(a, b)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvOp {
    /// Create or overwrite both attributes.
    Put {
        a: i64,
        b: i64,
    },
    /// If the object exists and `a == a_is`, set `b`.
    CondPut {
        a_is: i64,
        b: i64,
    },
    /// Atomically add `n` to `a` of an existing object.
    Add {
        n: i64,
    },
    /// Delete an existing object.
    Del,
    Get,
    /// A search returned this object: a read that may take effect at any
    /// time after the search began (see `crate::searches`).
    Found,
    /// A keys-only search returned this key: likewise, a read that the
    /// key has an object then.
    FoundKey,
    /// A lookup through a global index or a search did not find this
    /// key, asking for `a` and `b` in these inclusive ranges (a lookup
    /// bounds one of them): a read that holds when there is no object or
    /// one of its values lies outside its range.
    Missed {
        a: (i64, i64),
        b: (i64, i64),
    },
}

impl KvOp {
    /// Whether the operation may change the object.
    pub fn is_update(self) -> bool {
        !matches!(
            self,
            KvOp::Get | KvOp::Found | KvOp::FoundKey | KvOp::Missed { .. }
        )
    }
}

/// No bound on an attribute, in [`KvOp::Missed`].
pub const ANY: (i64, i64) = (i64::MIN, i64::MAX);

/// What the cluster answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvResult {
    Ok,
    CmpFail,
    NotFound,
    Value(i64, i64),
}

/// The object under one key, if any.
pub type State = Option<(i64, i64)>;

/// The sequential model.
pub fn step(state: State, op: KvOp) -> (State, KvResult) {
    match (op, state) {
        (KvOp::Put { a, b }, _) => (Some((a, b)), KvResult::Ok),
        (KvOp::CondPut { .. } | KvOp::Add { .. } | KvOp::Del, None) => (None, KvResult::NotFound),
        (KvOp::CondPut { a_is, b }, Some((a, _))) if a == a_is => (Some((a, b)), KvResult::Ok),
        (KvOp::CondPut { .. }, s) => (s, KvResult::CmpFail),
        (KvOp::Add { n }, Some((a, b))) => (Some((a + n, b)), KvResult::Ok),
        (KvOp::Del, Some(_)) => (None, KvResult::Ok),
        (KvOp::Get | KvOp::Found, s) => (
            s,
            s.map_or(KvResult::NotFound, |(a, b)| KvResult::Value(a, b)),
        ),
        (KvOp::FoundKey, s) => (
            s,
            if s.is_some() {
                KvResult::Ok
            } else {
                KvResult::NotFound
            },
        ),
        (
            KvOp::Missed {
                a: (a_lo, a_hi),
                b: (b_lo, b_hi),
            },
            s,
        ) => {
            let matched =
                s.is_some_and(|(a, b)| (a_lo..=a_hi).contains(&a) && (b_lo..=b_hi).contains(&b));
            // A miss is consistent with a state the read could not match.
            (
                s,
                if matched {
                    KvResult::CmpFail
                } else {
                    KvResult::Ok
                },
            )
        }
    }
}

/// One operation on one key: invoked at `invoke`, returned at `ret.0` with
/// `ret.1`, or never returned.
#[derive(Clone, Debug)]
pub struct Event {
    pub op: KvOp,
    pub invoke: u64,
    pub ret: Option<(u64, KvResult)>,
}

/// Whether an update in `events` may have taken effect between `start`
/// and `end`: a read over that span saw no single state of the key.
pub fn update_overlaps(events: &[Event], start: u64, end: u64) -> bool {
    events
        .iter()
        .any(|e| e.op.is_update() && e.invoke < end && e.ret.is_none_or(|(t, _)| t > start))
}

/// The most operations one key's history may hold.
pub const EVENTS_PER_KEY_MAX: usize = 64;

/// A history with no linearization; `history` lists its operations in
/// the order they were invoked.
#[derive(Debug, thiserror::Error)]
#[error("no linearization of this history:\n{history}")]
pub struct NotLinearizable {
    pub history: String,
}

/// Whether the history of one key, starting from no object, is
/// linearizable. The error describes the history.
pub fn check_key(events: &[Event]) -> Result<(), NotLinearizable> {
    assert!(
        events.len() <= EVENTS_PER_KEY_MAX,
        "too many events for one key"
    );
    let n = events.len();
    let all_completed: u64 = (0..n)
        .filter(|&i| events[i].ret.is_some())
        .fold(0, |m, i| m | 1 << i);
    let mut seen: HashSet<(u64, State)> = HashSet::new();
    let mut stack: Vec<(u64, State)> = vec![(0, None)];
    while let Some((placed, state)) = stack.pop() {
        if placed & all_completed == all_completed {
            return Ok(());
        }
        if !seen.insert((placed, state)) {
            continue;
        }
        // The earliest return among the unplaced completed operations: an
        // operation invoked after it cannot come next.
        let horizon = (0..n)
            .filter(|&i| placed & (1 << i) == 0)
            .filter_map(|i| events[i].ret.map(|(t, _)| t))
            .min()
            .unwrap_or(u64::MAX);
        for (i, event) in events.iter().enumerate() {
            if placed & (1 << i) != 0 || event.invoke > horizon {
                continue;
            }
            let (next, result) = step(state, event.op);
            if let Some((_, got)) = event.ret {
                if got != result {
                    continue;
                }
            }
            stack.push((placed | 1 << i, next));
        }
    }
    let mut lines = Vec::new();
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by_key(|e| e.invoke);
    for e in sorted {
        lines.push(format!(
            "  [{:>7} .. {:>7}] {:?} -> {:?}",
            e.invoke,
            e.ret.map_or("never".to_string(), |(t, _)| t.to_string()),
            e.op,
            e.ret.map(|(_, r)| r)
        ));
    }
    Err(NotLinearizable {
        history: lines.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: KvOp, invoke: u64, ret: u64, result: KvResult) -> Event {
        Event {
            op,
            invoke,
            ret: Some((ret, result)),
        }
    }

    #[test]
    fn sequential_histories_follow_the_model() {
        let h = [
            ev(KvOp::Put { a: 1, b: 2 }, 0, 1, KvResult::Ok),
            ev(KvOp::Add { n: 3 }, 2, 3, KvResult::Ok),
            ev(KvOp::Get, 4, 5, KvResult::Value(4, 2)),
            ev(KvOp::CondPut { a_is: 9, b: 0 }, 6, 7, KvResult::CmpFail),
            ev(KvOp::Del, 8, 9, KvResult::Ok),
            ev(KvOp::Get, 10, 11, KvResult::NotFound),
        ];
        assert!(check_key(&h).is_ok());
    }

    #[test]
    fn a_lost_acknowledged_write_is_caught() {
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 1, KvResult::Ok),
            ev(KvOp::Put { a: 2, b: 2 }, 2, 3, KvResult::Ok),
            ev(KvOp::Get, 4, 5, KvResult::Value(1, 1)),
        ];
        assert!(check_key(&h).is_err());
    }

    #[test]
    fn concurrent_operations_may_take_either_order() {
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 10, KvResult::Ok),
            ev(KvOp::Put { a: 2, b: 2 }, 1, 9, KvResult::Ok),
            ev(KvOp::Get, 11, 12, KvResult::Value(1, 1)),
        ];
        assert!(check_key(&h).is_ok());
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 10, KvResult::Ok),
            ev(KvOp::Put { a: 2, b: 2 }, 1, 9, KvResult::Ok),
            ev(KvOp::Get, 11, 12, KvResult::Value(2, 2)),
        ];
        assert!(check_key(&h).is_ok());
    }

    #[test]
    fn a_double_applied_add_is_caught_and_unreturned_ones_are_optional() {
        let h = [
            ev(KvOp::Put { a: 0, b: 0 }, 0, 1, KvResult::Ok),
            ev(KvOp::Add { n: 1 }, 2, 3, KvResult::Ok),
            ev(KvOp::Get, 4, 5, KvResult::Value(2, 0)),
        ];
        assert!(check_key(&h).is_err(), "one add applied twice");
        let pending = Event {
            op: KvOp::Add { n: 1 },
            invoke: 2,
            ret: None,
        };
        for seen in [0, 1] {
            let h = [
                ev(KvOp::Put { a: 0, b: 0 }, 0, 1, KvResult::Ok),
                pending.clone(),
                ev(KvOp::Get, 4, 5, KvResult::Value(seen, 0)),
            ];
            assert!(
                check_key(&h).is_ok(),
                "an unanswered add may or may not apply"
            );
        }
        let h = [
            ev(KvOp::Put { a: 0, b: 0 }, 0, 1, KvResult::Ok),
            pending,
            ev(KvOp::Get, 4, 5, KvResult::Value(2, 0)),
        ];
        assert!(check_key(&h).is_err(), "but at most once");
    }

    #[test]
    fn a_lookup_may_miss_a_key_only_while_it_does_not_match() {
        let missed = |invoke, ret| {
            ev(
                KvOp::Missed { a: (0, 2), b: ANY },
                invoke,
                ret,
                KvResult::Ok,
            )
        };
        // The object matched (a = 1) throughout the lookup.
        let h = [
            ev(KvOp::Put { a: 1, b: 9 }, 0, 1, KvResult::Ok),
            missed(2, 3),
        ];
        assert!(check_key(&h).is_err());
        // Outside the range, on the other attribute, or absent: no match.
        let h = [
            ev(KvOp::Put { a: 3, b: 1 }, 0, 1, KvResult::Ok),
            missed(2, 3),
        ];
        assert!(check_key(&h).is_ok());
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 1, KvResult::Ok),
            ev(KvOp::Del, 2, 3, KvResult::Ok),
            missed(4, 5),
        ];
        assert!(check_key(&h).is_ok());
        assert!(check_key(&[missed(0, 1)]).is_ok());
        // A put of a non-matching value concurrent with the lookup lets it miss.
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 1, KvResult::Ok),
            ev(KvOp::Put { a: 5, b: 1 }, 2, 6, KvResult::Ok),
            missed(3, 4),
        ];
        assert!(check_key(&h).is_ok());
        let b = ev(KvOp::Missed { a: ANY, b: (1, 1) }, 2, 3, KvResult::Ok);
        assert!(check_key(&[ev(KvOp::Put { a: 7, b: 1 }, 0, 1, KvResult::Ok), b]).is_err());
    }

    #[test]
    fn what_a_search_returns_may_take_effect_after_it_but_not_before_it_began() {
        let put = ev(KvOp::Put { a: 1, b: 1 }, 0, 10, KvResult::Ok);
        let del = ev(KvOp::Del, 20, 30, KvResult::Ok);
        let found = |op, invoke, result| ev(op, invoke, u64::MAX, result);
        // Seen during the put (before it returned), and before the delete.
        for op in [KvOp::Found, KvOp::FoundKey] {
            let result = match op {
                KvOp::Found => KvResult::Value(1, 1),
                _ => KvResult::Ok,
            };
            assert!(check_key(&[put.clone(), found(op, 5, result)]).is_ok());
            assert!(check_key(&[put.clone(), del.clone(), found(op, 15, result)]).is_ok());
            // A search that began after the delete returned cannot see it.
            assert!(check_key(&[put.clone(), del.clone(), found(op, 31, result)]).is_err());
        }
        // Nor a value the key never held.
        assert!(check_key(&[put, found(KvOp::Found, 5, KvResult::Value(1, 2))]).is_err());
    }

    #[test]
    fn a_search_on_both_attributes_misses_a_key_only_when_one_is_out_of_range() {
        let put = ev(KvOp::Put { a: 1, b: 1 }, 0, 1, KvResult::Ok);
        let missed = |a, b| ev(KvOp::Missed { a, b }, 2, 3, KvResult::Ok);
        assert!(check_key(&[put.clone(), missed((1, 1), (1, 2))]).is_err());
        assert!(check_key(&[put.clone(), missed(ANY, ANY)]).is_err());
        assert!(check_key(&[put.clone(), missed((1, 1), (2, 3))]).is_ok());
        assert!(check_key(&[put, missed((-1, 0), (1, 1))]).is_ok());
        assert!(check_key(&[missed(ANY, ANY)]).is_ok());
    }

    #[test]
    fn real_time_order_is_respected() {
        // The get began after the delete returned, so it cannot see the
        // object even though a concurrent schedule could have.
        let h = [
            ev(KvOp::Put { a: 1, b: 1 }, 0, 1, KvResult::Ok),
            ev(KvOp::Del, 2, 3, KvResult::Ok),
            ev(KvOp::Get, 4, 5, KvResult::Value(1, 1)),
        ];
        assert!(check_key(&h).is_err());
    }
}
