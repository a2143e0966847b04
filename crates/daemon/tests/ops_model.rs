//! `chain::evaluate` against a plain in-memory model of one object under
//! random sequences of updates (each a microtransaction of 1–3 mutations):
//! the model computes with i128 and std collections, so overflow and set /
//! map semantics are checked against an independent formulation.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tessera_daemon::chain::evaluate;
use tessera_protocol::{Action, ClientRef, Mutation, NumOp, Status, UpdateFlags, UpdateRequest};
use tessera_types::{Attribute, DataType, Object, Prim, Space, SpaceDesc, SpaceId, Value};

const I: usize = 1;
const S: usize = 2;
const L: usize = 3;
const ST: usize = 4;
const M: usize = 5;
const F: usize = 6;

fn space() -> Space {
    let attr = |name: &str, dtype| Attribute {
        name: name.into(),
        dtype,
    };
    Space {
        id: SpaceId(1),
        desc: SpaceDesc {
            name: "t".into(),
            attrs: vec![
                attr("k", DataType::Int),
                attr("i", DataType::Int),
                attr("s", DataType::String),
                attr("l", DataType::List(Prim::Int)),
                attr("st", DataType::Set(Prim::Int)),
                attr("m", DataType::Map(Prim::String, Prim::Int)),
                attr("f", DataType::Float),
            ],
            subspaces: vec![],
            indexes: vec![],
            fault_tolerance: 0,
            partitions: 1,
            authorization: false,
            global_indexes: Vec::new(),
            replex: None,
        },
        subspaces: vec![],
        indexes: vec![],
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    i: i64,
    s: Vec<u8>,
    l: Vec<i64>,
    st: BTreeSet<i64>,
    m: BTreeMap<String, i64>,
    f: f64,
}

impl Model {
    fn object(&self) -> Object {
        Object {
            values: vec![
                Value::Int(0),
                Value::Int(self.i),
                Value::String(self.s.clone()),
                Value::List(self.l.iter().map(|&x| Value::Int(x)).collect()),
                Value::Set(self.st.iter().map(|&x| Value::Int(x)).collect()),
                Value::Map(
                    self.m
                        .iter()
                        .map(|(k, &v)| (Value::str(k), Value::Int(v)))
                        .collect(),
                ),
                Value::Float(self.f),
            ],
        }
    }
}

/// The model's integer op: `None` when the exact result is not an i64 or
/// the divisor is zero.
fn model_int(op: NumOp, a: i64, b: i64) -> Option<i64> {
    let (a, b) = (i128::from(a), i128::from(b));
    let r = match op {
        NumOp::Add => a + b,
        NumOp::Sub => a - b,
        NumOp::Mul => a * b,
        NumOp::Div => {
            if b == 0 {
                return None;
            }
            a / b
        }
        NumOp::Mod => {
            if b == 0 {
                return None;
            }
            a % b
        }
        NumOp::And => a & b,
        NumOp::Or => a | b,
        NumOp::Xor => a ^ b,
        NumOp::Min => a.min(b),
        NumOp::Max => a.max(b),
    };
    i64::try_from(r).ok()
}

/// Applies one mutation to the model; `false` when it must fail.
fn model_apply(model: &mut Model, m: &Mutation) -> bool {
    match (&m.action, m.attr) {
        (Action::Num(op, Value::Int(b)), I) => match model_int(*op, model.i, *b) {
            Some(r) => model.i = r,
            None => return false,
        },
        (Action::Num(op, Value::Float(b)), F) => {
            model.f = match op {
                NumOp::Add => model.f + b,
                NumOp::Sub => model.f - b,
                NumOp::Mul => model.f * b,
                NumOp::Div => model.f / b,
                NumOp::Min => model.f.min(*b),
                NumOp::Max => model.f.max(*b),
                _ => return false,
            }
        }
        (Action::StringPrepend(b), S) => model.s.splice(0..0, b.iter().copied()).for_each(drop),
        (Action::StringAppend(b), S) => model.s.extend_from_slice(b),
        (Action::StringLtrim(n), S) => {
            let n = (*n as usize).min(model.s.len());
            model.s.drain(..n);
        }
        (Action::StringRtrim(n), S) => {
            let n = (*n as usize).min(model.s.len());
            model.s.truncate(model.s.len() - n);
        }
        (Action::ListLpush(Value::Int(x)), L) => model.l.insert(0, *x),
        (Action::ListRpush(Value::Int(x)), L) => model.l.push(*x),
        (Action::SetAdd(Value::Int(x)), ST) => {
            model.st.insert(*x);
        }
        (Action::SetRemove(Value::Int(x)), ST) => {
            model.st.remove(x);
        }
        (Action::SetUnion(xs), ST) => model.st.extend(xs.iter().map(int)),
        (Action::SetIntersect(xs), ST) => {
            let other: BTreeSet<i64> = xs.iter().map(int).collect();
            model.st = model.st.intersection(&other).copied().collect();
        }
        (Action::MapAdd(k, Value::Int(v)), M) => {
            model.m.insert(string(k), *v);
        }
        (Action::MapRemove(k), M) => {
            model.m.remove(&string(k));
        }
        (Action::MapNum(k, op, Value::Int(b)), M) => {
            let old = model.m.get(&string(k)).copied().unwrap_or(0);
            match model_int(*op, old, *b) {
                Some(r) => {
                    model.m.insert(string(k), r);
                }
                None => return false,
            }
        }
        (Action::Set(Value::Int(x)), I) => model.i = *x,
        other => panic!("the model does not know {other:?}"),
    }
    true
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("{other:?}"),
    }
}

