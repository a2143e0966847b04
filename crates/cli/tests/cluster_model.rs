//! Random operation sequences on a real cluster (one coordinator, four
//! daemons, a space with two subspaces besides the key's) against a plain
//! in-memory model.
//!
//! Each round runs one random operation on each of a batch of distinct
//! keys at once — every type and operation family, plain and `cond_`,
//! puts, deletes and microtransactions, with overflow, division by zero
//! and bad document paths among them — while a random search runs beside
//! them. Every outcome must be the model's (API.md §3.4: `Done`,
//! `NotFound`, `CmpFail`); the concurrent search may show a key of the
//! batch in its old or new state (or, when moved between regions, not at
//! all) but every other key exactly as the model has it. Between rounds,
//! searches, sorted searches and counts run alone and must equal the
//! model exactly, and group operations must change exactly the objects the
//! model says. At the end every object is read back and compared.
//!
//! `TESSERA_TEST_SEED` replays a run.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::Cluster;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map as JsonMap, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use tessera_client::{Client, ClientError, NumOp, Op, Outcome, PredOp, Record, Value};
use tokio::runtime::Runtime;

const SPACE: &str = "space m key int k attributes int a, string s, float f, list(int) l, \
                     set(string) st, map(string, int) mp, document d \
                     subspace a subspace s create 8 partitions tolerate 1 failure";

const KEYS: i64 = 120;
const ROUNDS: usize = 150;
const BATCH: usize = 16;

// ------------------------------------------------------------------ model

/// One object as the model holds it.
#[derive(Clone, Debug, PartialEq)]
struct Obj {
    a: i64,
    s: Vec<u8>,
    f: f64,
    l: Vec<i64>,
    st: BTreeSet<String>,
    mp: BTreeMap<String, i64>,
    d: Json,
}

impl Default for Obj {
    fn default() -> Obj {
        Obj {
            a: 0,
            s: Vec::new(),
            f: 0.0,
            l: Vec::new(),
            st: BTreeSet::new(),
            mp: BTreeMap::new(),
            d: Json::Object(JsonMap::new()),
        }
    }
}

type Model = BTreeMap<i64, Obj>;

/// What the model says an operation does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Done,
    NotFound,
    CmpFail,
}

impl Expect {
    fn of(outcome: &Outcome) -> Expect {
        match outcome {
            Outcome::Done => Expect::Done,
            Outcome::NotFound => Expect::NotFound,
            Outcome::CmpFail { .. } => Expect::CmpFail,
        }
    }
}

fn checked(op: NumOp, a: i64, b: i64) -> Option<i64> {
    let (x, y) = (i128::from(a), i128::from(b));
    let r = match op {
        NumOp::Add => x + y,
        NumOp::Sub => x - y,
        NumOp::Mul => x * y,
        NumOp::Div if y == 0 => return None,
        NumOp::Div => x / y,
        NumOp::Mod if y == 0 => return None,
        NumOp::Mod => x % y,
        NumOp::And => x & y,
        NumOp::Or => x | y,
        NumOp::Xor => x ^ y,
        NumOp::Min => x.min(y),
        NumOp::Max => x.max(y),
    };
    i64::try_from(r).ok()
}

fn float_op(op: NumOp, a: f64, b: f64) -> f64 {
    match op {
        NumOp::Add => a + b,
        NumOp::Sub => a - b,
        NumOp::Mul => a * b,
        NumOp::Div => a / b,
        NumOp::Min => a.min(b),
        NumOp::Max => a.max(b),
        other => panic!("no float {other:?}"),
    }
}

// ------------------------------------------------------------ operations

/// One mutation of one attribute, as the client names it and as the model
/// applies it.
#[derive(Clone, Debug)]
enum Mut {
    PutA(Value),
    PutS(String),
    PutF(Value),
    PutL(Vec<i64>),
    PutSt(Vec<String>),
    PutMp(Vec<(String, i64)>),
    PutDoc(Json),
    Num(NumOp, i64),
    FloatNum(NumOp, f64),
    Prepend(String),
    Append(String),
    Ltrim(u64),
    Rtrim(u64),
    Lpush(i64),
    Rpush(i64),
    SetAdd(String),
    SetRemove(String),
    SetUnion(Vec<String>),
    SetIntersect(Vec<String>),
    MapAdd(String, i64),
    MapRemove(String),
    MapNum(NumOp, String, i64),
    DocPutX(i64),
    DocPutThroughX,
    DocAddX(i64),
    DocAppendY(String),
    DocUnsetY,
    DocRenameYW,
}