fn string(v: &Value) -> String {
    match v {
        Value::String(b) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn edge_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        -5i64..5,
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::MAX - 1),
        Just(i64::MIN + 1),
        Just(-1i64),
        any::<i64>(),
    ]
}

fn num_op() -> impl Strategy<Value = NumOp> {
    proptest::sample::select(NumOp::ALL.to_vec())
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let small = || -3i64..4;
    let key = || proptest::sample::select(vec!["a", "b", "c"]).prop_map(Value::str);
    prop_oneof![
        (num_op(), edge_int()).prop_map(|(op, b)| Mutation::new(I, Action::Num(op, Value::Int(b)))),
        edge_int().prop_map(|x| Mutation::new(I, Action::Set(Value::Int(x)))),
        (
            proptest::sample::select(vec![
                NumOp::Add,
                NumOp::Sub,
                NumOp::Mul,
                NumOp::Div,
                NumOp::Min,
                NumOp::Max
            ]),
            prop_oneof![0.5f64..4.0, -4.0f64..-0.5]
        )
            .prop_map(|(op, b)| Mutation::new(F, Action::Num(op, Value::Float(b)))),
        "[a-c]{0,3}".prop_map(|t| Mutation::new(S, Action::StringPrepend(t.into_bytes()))),
        "[a-c]{0,3}".prop_map(|t| Mutation::new(S, Action::StringAppend(t.into_bytes()))),
        (0u64..6).prop_map(|n| Mutation::new(S, Action::StringLtrim(n))),
        (0u64..6).prop_map(|n| Mutation::new(S, Action::StringRtrim(n))),
        small().prop_map(|x| Mutation::new(L, Action::ListLpush(Value::Int(x)))),
        small().prop_map(|x| Mutation::new(L, Action::ListRpush(Value::Int(x)))),
        small().prop_map(|x| Mutation::new(ST, Action::SetAdd(Value::Int(x)))),
        small().prop_map(|x| Mutation::new(ST, Action::SetRemove(Value::Int(x)))),
        proptest::collection::vec(small(), 0..4).prop_map(|xs| Mutation::new(
            ST,
            Action::SetUnion(xs.into_iter().map(Value::Int).collect())
        )),
        proptest::collection::vec(small(), 0..4).prop_map(|xs| Mutation::new(
            ST,
            Action::SetIntersect(xs.into_iter().map(Value::Int).collect())
        )),
        (key(), edge_int()).prop_map(|(k, v)| Mutation::new(M, Action::MapAdd(k, Value::Int(v)))),
        key().prop_map(|k| Mutation::new(M, Action::MapRemove(k))),
        (key(), num_op(), edge_int())
            .prop_map(|(k, op, b)| Mutation::new(M, Action::MapNum(k, op, Value::Int(b)))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn evaluate_agrees_with_the_model(
        updates in proptest::collection::vec(proptest::collection::vec(mutation(), 1..4), 1..25)
    ) {
        let space = space();
        let mut model = Model::default();
        let mut object = model.object();
        for (n, mutations) in updates.into_iter().enumerate() {
            let request = UpdateRequest {
                since: Default::default(),
                space: SpaceId(1),
                key: Value::Int(0),
                client: ClientRef { client_id: 1, request_no: n as u64 },
                flags: UpdateFlags { must_exist: true, ..UpdateFlags::default() },
                checks: vec![],
                mutations: mutations.clone(),
                auth: Default::default(),
                secret: None,
            };
            let mut next = model.clone();
            let ok = mutations.iter().all(|m| model_apply(&mut next, m));
            match evaluate(&space, Some(&object), &request) {
                Ok(Some(new)) => {
                    prop_assert!(ok, "evaluate applied {mutations:?}, the model refuses");
                    model = next;
                    prop_assert_eq!(&new, &model.object());
                    object = new;
                }
                Ok(None) => prop_assert!(false, "an update without erase deleted"),
                Err(refusal) => {
                    prop_assert!(!ok, "evaluate refused {mutations:?}: {refusal:?}");
                    prop_assert_eq!(refusal.status(), Status::CmpFail);
                }
            }
        }
    }
}