impl Mut {
    /// The (attribute or path, operation) the client sends.
    fn op(&self) -> (String, Op) {
        let strs = |v: &[String]| Value::Set(v.iter().map(|s| Value::str(s)).collect());
        let (name, op) = match self {
            Mut::PutA(v) => ("a", Op::Put(v.clone())),
            Mut::PutS(s) => ("s", Op::Put(Value::str(s))),
            Mut::PutF(v) => ("f", Op::Put(v.clone())),
            Mut::PutL(l) => (
                "l",
                Op::Put(Value::List(l.iter().map(|&i| Value::Int(i)).collect())),
            ),
            Mut::PutSt(st) => ("st", Op::Put(strs(st))),
            Mut::PutMp(mp) => (
                "mp",
                Op::Put(Value::Map(
                    mp.iter()
                        .map(|(k, v)| (Value::str(k), Value::Int(*v)))
                        .collect(),
                )),
            ),
            Mut::PutDoc(j) => ("d", Op::Put(Value::Document(j.to_string()))),
            Mut::Num(op, n) => ("a", Op::Atomic(*op, Value::Int(*n))),
            Mut::FloatNum(op, x) => ("f", Op::Atomic(*op, Value::Float(*x))),
            Mut::Prepend(s) => ("s", Op::StringPrepend(Value::str(s))),
            Mut::Append(s) => ("s", Op::StringAppend(Value::str(s))),
            Mut::Ltrim(n) => ("s", Op::StringLtrim(Value::Int(*n as i64))),
            Mut::Rtrim(n) => ("s", Op::StringRtrim(Value::Int(*n as i64))),
            Mut::Lpush(i) => ("l", Op::ListLpush(Value::Int(*i))),
            Mut::Rpush(i) => ("l", Op::ListRpush(Value::Int(*i))),
            Mut::SetAdd(x) => ("st", Op::SetAdd(Value::str(x))),
            Mut::SetRemove(x) => ("st", Op::SetRemove(Value::str(x))),
            Mut::SetUnion(xs) => ("st", Op::SetUnion(strs(xs))),
            Mut::SetIntersect(xs) => ("st", Op::SetIntersect(strs(xs))),
            Mut::MapAdd(k, v) => ("mp", Op::MapAdd(Value::str(k), Value::Int(*v))),
            Mut::MapRemove(k) => ("mp", Op::MapRemove(Value::str(k))),
            Mut::MapNum(op, k, v) => ("mp", Op::MapAtomic(*op, Value::str(k), Value::Int(*v))),
            Mut::DocPutX(n) => ("d.x", Op::Put(Value::Int(*n))),
            Mut::DocPutThroughX => ("d.x.z", Op::Put(Value::Int(1))),
            Mut::DocAddX(n) => ("d.x", Op::Atomic(NumOp::Add, Value::Int(*n))),
            Mut::DocAppendY(s) => ("d.y", Op::StringAppend(Value::str(s))),
            Mut::DocUnsetY => ("d.y", Op::DocumentUnset),
            Mut::DocRenameYW => ("d.y", Op::DocumentRename(Value::str("w"))),
        };
        (name.to_string(), op)
    }

    /// Applies the mutation to `o`; `false` when it cannot be applied.
    fn apply(&self, o: &mut Obj) -> bool {
        match self {
            Mut::PutA(Value::Int(i)) => o.a = *i,
            Mut::PutA(Value::Float(x)) => o.a = x.round() as i64,
            Mut::PutA(v) => panic!("{v:?}"),
            Mut::PutS(s) => o.s = s.as_bytes().to_vec(),
            Mut::PutF(Value::Float(x)) => o.f = *x,
            Mut::PutF(Value::Int(i)) => o.f = *i as f64,
            Mut::PutF(v) => panic!("{v:?}"),
            Mut::PutL(l) => o.l = l.clone(),
            Mut::PutSt(st) => o.st = st.iter().cloned().collect(),
            Mut::PutMp(mp) => o.mp = mp.iter().cloned().collect(),
            Mut::PutDoc(j) => o.d = j.clone(),
            Mut::Num(op, n) => match checked(*op, o.a, *n) {
                Some(r) => o.a = r,
                None => return false,
            },
            Mut::FloatNum(op, x) => o.f = float_op(*op, o.f, *x),
            Mut::Prepend(s) => o.s.splice(0..0, s.bytes()).for_each(drop),
            Mut::Append(s) => o.s.extend_from_slice(s.as_bytes()),
            Mut::Ltrim(n) => {
                let n = (*n as usize).min(o.s.len());
                o.s.drain(..n);
            }
            Mut::Rtrim(n) => {
                let n = (*n as usize).min(o.s.len());
                o.s.truncate(o.s.len() - n);
            }
            Mut::Lpush(i) => o.l.insert(0, *i),
            Mut::Rpush(i) => o.l.push(*i),
            Mut::SetAdd(x) => {
                o.st.insert(x.clone());
            }
            Mut::SetRemove(x) => {
                o.st.remove(x);
            }
            Mut::SetUnion(xs) => o.st.extend(xs.iter().cloned()),
            Mut::SetIntersect(xs) => {
                let other: BTreeSet<String> = xs.iter().cloned().collect();
                o.st = o.st.intersection(&other).cloned().collect();
            }
            Mut::MapAdd(k, v) => {
                o.mp.insert(k.clone(), *v);
            }
            Mut::MapRemove(k) => {
                o.mp.remove(k);
            }
            Mut::MapNum(op, k, v) => {
                let old = o.mp.get(k).copied().unwrap_or(0);
                match checked(*op, old, *v) {
                    Some(r) => {
                        o.mp.insert(k.clone(), r);
                    }
                    None => return false,
                }
            }
            Mut::DocPutX(n) => {
                doc(o).insert("x".into(), json!(n));
            }
            Mut::DocPutThroughX => match doc(o).get("x") {
                None => {
                    doc(o).insert("x".into(), json!({"z": 1}));
                }
                Some(Json::Object(_)) => {
                    doc(o)["x"]["z"] = json!(1);
                }
                Some(_) => return false,
            },
            Mut::DocAddX(n) => {
                let old = match doc(o).get("x") {
                    None => 0,
                    Some(Json::Number(v)) => v.as_i64().expect("x is an int"),
                    Some(_) => return false,
                };
                match checked(NumOp::Add, old, *n) {
                    Some(r) => {
                        doc(o).insert("x".into(), json!(r));
                    }
                    None => return false,
                }
            }
            Mut::DocAppendY(s) => {
                let old = match doc(o).get("y") {
                    None => String::new(),
                    Some(Json::String(y)) => y.clone(),
                    Some(_) => return false,
                };
                doc(o).insert("y".into(), json!(format!("{old}{s}")));
            }
            Mut::DocUnsetY => {
                if doc(o).remove("y").is_none() {
                    return false;
                }
            }
            Mut::DocRenameYW => match doc(o).remove("y") {
                Some(y) => {
                    doc(o).insert("w".into(), y);
                }
                None => return false,
            },
        }
        true
    }
}

fn doc(o: &mut Obj) -> &mut JsonMap<String, Json> {
    o.d.as_object_mut().expect("d is an object")
}

/// A predicate of a conditional operation or a search, with its
/// brute-force meaning.
#[derive(Clone, Debug)]
enum Pred {
    KeyGe(i64),
    KeyLt(i64),
    A(&'static str, i64),
    SEq(String),
    SPrefix(String),
    SLenGe(u64),
    FGe(f64),
    LContains(i64),
    LLenEq(u64),
    StContains(String),
    StLenLe(u64),
    MpContains(String),
    DxGe(i64),
}

impl Pred {
    fn op(&self) -> (&'static str, PredOp) {
        match self {
            Pred::KeyGe(k) => ("k", PredOp::Ge(Value::Int(*k))),
            Pred::KeyLt(k) => ("k", PredOp::Lt(Value::Int(*k))),
            Pred::A(cmp, n) => {
                let v = Value::Int(*n);
                let op = match *cmp {
                    "eq" => PredOp::Eq(v),
                    "lt" => PredOp::Lt(v),
                    "le" => PredOp::Le(v),
                    "gt" => PredOp::Gt(v),
                    _ => PredOp::Ge(v),
                };
                ("a", op)
            }
            Pred::SEq(s) => ("s", PredOp::Eq(Value::str(s))),
            Pred::SPrefix(p) => ("s", PredOp::Regex(format!("^{p}"))),
            Pred::SLenGe(n) => ("s", PredOp::LenGe(*n)),
            Pred::FGe(x) => ("f", PredOp::Ge(Value::Float(*x))),
            Pred::LContains(i) => ("l", PredOp::Contains(Value::Int(*i))),
            Pred::LLenEq(n) => ("l", PredOp::LenEq(*n)),
            Pred::StContains(x) => ("st", PredOp::Contains(Value::str(x))),
            Pred::StLenLe(n) => ("st", PredOp::LenLe(*n)),
            Pred::MpContains(k) => ("mp", PredOp::Contains(Value::str(k))),
            Pred::DxGe(n) => ("d.x", PredOp::Ge(Value::Int(*n))),
        }
    }

    fn holds(&self, k: i64, o: &Obj) -> bool {
        match self {
            Pred::KeyGe(x) => k >= *x,
            Pred::KeyLt(x) => k < *x,
            Pred::A(cmp, n) => match *cmp {
                "eq" => o.a == *n,
                "lt" => o.a < *n,
                "le" => o.a <= *n,
                "gt" => o.a > *n,
                _ => o.a >= *n,
            },
            Pred::SEq(s) => o.s == s.as_bytes(),
            Pred::SPrefix(p) => o.s.starts_with(p.as_bytes()),
            Pred::SLenGe(n) => o.s.len() as u64 >= *n,
            Pred::FGe(x) => o.f >= *x,
            Pred::LContains(i) => o.l.contains(i),
            Pred::LLenEq(n) => o.l.len() as u64 == *n,
            Pred::StContains(x) => o.st.contains(x),
            Pred::StLenLe(n) => o.st.len() as u64 <= *n,
            Pred::MpContains(x) => o.mp.contains_key(x),
            Pred::DxGe(n) => matches!(o.d.get("x").and_then(Json::as_i64), Some(x) if x >= *n),
        }
    }
}

fn all_hold(preds: &[Pred], k: i64, o: &Obj) -> bool {
    preds.iter().all(|p| p.holds(k, o))
}

fn ops_of(preds: &[Pred]) -> Vec<(&'static str, PredOp)> {
    preds.iter().map(Pred::op).collect()
}

/// One operation of a round on one key.
#[derive(Clone, Debug)]
enum Step {
    /// `put` (no flags): creates the object if missing.
    Put(Vec<Mut>),
    PutIfNotExist(Vec<Mut>),
    CondPut(Vec<Pred>, Vec<Mut>),
    CondPutOrCreate(Vec<Pred>, Vec<Mut>),
    Del,
    CondDel(Vec<Pred>),
    /// One mutator family call (the object must exist), maybe `cond_`.
    Mutate(Vec<Pred>, Mut),
    /// A microtransaction: creates the object if missing.
    Tx(Vec<Pred>, Vec<Mut>),
}

impl Step {
    /// What the step does to the model's `key`.
    fn apply(&self, model: &mut Model, key: i64) -> Expect {
        let current = model.get(&key).cloned();
        let (must_exist, must_not_exist, erase, preds, muts): (bool, bool, bool, &[Pred], &[Mut]) =
            match self {
                Step::Put(m) => (false, false, false, &[], m),
                Step::PutIfNotExist(m) => (false, true, false, &[], m),
                Step::CondPut(p, m) => (true, false, false, p, m),
                Step::CondPutOrCreate(p, m) => (false, false, false, p, m),
                Step::Del => (true, false, true, &[], &[]),
                Step::CondDel(p) => (true, false, true, p, &[]),
                Step::Mutate(p, m) => (true, false, false, p, std::slice::from_ref(m)),
                Step::Tx(p, m) => (false, false, false, p, m),
            };
        let Some(obj) = current else {
            if must_exist {
                return Expect::NotFound;
            }
            let mut fresh = Obj::default();
            if !muts.iter().all(|m| m.apply(&mut fresh)) {
                return Expect::CmpFail;
            }
            model.insert(key, fresh);
            return Expect::Done;
        };
        if must_not_exist || !all_hold(preds, key, &obj) {
            return Expect::CmpFail;
        }
        if erase {
            model.remove(&key);
            return Expect::Done;
        }
        let mut next = obj;
        if !muts.iter().all(|m| m.apply(&mut next)) {
            return Expect::CmpFail;
        }
        model.insert(key, next);
        Expect::Done
    }

    /// Runs the step through the client's typed methods.
    async fn run(&self, c: &Client, key: i64) -> Result<Outcome, ClientError> {
        let k = Value::Int(key);
        let ops = |muts: &[Mut]| -> Vec<(String, Value)> {
            muts.iter()
                .map(|m| match m.op() {
                    (name, Op::Put(v)) => (name, v),
                    other => panic!("not a put: {other:?}"),
                })
                .collect()
        };
        match self {
            Step::Put(m) => c.put("m", k, ops(m)).await,
            Step::PutIfNotExist(m) => c.put_if_not_exist("m", k, ops(m)).await,
            Step::CondPut(p, m) => c.cond_put("m", k, ops_of(p), ops(m)).await,
            Step::CondPutOrCreate(p, m) => c.cond_put_or_create("m", k, ops_of(p), ops(m)).await,
            Step::Del => c.del("m", k).await,
            Step::CondDel(p) => c.cond_del("m", k, ops_of(p)).await,
            Step::Mutate(p, m) => mutate(c, k, p, m).await,
            Step::Tx(p, muts) => {
                let mut tx = c.microtransaction("m").await?;
                for m in muts {
                    let (name, op) = m.op();
                    tx.add(&name, op)?;
                }
                if p.is_empty() {
                    tx.commit(k).await
                } else {
                    tx.cond_commit(k, ops_of(p)).await
                }
            }
        }
    }
}

/// A mutator family call by its typed method (`cond_` when there are
/// predicates).
async fn mutate(c: &Client, k: Value, p: &[Pred], m: &Mut) -> Result<Outcome, ClientError> {
    let (name, op) = m.op();
    let name = name.as_str();
    let preds = ops_of(p);
    let cond = !p.is_empty();
    macro_rules! call {
        ($plain:ident, $cond:ident, $arg:expr) => {
            if cond {
                c.$cond("m", k, preds, [(name, $arg)]).await
            } else {
                c.$plain("m", k, [(name, $arg)]).await
            }
        };
    }
    match op {
        // A mutator: the object must exist, as for cond_put.
        Op::Put(v) => c.cond_put("m", k, preds, [(name, v)]).await,
        Op::Atomic(NumOp::Add, v) => call!(atomic_add, cond_atomic_add, v),
        Op::Atomic(NumOp::Sub, v) => call!(atomic_sub, cond_atomic_sub, v),
        Op::Atomic(NumOp::Mul, v) => call!(atomic_mul, cond_atomic_mul, v),
        Op::Atomic(NumOp::Div, v) => call!(atomic_div, cond_atomic_div, v),
        Op::Atomic(NumOp::Mod, v) => call!(atomic_mod, cond_atomic_mod, v),
        Op::Atomic(NumOp::And, v) => call!(atomic_and, cond_atomic_and, v),
        Op::Atomic(NumOp::Or, v) => call!(atomic_or, cond_atomic_or, v),
        Op::Atomic(NumOp::Xor, v) => call!(atomic_xor, cond_atomic_xor, v),
        Op::Atomic(NumOp::Min, v) => call!(atomic_min, cond_atomic_min, v),
        Op::Atomic(NumOp::Max, v) => call!(atomic_max, cond_atomic_max, v),
        Op::StringPrepend(v) => call!(string_prepend, cond_string_prepend, v),
        Op::StringAppend(v) => call!(string_append, cond_string_append, v),
        Op::StringLtrim(v) => call!(string_ltrim, cond_string_ltrim, v),
        Op::StringRtrim(v) => call!(string_rtrim, cond_string_rtrim, v),
        Op::ListLpush(v) => call!(list_lpush, cond_list_lpush, v),
        Op::ListRpush(v) => call!(list_rpush, cond_list_rpush, v),
        Op::SetAdd(v) => call!(set_add, cond_set_add, v),
        Op::SetRemove(v) => call!(set_remove, cond_set_remove, v),
        Op::SetUnion(v) => call!(set_union, cond_set_union, v),
        Op::SetIntersect(v) => call!(set_intersect, cond_set_intersect, v),
        Op::MapRemove(v) => call!(map_remove, cond_map_remove, v),
        Op::DocumentRename(v) => call!(document_rename, cond_document_rename, v),
        Op::DocumentUnset => call!(document_unset, cond_document_unset, Value::Int(0)),
        Op::MapAdd(mk, v) => call!(map_add, cond_map_add, vec![(mk, v)]),
        Op::MapAtomic(NumOp::Add, mk, v) => {
            call!(map_atomic_add, cond_map_atomic_add, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Sub, mk, v) => {
            call!(map_atomic_sub, cond_map_atomic_sub, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Mul, mk, v) => {
            call!(map_atomic_mul, cond_map_atomic_mul, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Div, mk, v) => {
            call!(map_atomic_div, cond_map_atomic_div, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Mod, mk, v) => {
            call!(map_atomic_mod, cond_map_atomic_mod, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::And, mk, v) => {
            call!(map_atomic_and, cond_map_atomic_and, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Or, mk, v) => call!(map_atomic_or, cond_map_atomic_or, vec![(mk, v)]),
        Op::MapAtomic(NumOp::Xor, mk, v) => {
            call!(map_atomic_xor, cond_map_atomic_xor, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Min, mk, v) => {
            call!(map_atomic_min, cond_map_atomic_min, vec![(mk, v)])
        }
        Op::MapAtomic(NumOp::Max, mk, v) => {
            call!(map_atomic_max, cond_map_atomic_max, vec![(mk, v)])
        }
        other => panic!("no family call for {other:?}"),
    }
}

// ------------------------------------------------------------- generators

const LETTERS: [&str; 3] = ["a", "b", "c"];
const ELEMENTS: [&str; 4] = ["p", "q", "r", "t"];
const MAP_KEYS: [&str; 3] = ["u", "v", "w"];

fn word(rng: &mut StdRng, len_max: usize) -> String {
    (0..rng.gen_range(0..=len_max))
        .map(|_| LETTERS[rng.gen_range(0..LETTERS.len())])
        .collect()
}

fn pick(rng: &mut StdRng, from: &[&str]) -> String {
    from[rng.gen_range(0..from.len())].to_string()
}

fn operand(rng: &mut StdRng) -> i64 {
    match rng.gen_range(0..10) {
        0 => i64::MAX,
        1 => i64::MIN,
        2 => 0,
        _ => rng.gen_range(-4..5),
    }
}

fn num_op(rng: &mut StdRng) -> NumOp {
    NumOp::ALL[rng.gen_range(0..NumOp::ALL.len())]
}

fn put_mut(rng: &mut StdRng) -> Mut {
    match rng.gen_range(0..9) {
        0 => Mut::PutA(Value::Int(rng.gen_range(-20..20))),
        // Numbers mix on writes: a float into an int is rounded.
        1 => Mut::PutA(Value::Float(f64::from(rng.gen_range(-20..20)) + 0.25)),
        2 => Mut::PutS(word(rng, 4)),
        3 => Mut::PutF(if rng.gen_bool(0.5) {
            Value::Float(f64::from(rng.gen_range(-8..8)) / 2.0)
        } else {
            Value::Int(rng.gen_range(-4..4))
        }),
        4 => Mut::PutL(
            (0..rng.gen_range(0..3))
                .map(|_| rng.gen_range(0..4))
                .collect(),
        ),
        5 => Mut::PutSt(
            (0..rng.gen_range(0..3))
                .map(|_| pick(rng, &ELEMENTS))
                .collect(),
        ),
        6 => Mut::PutMp(
            (0..rng.gen_range(0..3))
                .map(|_| (pick(rng, &MAP_KEYS), rng.gen_range(-3..3)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
        7 => Mut::PutDoc(json!({"x": rng.gen_range(-5..5), "y": word(rng, 2)})),
        _ => match rng.gen_range(0..3) {
            0 => Mut::DocPutX(rng.gen_range(-5..5)),
            // Through x: fails while x is a number.
            1 => Mut::DocPutThroughX,
            _ => Mut::PutS(word(rng, 2)),
        },
    }
}

/// A whole-attribute put per chosen attribute, each attribute at most once.
fn put_muts(rng: &mut StdRng) -> Vec<Mut> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for _ in 0..rng.gen_range(1..4) {
        let m = put_mut(rng);
        let (name, _) = m.op();
        let attr = name.split(['.', '[']).next().unwrap_or("").to_string();
        // One value per attribute (DUPEATTR otherwise), and a path put
        // never beside a whole-document put.
        if seen.insert(attr) {
            out.push(m);
        }
    }
    out
}

fn family_mut(rng: &mut StdRng) -> Mut {
    match rng.gen_range(0..20) {
        0..=3 => Mut::Num(num_op(rng), operand(rng)),
        4 => {
            let ops = [
                NumOp::Add,
                NumOp::Sub,
                NumOp::Mul,
                NumOp::Div,
                NumOp::Min,
                NumOp::Max,
            ];
            // Never zero, so no NaN or infinity (IEEE arithmetic is
            // checked by the table tests).
            let x = [0.5, 1.5, -2.0, 3.0][rng.gen_range(0..4)];
            Mut::FloatNum(ops[rng.gen_range(0..ops.len())], x)
        }
        5 => Mut::Prepend(word(rng, 2)),
        6 => Mut::Append(word(rng, 2)),
        7 => Mut::Ltrim(rng.gen_range(0..4)),
        8 => Mut::Rtrim(rng.gen_range(0..4)),
        9 => Mut::Lpush(rng.gen_range(0..4)),
        10 => Mut::Rpush(rng.gen_range(0..4)),
        11 => Mut::SetAdd(pick(rng, &ELEMENTS)),
        12 => Mut::SetRemove(pick(rng, &ELEMENTS)),
        13 => {
            let xs = (0..rng.gen_range(0..3))
                .map(|_| pick(rng, &ELEMENTS))
                .collect();
            if rng.gen_bool(0.5) {
                Mut::SetUnion(xs)
            } else {
                Mut::SetIntersect(xs)
            }
        }
        14 => Mut::MapAdd(pick(rng, &MAP_KEYS), rng.gen_range(-3..3)),
        15 => Mut::MapRemove(pick(rng, &MAP_KEYS)),
        16 => Mut::MapNum(num_op(rng), pick(rng, &MAP_KEYS), operand(rng)),
        17 => match rng.gen_range(0..2) {
            0 => Mut::DocAddX(operand(rng)),
            _ => Mut::DocPutX(rng.gen_range(-5..5)),
        },
        18 => Mut::DocAppendY(word(rng, 2)),
        _ => {
            if rng.gen_bool(0.5) {
                Mut::DocUnsetY
            } else {
                Mut::DocRenameYW
            }
        }
    }
}

fn random_pred(rng: &mut StdRng) -> Pred {
    match rng.gen_range(0..13) {
        0 => Pred::KeyGe(rng.gen_range(0..KEYS)),
        1 => Pred::KeyLt(rng.gen_range(0..KEYS)),
        2..=4 => {
            let cmp = ["eq", "lt", "le", "gt", "ge"][rng.gen_range(0..5)];
            Pred::A(cmp, rng.gen_range(-10..10))
        }
        5 => Pred::SEq(word(rng, 2)),
        6 => Pred::SPrefix(word(rng, 2)),
        7 => Pred::SLenGe(rng.gen_range(0..4)),
        8 => Pred::FGe(f64::from(rng.gen_range(-4..4))),
        9 => {
            if rng.gen_bool(0.5) {
                Pred::LContains(rng.gen_range(0..4))
            } else {
                Pred::LLenEq(rng.gen_range(0..3))
            }
        }
        10 => {
            if rng.gen_bool(0.5) {
                Pred::StContains(pick(rng, &ELEMENTS))
            } else {
                Pred::StLenLe(rng.gen_range(0..3))
            }
        }
        11 => Pred::MpContains(pick(rng, &MAP_KEYS)),
        _ => Pred::DxGe(rng.gen_range(-5..5)),
    }
}

fn random_preds(rng: &mut StdRng, max: usize) -> Vec<Pred> {
    (0..rng.gen_range(0..=max))
        .map(|_| random_pred(rng))
        .collect()
}

fn random_step(rng: &mut StdRng) -> Step {
    match rng.gen_range(0..20) {
        0..=2 => Step::Put(put_muts(rng)),
        3 => Step::PutIfNotExist(put_muts(rng)),
        4 => Step::CondPut(random_preds(rng, 1), put_muts(rng)),
        5 => Step::CondPutOrCreate(random_preds(rng, 1), put_muts(rng)),
        6 => Step::Del,
        7 => Step::CondDel(vec![random_pred(rng)]),
        8 => {
            let muts = (0..rng.gen_range(1..4)).map(|_| family_mut(rng)).collect();
            Step::Tx(random_preds(rng, 1), muts)
        }
        _ => {
            let preds = if rng.gen_bool(0.3) {
                vec![random_pred(rng)]
            } else {
                Vec::new()
            };
            Step::Mutate(preds, family_mut(rng))
        }
    }
}

// ------------------------------------------------------------ comparison

fn obj_of(record: &Record) -> Obj {
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    };
    let string = |v: &Value| match v {
        Value::String(b) => String::from_utf8(b.clone()).expect("utf-8"),
        other => panic!("not a string: {other:?}"),
    };
    let get = |name: &str| record.get(name).unwrap_or_else(|| panic!("no {name}"));
    Obj {
        a: int(get("a")),
        s: match get("s") {
            Value::String(b) => b.clone(),
            other => panic!("s is {other:?}"),
        },
        f: match get("f") {
            Value::Float(x) => *x,
            other => panic!("f is {other:?}"),
        },
        l: match get("l") {
            Value::List(items) => items.iter().map(int).collect(),
            other => panic!("l is {other:?}"),
        },
        st: match get("st") {
            Value::Set(items) => {
                let v: Vec<String> = items.iter().map(string).collect();
                let mut sorted = v.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(v, sorted, "a set comes sorted and unique");
                v.into_iter().collect()
            }
            other => panic!("st is {other:?}"),
        },
        mp: match get("mp") {
            Value::Map(entries) => entries.iter().map(|(k, v)| (string(k), int(v))).collect(),
            other => panic!("mp is {other:?}"),
        },
        d: match get("d") {
            Value::Document(text) => serde_json::from_str(text).expect("document JSON"),
            other => panic!("d is {other:?}"),
        },
    }
}

fn key_of(record: &Record) -> i64 {
    match record.get("k") {
        Some(Value::Int(k)) => *k,
        other => panic!("search result key {other:?}"),
    }
}

/// A search, count and sorted search with no write running: exactly the
/// model.
async fn check_quiet(c: &Client, model: &Model, preds: &[Pred], rng: &mut StdRng) {
    let found = c.search("m", ops_of(preds)).await.expect("search");
    let got: Vec<(i64, Obj)> = found.iter().map(|r| (key_of(r), obj_of(r))).collect();
    let want: Vec<(i64, Obj)> = model
        .iter()
        .filter(|(k, o)| all_hold(preds, **k, o))
        .map(|(k, o)| (*k, o.clone()))
        .collect();
    assert_eq!(got, want, "search {preds:?}");
    let n = c.count("m", ops_of(preds)).await.expect("count");
    assert_eq!(n, want.len() as u64, "count {preds:?}");
    let limit = rng.gen_range(1..12);
    let descending = rng.gen_bool(0.5);
    let sorted: Vec<(i64, i64)> = c
        .sorted_search("m", ops_of(preds), "a", limit, descending)
        .await
        .expect("sorted_search")
        .iter()
        .map(|r| (key_of(r), obj_of(r).a))
        .collect();
    let mut by_a: Vec<(i64, i64)> = want.iter().map(|(k, o)| (*k, o.a)).collect();
    by_a.sort_by(|x, y| {
        let order = x.1.cmp(&y.1);
        let order = if descending { order.reverse() } else { order };
        order.then(x.0.cmp(&y.0))
    });
    by_a.truncate(limit as usize);
    assert_eq!(sorted, by_a, "sorted_search {preds:?} by a, limit {limit}");
}

/// A group operation alone: exactly the objects the model says change.
async fn group_round(c: &Client, model: &mut Model, rng: &mut StdRng) {
    let preds = vec![random_pred(rng), random_pred(rng)];
    let matching: Vec<i64> = model
        .iter()
        .filter(|(k, o)| all_hold(&preds, **k, o))
        .map(|(k, _)| *k)
        .collect();
    let (count, step) = match rng.gen_range(0..4) {
        0 => (
            c.group_del("m", ops_of(&preds)).await,
            Step::CondDel(preds.clone()),
        ),
        1 => {
            let n = operand(rng);
            (
                c.group_atomic_add("m", ops_of(&preds), [("a", Value::Int(n))])
                    .await,
                Step::Mutate(preds.clone(), Mut::Num(NumOp::Add, n)),
            )
        }
        2 => {
            let w = word(rng, 2);
            (
                c.group_string_append("m", ops_of(&preds), [("s", Value::str(&w))])
                    .await,
                Step::Mutate(preds.clone(), Mut::Append(w)),
            )
        }
        _ => {
            let x = pick(rng, &ELEMENTS);
            (
                c.group_set_add("m", ops_of(&preds), [("st", Value::str(&x))])
                    .await,
                Step::Mutate(preds.clone(), Mut::SetAdd(x)),
            )
        }
    };
    let count = count.unwrap_or_else(|e| panic!("group {step:?}: {e}"));
    let mut changed = 0;
    for k in matching {
        if step.apply(model, k) == Expect::Done {
            changed += 1;
        }
    }
    assert_eq!(count, changed, "group {step:?}");
}

#[test]
fn random_operations_match_a_model() {
    let seed: u64 = std::env::var("TESSERA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (set TESSERA_TEST_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let cluster = Cluster::start(4);
    cluster.admin().add_space(SPACE).expect("add_space");
    let runtime = Runtime::new().expect("runtime");
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("connect");
    let mut model = Model::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();

    for round in 0..ROUNDS {
        // A batch of distinct keys, one step each, all at once, with a
        // search beside them.
        let mut keys = BTreeSet::new();
        while keys.len() < BATCH {
            keys.insert(rng.gen_range(0..KEYS));
        }
        let steps: Vec<(i64, Step)> = keys.iter().map(|&k| (k, random_step(&mut rng))).collect();
        let before = model.clone();
        let preds = random_preds(&mut rng, 2);
        let outcomes = runtime.block_on(async {
            let search = {
                let c = client.clone();
                let ops = ops_of(&preds);
                tokio::spawn(async move { c.search("m", ops).await })
            };
            let mut tasks = Vec::new();
            for (k, step) in steps.clone() {
                let c = client.clone();
                tasks.push(tokio::spawn(async move { step.run(&c, k).await }));
            }
            let mut outcomes = Vec::new();
            for t in tasks {
                outcomes.push(t.await.expect("task"));
            }
            (outcomes, search.await.expect("search task"))
        });
        let (outcomes, concurrent) = outcomes;
        for ((k, step), outcome) in steps.iter().zip(outcomes) {
            let outcome = outcome.unwrap_or_else(|e| panic!("round {round}: {step:?} on {k}: {e}"));
            let want = step.apply(&mut model, *k);
            *tally.entry(format!("{want:?}")).or_insert(0) += 1;
            assert_eq!(
                Expect::of(&outcome),
                want,
                "round {round}: {step:?} on key {k} answered {outcome:?}"
            );
        }

        // The concurrent search: keys outside the batch exactly as the
        // model; keys of the batch, if present, in the state before or
        // after, matching the predicates in that state.
        let concurrent = concurrent.expect("concurrent search");
        *tally.entry("search results".into()).or_insert(0) += concurrent.len();
        let mut seen = BTreeSet::new();
        for r in &concurrent {
            let k = key_of(r);
            assert!(seen.insert(k), "key {k} twice in a search");
            let got = obj_of(r);
            let states = [before.get(&k), model.get(&k)];
            assert!(
                states
                    .iter()
                    .flatten()
                    .any(|o| **o == got && all_hold(&preds, k, o)),
                "round {round}: search {preds:?} returned key {k} as {got:?}, \
                 neither before ({:?}) nor after ({:?})",
                states[0],
                states[1]
            );
        }
        for (k, o) in &model {
            if !keys.contains(k) && all_hold(&preds, *k, o) {
                assert!(
                    seen.contains(k),
                    "round {round}: search {preds:?} missed untouched key {k}"
                );
            }
        }

        if round % 4 == 3 {
            let preds = random_preds(&mut rng, 2);
            runtime.block_on(check_quiet(&client, &model, &preds, &mut rng));
        }
        if round % 10 == 9 {
            runtime.block_on(group_round(&client, &mut model, &mut rng));
        }
    }

    eprintln!("outcomes {tally:?}; {} objects at the end", model.len());
    // Conditional writes are atomic with their check: racing
    // compare-and-set increments of one key never both succeed from the
    // same value, and plain atomics never lose an update.
    runtime.block_on(async {
        let key = Value::Int(KEYS);
        let start = [("a", Value::Int(0)), ("s", Value::str("race"))];
        assert!(client.put("m", key.clone(), start).await.unwrap().is_done());
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (c, key) = (client.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for _ in 0..15 {
                    let record = c.get("m", key.clone()).await.unwrap().expect("object");
                    let Some(Value::Int(seen)) = record.get("a").cloned() else {
                        panic!("a is not an int");
                    };
                    let outcome = c
                        .cond_put(
                            "m",
                            key.clone(),
                            [("a", PredOp::Eq(Value::Int(seen)))],
                            [("a", Value::Int(seen + 1))],
                        )
                        .await
                        .unwrap();
                    if outcome.is_done() {
                        won.push(seen);
                    }
                    let bump = c
                        .atomic_add("m", key.clone(), [("f", Value::Float(1.0))])
                        .await
                        .unwrap();
                    assert!(bump.is_done());
                }
                won
            }));
        }
        let mut won = Vec::new();
        for t in tasks {
            won.extend(t.await.expect("task"));
        }
        won.sort_unstable();
        let distinct: BTreeSet<i64> = won.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            won.len(),
            "two cond_puts won from one value"
        );
        let n = won.len() as i64;
        assert_eq!(won, (0..n).collect::<Vec<i64>>(), "each value won once");
        let record = client.get("m", key.clone()).await.unwrap().expect("object");
        assert_eq!(record.get("a"), Some(&Value::Int(won.len() as i64)));
        assert_eq!(record.get("f"), Some(&Value::Float(8.0 * 15.0)));
        assert_eq!(client.del("m", key).await.unwrap(), Outcome::Done);
    });

    // Every object, read back.
    runtime.block_on(async {
        for k in 0..KEYS {
            let got = client.get("m", Value::Int(k)).await.expect("get");
            match (got, model.get(&k)) {
                (None, None) => {}
                (Some(record), Some(obj)) => {
                    let mut with_key = record.attrs.clone();
                    with_key.insert(0, ("k".to_string(), Value::Int(k)));
                    let record = Record {
                        version: record.version,
                        attrs: with_key,
                    };
                    assert_eq!(&obj_of(&record), obj, "get {k}");
                }
                (got, want) => panic!("get {k}: got {got:?}, want {want:?}"),
            }
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 1);
        check_quiet(&client, &model, &[], &mut rng).await;
        for _ in 0..10 {
            let preds = random_preds(&mut rng, 2);
            check_quiet(&client, &model, &preds, &mut rng).await;
        }
    });
}
