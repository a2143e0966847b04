//! Every type × operation of API.md §3.6 and §9 through the pure
//! evaluation (`chain::evaluate`), with expected results worked out from
//! first principles: checked 64-bit arithmetic at the edges, IEEE floats,
//! clamped trims, set and map edge cases, document paths through
//! non-objects. A refused update changes nothing and says why.

use tessera_daemon::chain::evaluate;
use tessera_daemon::ops::{float_op, int_op, UpdateRefused};
use tessera_protocol::{
    Action, ClientRef, CmpFailKind, Mutation, NumOp, Status, UpdateFlags, UpdateRequest,
};
use tessera_types::{
    Attribute, Check, DataType, Object, PredOp, Prim, Space, SpaceDesc, SpaceId, Value,
};

/// `space t key k attributes string s, int i, float f, list(int) l,
/// set(string) st, map(string, int) mi, map(int, string) ms,
/// map(string, float) mf, document d, timestamp(second) ts, list(float) lf`
fn space() -> Space {
    let attr = |name: &str, dtype| Attribute {
        name: name.into(),
        dtype,
    };
    let desc = SpaceDesc {
        name: "t".into(),
        attrs: vec![
            attr("k", DataType::String),
            attr("s", DataType::String),
            attr("i", DataType::Int),
            attr("f", DataType::Float),
            attr("l", DataType::List(Prim::Int)),
            attr("st", DataType::Set(Prim::String)),
            attr("mi", DataType::Map(Prim::String, Prim::Int)),
            attr("ms", DataType::Map(Prim::Int, Prim::String)),
            attr("mf", DataType::Map(Prim::String, Prim::Float)),
            attr("d", DataType::Document),
            attr("ts", DataType::Timestamp(tessera_types::TimeUnit::Second)),
            attr("lf", DataType::List(Prim::Float)),
        ],
        subspaces: vec![],
        indexes: vec![],
        fault_tolerance: 0,
        partitions: 1,
        authorization: false,
        global_indexes: Vec::new(),
        replex: None,
    };
    Space {
        id: SpaceId(1),
        desc,
        subspaces: vec![],
        indexes: vec![],
    }
}

const S: usize = 1;
const I: usize = 2;
const F: usize = 3;
const L: usize = 4;
const ST: usize = 5;
const MI: usize = 6;
const MS: usize = 7;
const MF: usize = 8;
const D: usize = 9;
const TS: usize = 10;
const LF: usize = 11;

fn defaults(space: &Space) -> Object {
    Object {
        values: std::iter::once(Value::str("key"))
            .chain(
                space.desc.attrs[1..]
                    .iter()
                    .map(|a| a.dtype.default_value()),
            )
            .collect(),
    }
}

fn with(space: &Space, attr: usize, value: Value) -> Object {
    let mut o = defaults(space);
    o.values[attr] = value;
    o
}

fn request(mutations: Vec<Mutation>) -> UpdateRequest {
    UpdateRequest {
        since: Default::default(),
        space: SpaceId(1),
        key: Value::str("key"),
        client: ClientRef {
            client_id: 1,
            request_no: 1,
        },
        flags: UpdateFlags {
            must_exist: true,
            ..UpdateFlags::default()
        },
        checks: vec![],
        mutations,
        auth: Default::default(),
        secret: None,
    }
}

fn m(attr: usize, action: Action) -> Mutation {
    Mutation::new(attr, action)
}

fn at(attr: usize, path: &str, action: Action) -> Mutation {
    Mutation {
        attr,
        action,
        path: Some(path.into()),
    }
}

/// Applies `mutations` to an object whose `attr` holds `start`; returns the
/// new value of `attr`, or the refusal.
fn run(attr: usize, start: Value, mutations: Vec<Mutation>) -> Result<Value, UpdateRefused> {
    let space = space();
    let object = with(&space, attr, start);
    evaluate(&space, Some(&object), &request(mutations)).map(|o| o.unwrap().values[attr].clone())
}

fn one(attr: usize, start: Value, action: Action) -> Result<Value, UpdateRefused> {
    run(attr, start, vec![m(attr, action)])
}

fn kind(r: Result<Value, UpdateRefused>) -> CmpFailKind {
    cmpfail_kind(r.expect_err("the mutation should fail"))
}

/// The kind of a CMPFAIL; any other refusal fails the test.
fn cmpfail_kind(refused: UpdateRefused) -> CmpFailKind {
    match refused {
        UpdateRefused::CmpFail { kind, .. } => kind,
        other => panic!("not a CMPFAIL: {other:?}"),
    }
}

fn wrong_type(r: Result<Value, UpdateRefused>) {
    let refusal = r.expect_err("the mutation should be refused");
    assert_eq!(refusal.status(), Status::WrongType, "{refusal:?}");
}

fn s(x: &str) -> Value {
    Value::str(x)
}

fn doc(x: &str) -> Value {
    Value::Document(x.into())
}

/// The document's canonical JSON (serde_json sorts object keys).
fn canon(v: &Value) -> String {
    match v {
        Value::Document(t) => serde_json_canon(t),
        other => panic!("not a document: {other:?}"),
    }
}

fn serde_json_canon(text: &str) -> String {
    tessera_types::value::json::from_str::<tessera_types::value::json::Value>(text)
        .unwrap()
        .to_string()
}

#[test]
fn int_arithmetic_table() {
    use NumOp::*;
    let ok =
        |op, a: i64, b: i64, r: i64| assert_eq!(int_op(op, a, b).unwrap(), r, "{a} {op:?} {b}");
    let fails = |op, a: i64, b: i64, k: CmpFailKind| {
        let e = int_op(op, a, b).unwrap_err();
        assert_eq!(e.status(), Status::CmpFail);
        assert_eq!(cmpfail_kind(e), k, "{a} {op:?} {b}");
    };
    ok(Add, 2, 3, 5);
    ok(Add, i64::MAX - 1, 1, i64::MAX);
    fails(Add, i64::MAX, 1, CmpFailKind::Overflow);
    fails(Add, i64::MIN, -1, CmpFailKind::Overflow);
    ok(Sub, i64::MIN + 1, 1, i64::MIN);
    fails(Sub, i64::MIN, 1, CmpFailKind::Overflow);
    fails(Sub, 0, i64::MIN, CmpFailKind::Overflow);
    ok(Mul, -4, 5, -20);
    fails(Mul, i64::MAX / 2 + 1, 2, CmpFailKind::Overflow);
    fails(Mul, i64::MIN, -1, CmpFailKind::Overflow);
    ok(Mul, i64::MIN, 1, i64::MIN);
    ok(Div, 7, 2, 3);
    ok(Div, -7, 2, -3);
    ok(Div, 7, -2, -3);
    fails(Div, 7, 0, CmpFailKind::DivideByZero);
    fails(Div, i64::MIN, -1, CmpFailKind::Overflow);
    ok(Div, i64::MIN, 1, i64::MIN);
    ok(Mod, 7, 3, 1);
    ok(Mod, -7, 3, -1);
    ok(Mod, 7, -3, 1);
    ok(Mod, i64::MIN, -1, 0);
    fails(Mod, 7, 0, CmpFailKind::DivideByZero);
    ok(And, 0b1100, 0b1010, 0b1000);
    ok(Or, 0b1100, 0b1010, 0b1110);
    ok(Xor, 0b1100, 0b1010, 0b0110);
    ok(And, -1, i64::MIN, i64::MIN);
    ok(Min, 3, -3, -3);
    ok(Max, 3, -3, 3);
    ok(Min, i64::MIN, i64::MAX, i64::MIN);
}

#[test]
fn float_arithmetic_table() {
    use NumOp::*;
    assert_eq!(float_op(Add, 0.5, 0.25).unwrap(), 0.75);
    assert_eq!(float_op(Sub, 0.5, 0.25).unwrap(), 0.25);
    assert_eq!(float_op(Mul, 1.5, -2.0).unwrap(), -3.0);
    assert_eq!(float_op(Div, 1.0, 0.0).unwrap(), f64::INFINITY);
    assert_eq!(float_op(Div, -1.0, 0.0).unwrap(), f64::NEG_INFINITY);
    assert!(float_op(Div, 0.0, 0.0).unwrap().is_nan());
    assert_eq!(float_op(Add, f64::MAX, f64::MAX).unwrap(), f64::INFINITY);
    assert_eq!(float_op(Min, 1.0, -1.0).unwrap(), -1.0);
    assert_eq!(float_op(Max, 1.0, -1.0).unwrap(), 1.0);
    for op in [Mod, And, Or, Xor] {
        assert_eq!(
            float_op(op, 1.0, 1.0).unwrap_err().status(),
            Status::WrongType
        );
    }
}

#[test]
fn numeric_atomics_on_attributes() {
    use NumOp::*;
    assert_eq!(
        one(I, Value::Int(5), Action::Num(Add, Value::Int(3))),
        Ok(Value::Int(8))
    );
    // An int attribute takes a float operand, rounded (API.md §2.2).
    assert_eq!(
        one(I, Value::Int(5), Action::Num(Add, Value::Float(2.6))),
        Ok(Value::Int(8))
    );
    assert_eq!(
        one(F, Value::Float(1.5), Action::Num(Mul, Value::Int(2))),
        Ok(Value::Float(3.0))
    );
    assert_eq!(
        kind(one(
            I,
            Value::Int(i64::MAX),
            Action::Num(Add, Value::Int(1))
        )),
        CmpFailKind::Overflow
    );
    assert_eq!(
        kind(one(I, Value::Int(1), Action::Num(Div, Value::Int(0)))),
        CmpFailKind::DivideByZero
    );
    assert_eq!(
        kind(one(I, Value::Int(1), Action::Num(Mod, Value::Int(0)))),
        CmpFailKind::DivideByZero
    );
    assert_eq!(
        one(I, Value::Int(-9), Action::Num(Mod, Value::Int(4))),
        Ok(Value::Int(-1))
    );
    assert_eq!(
        one(F, Value::Float(1.0), Action::Num(Div, Value::Float(0.0))),
        Ok(Value::Float(f64::INFINITY))
    );
    wrong_type(one(
        F,
        Value::Float(1.0),
        Action::Num(Mod, Value::Float(2.0)),
    ));
    wrong_type(one(F, Value::Float(1.0), Action::Num(Xor, Value::Int(2))));
    wrong_type(one(S, s("x"), Action::Num(Add, Value::Int(1))));
    wrong_type(one(I, Value::Int(1), Action::Num(Add, s("1"))));
    wrong_type(one(
        TS,
        Value::Timestamp(1),
        Action::Num(Add, Value::Int(1)),
    ));
    wrong_type(one(L, Value::List(vec![]), Action::Num(Add, Value::Int(1))));
    // Starting from the default.
    let space = space();
    let r = evaluate(
        &space,
        None,
        &UpdateRequest {
            since: Default::default(),
            flags: UpdateFlags::default(),
            ..request(vec![m(I, Action::Num(Sub, Value::Int(4)))])
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(r.values[I], Value::Int(-4));
}

#[test]
fn string_ops() {
    let p = |a: Action| one(S, s("hello"), a);
    assert_eq!(p(Action::StringPrepend(b">".to_vec())), Ok(s(">hello")));
    assert_eq!(
        p(Action::StringAppend(b"\0!".to_vec())),
        Ok(Value::String(b"hello\0!".to_vec()))
    );
    assert_eq!(p(Action::StringLtrim(2)), Ok(s("llo")));
    assert_eq!(p(Action::StringRtrim(2)), Ok(s("hel")));
    assert_eq!(p(Action::StringLtrim(5)), Ok(s("")));
    assert_eq!(p(Action::StringLtrim(99)), Ok(s("")));
    assert_eq!(p(Action::StringRtrim(u64::MAX)), Ok(s("")));
    assert_eq!(p(Action::StringLtrim(0)), Ok(s("hello")));
    wrong_type(one(I, Value::Int(1), Action::StringAppend(b"x".to_vec())));
    wrong_type(one(L, Value::List(vec![]), Action::StringLtrim(1)));
}

#[test]
fn list_ops() {
    let l = Value::List(vec![Value::Int(1), Value::Int(2)]);
    assert_eq!(
        one(L, l.clone(), Action::ListLpush(Value::Int(0))),
        Ok(Value::List(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Int(2)
        ]))
    );
    assert_eq!(
        one(L, l.clone(), Action::ListRpush(Value::Int(1))),
        Ok(Value::List(vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(1)
        ]))
    );
    // Ints and floats mix on writes.
    assert_eq!(
        one(LF, Value::List(vec![]), Action::ListRpush(Value::Int(3))),
        Ok(Value::List(vec![Value::Float(3.0)]))
    );
    wrong_type(one(L, l.clone(), Action::ListRpush(s("x"))));
    wrong_type(one(ST, Value::Set(vec![]), Action::ListRpush(s("x"))));
}

#[test]
fn set_ops() {
    let set = |xs: &[&str]| Value::Set(xs.iter().map(|x| s(x)).collect());
    let ab = set(&["a", "b"]);
    assert_eq!(
        one(ST, ab.clone(), Action::SetAdd(s("0"))),
        Ok(set(&["0", "a", "b"]))
    );
    assert_eq!(one(ST, ab.clone(), Action::SetAdd(s("a"))), Ok(ab.clone()));
    assert_eq!(
        one(ST, ab.clone(), Action::SetRemove(s("a"))),
        Ok(set(&["b"]))
    );
    assert_eq!(
        one(ST, ab.clone(), Action::SetRemove(s("z"))),
        Ok(ab.clone())
    );
    assert_eq!(
        one(
            ST,
            ab.clone(),
            Action::SetUnion(vec![s("c"), s("a"), s("c")])
        ),
        Ok(set(&["a", "b", "c"]))
    );
    assert_eq!(
        one(ST, ab.clone(), Action::SetUnion(vec![])),
        Ok(ab.clone())
    );
    assert_eq!(
        one(ST, ab.clone(), Action::SetIntersect(vec![s("b"), s("z")])),
        Ok(set(&["b"]))
    );
    assert_eq!(
        one(ST, ab.clone(), Action::SetIntersect(vec![])),
        Ok(set(&[]))
    );
    assert_eq!(one(ST, set(&[]), Action::SetRemove(s("a"))), Ok(set(&[])));
    wrong_type(one(ST, ab.clone(), Action::SetAdd(Value::Int(1))));
    wrong_type(one(L, Value::List(vec![]), Action::SetAdd(Value::Int(1))));
}

#[test]
fn map_ops() {
    use NumOp::*;
    let mi =
        |xs: &[(&str, i64)]| Value::Map(xs.iter().map(|(k, v)| (s(k), Value::Int(*v))).collect());
    let start = mi(&[("a", 1), ("c", 3)]);
    assert_eq!(
        one(MI, start.clone(), Action::MapAdd(s("b"), Value::Int(2))),
        Ok(mi(&[("a", 1), ("b", 2), ("c", 3)]))
    );
    assert_eq!(
        one(MI, start.clone(), Action::MapAdd(s("a"), Value::Int(9))),
        Ok(mi(&[("a", 9), ("c", 3)]))
    );
    assert_eq!(
        one(MI, start.clone(), Action::MapRemove(s("a"))),
        Ok(mi(&[("c", 3)]))
    );
    assert_eq!(
        one(MI, start.clone(), Action::MapRemove(s("zz"))),
        Ok(start.clone())
    );
    assert_eq!(
        one(
            MI,
            start.clone(),
            Action::MapNum(s("a"), Add, Value::Int(5))
        ),
        Ok(mi(&[("a", 6), ("c", 3)]))
    );
    // A missing map key starts from 0.
    assert_eq!(
        one(
            MI,
            start.clone(),
            Action::MapNum(s("b"), Sub, Value::Int(5))
        ),
        Ok(mi(&[("a", 1), ("b", -5), ("c", 3)]))
    );
    assert_eq!(
        one(
            MI,
            start.clone(),
            Action::MapNum(s("b"), Max, Value::Int(-5))
        ),
        Ok(mi(&[("a", 1), ("b", 0), ("c", 3)]))
    );
    assert_eq!(
        kind(one(
            MI,
            mi(&[("a", i64::MIN)]),
            Action::MapNum(s("a"), Sub, Value::Int(1))
        )),
        CmpFailKind::Overflow
    );
    assert_eq!(
        kind(one(
            MI,
            start.clone(),
            Action::MapNum(s("a"), Mod, Value::Int(0))
        )),
        CmpFailKind::DivideByZero
    );
    assert_eq!(
        one(
            MF,
            Value::Map(vec![]),
            Action::MapNum(s("x"), Add, Value::Float(0.5))
        ),
        Ok(Value::Map(vec![(s("x"), Value::Float(0.5))]))
    );
    wrong_type(one(
        MF,
        Value::Map(vec![]),
        Action::MapNum(s("x"), And, Value::Int(1)),
    ));
    wrong_type(one(
        MS,
        Value::Map(vec![]),
        Action::MapNum(Value::Int(1), Add, Value::Int(1)),
    ));
    wrong_type(one(
        MI,
        start.clone(),
        Action::MapAdd(Value::Int(1), Value::Int(2)),
    ));
    wrong_type(one(MI, start.clone(), Action::MapAdd(s("a"), s("x"))));
    let ms = Value::Map(vec![(Value::Int(1), s("one"))]);
    assert_eq!(
        one(
            MS,
            ms.clone(),
            Action::MapStringAppend(Value::Int(1), b"!".to_vec())
        ),
        Ok(Value::Map(vec![(Value::Int(1), s("one!"))]))
    );
    assert_eq!(
        one(
            MS,
            ms.clone(),
            Action::MapStringPrepend(Value::Int(0), b"z".to_vec())
        ),
        Ok(Value::Map(vec![
            (Value::Int(0), s("z")),
            (Value::Int(1), s("one"))
        ]))
    );
    wrong_type(one(
        MI,
        start,
        Action::MapStringAppend(s("a"), b"!".to_vec()),
    ));
}

#[test]
fn document_paths() {
    use NumOp::*;
    let d0 = doc(r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#);
    let ok = |ms: Vec<Mutation>, expected: &str| {
        let got = run(D, d0.clone(), ms).unwrap();
        assert_eq!(canon(&got), serde_json_canon(expected));
    };
    ok(
        vec![at(D, "a.b", Action::Set(Value::Int(7)))],
        r#"{"a": {"b": 7, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    // Intermediate objects are created.
    ok(
        vec![at(D, "x.y.z", Action::Set(s("v")))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3, "x": {"y": {"z": "v"}}}"#,
    );
    ok(
        vec![at(D, "a.arr[1].q", Action::Set(doc("[true]")))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": [true]}], "f": 1.5}, "n": 3}"#,
    );
    ok(
        vec![at(D, "a.arr[0]", Action::Set(Value::Float(0.5)))],
        r#"{"a": {"b": 1, "s": "x", "arr": [0.5, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    // Numeric atomics: int stays int; a float operand turns it into a float; a missing path starts from 0.
    ok(
        vec![at(D, "a.b", Action::Num(Add, Value::Int(2)))],
        r#"{"a": {"b": 3, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    ok(
        vec![at(D, "a.b", Action::Num(Add, Value::Float(0.5)))],
        r#"{"a": {"b": 1.5, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    ok(
        vec![at(D, "new.c", Action::Num(Sub, Value::Int(2)))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3, "new": {"c": -2}}"#,
    );
    ok(
        vec![at(D, "n", Action::Num(Xor, Value::Int(1)))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 2}"#,
    );
    ok(
        vec![at(D, "a.f", Action::Num(Mul, Value::Int(2)))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 3.0}, "n": 3}"#,
    );
    // min and max apply to document fields too (docs/API-NOTES.md: API.md
    // §3.6 lists them for no document field); int with int stays an int,
    // a float on either side gives a float.
    ok(
        vec![
            at(D, "a.b", Action::Num(Max, Value::Int(5))),
            at(D, "n", Action::Num(Min, Value::Int(-1))),
        ],
        r#"{"a": {"b": 5, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": -1}"#,
    );
    ok(
        vec![
            at(D, "a.b", Action::Num(Min, Value::Int(9))),
            at(D, "a.f", Action::Num(Max, Value::Float(-2.0))),
        ],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    ok(
        vec![at(D, "a.f", Action::Num(Min, Value::Int(1)))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.0}, "n": 3}"#,
    );
    // Strings.
    ok(
        vec![
            at(D, "a.s", Action::StringAppend(b"yz".to_vec())),
            at(D, "a.s", Action::StringPrepend(b"<".to_vec())),
        ],
        r#"{"a": {"b": 1, "s": "<xyz", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3}"#,
    );
    ok(
        vec![at(D, "t", Action::StringAppend(b"new".to_vec()))],
        r#"{"a": {"b": 1, "s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3, "t": "new"}"#,
    );
    // Arrays.
    ok(
        vec![
            at(D, "a.arr", Action::ListLpush(s("h"))),
            at(D, "a.arr", Action::ListRpush(doc(r#"{"z":0}"#))),
        ],
        r#"{"a": {"b": 1, "s": "x", "arr": ["h", 1, {"q": 2}, {"z": 0}], "f": 1.5}, "n": 3}"#,
    );
    // Rename and unset.
    ok(
        vec![at(D, "a.b", Action::DocRename("m.b2".into()))],
        r#"{"a": {"s": "x", "arr": [1, {"q": 2}], "f": 1.5}, "n": 3, "m": {"b2": 1}}"#,
    );
    ok(vec![at(D, "a", Action::DocUnset)], r#"{"n": 3}"#);
    ok(
        vec![at(D, "a.arr[0]", Action::DocUnset)],
        r#"{"a": {"b": 1, "s": "x", "arr": [{"q": 2}], "f": 1.5}, "n": 3}"#,
    );

    let fail = |ms: Vec<Mutation>| kind(run(D, d0.clone(), ms));
    // Through a non-object.
    assert_eq!(
        fail(vec![at(D, "n.x", Action::Set(Value::Int(1)))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "a.arr[0].b", Action::Set(Value::Int(1)))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "a.arr[5]", Action::Set(Value::Int(1)))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "a.b[0]", Action::Set(Value::Int(1)))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "zz", Action::DocUnset)]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "zz", Action::DocRename("y".into()))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "zz", Action::ListRpush(Value::Int(1)))]),
        CmpFailKind::BadPath
    );
    assert_eq!(
        fail(vec![at(D, "a.s", Action::Num(Add, Value::Int(1)))]),
        CmpFailKind::FieldType
    );
    assert_eq!(
        fail(vec![at(D, "a.b", Action::StringAppend(b"x".to_vec()))]),
        CmpFailKind::FieldType
    );
    assert_eq!(
        fail(vec![at(D, "a.b", Action::ListRpush(Value::Int(1)))]),
        CmpFailKind::FieldType
    );
    assert_eq!(
        fail(vec![at(D, "a.f", Action::Num(Mod, Value::Int(1)))]),
        CmpFailKind::FieldType
    );
    assert_eq!(
        fail(vec![at(D, "a.b", Action::Num(Div, Value::Int(0)))]),
        CmpFailKind::DivideByZero
    );
    assert_eq!(
        fail(vec![at(D, "a.f", Action::Num(Div, Value::Int(0)))]),
        CmpFailKind::NotFinite
    );
    assert_eq!(
        fail(vec![
            at(D, "a.b", Action::Set(Value::Int(i64::MAX))),
            at(D, "a.b", Action::Num(Add, Value::Int(1)))
        ]),
        CmpFailKind::Overflow
    );
    // Malformed paths and misuse are type errors.
    wrong_type(run(
        D,
        d0.clone(),
        vec![at(D, "a..b", Action::Set(Value::Int(1)))],
    ));
    wrong_type(run(
        D,
        d0.clone(),
        vec![at(D, "a[x]", Action::Set(Value::Int(1)))],
    ));
    wrong_type(run(
        D,
        d0.clone(),
        vec![at(D, "a.b", Action::StringLtrim(1))],
    ));
    wrong_type(run(
        D,
        d0.clone(),
        vec![at(D, "a.b", Action::SetAdd(Value::Int(1)))],
    ));
    wrong_type(run(
        D,
        d0.clone(),
        vec![at(D, "a.s", Action::StringAppend(vec![0xff]))],
    ));
    wrong_type(run(D, d0.clone(), vec![m(D, Action::DocUnset)]));
    wrong_type(run(
        I,
        Value::Int(0),
        vec![at(I, "a", Action::Set(Value::Int(1)))],
    ));
    // A whole document must be JSON.
    wrong_type(run(D, d0.clone(), vec![m(D, Action::Set(doc("{nope")))]));
}

#[test]
fn mutations_apply_together_or_not_at_all() {
    let space = space();
    let start = with(&space, I, Value::Int(i64::MAX - 1));
    let r = evaluate(
        &space,
        Some(&start),
        &request(vec![
            m(S, Action::StringAppend(b"changed".to_vec())),
            m(I, Action::Num(NumOp::Add, Value::Int(1))),
            m(I, Action::Num(NumOp::Add, Value::Int(1))),
        ]),
    );
    let refusal = r.unwrap_err();
    assert_eq!(refusal.status(), Status::CmpFail);
    assert!(refusal.to_string().contains("attribute `i`"), "{refusal}");
    assert_eq!(cmpfail_kind(refusal), CmpFailKind::Overflow);
    // Microtransaction: several mutations on one attribute, in order.
    let ok = evaluate(
        &space,
        Some(&start),
        &request(vec![
            m(I, Action::Num(NumOp::Sub, Value::Int(10))),
            m(I, Action::Num(NumOp::Div, Value::Int(2))),
            m(S, Action::Set(s("x"))),
            m(S, Action::StringAppend(b"y".to_vec())),
        ]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(ok.values[I], Value::Int((i64::MAX - 11) / 2));
    assert_eq!(ok.values[S], s("xy"));
}

#[test]
fn flags_and_predicates() {
    let space = space();
    let object = with(&space, D, doc(r#"{"p": {"name": "Jo", "age": 30}}"#));
    let mut req = request(vec![m(I, Action::Set(Value::Int(1)))]);
    assert_eq!(
        evaluate(&space, None, &req).unwrap_err().status(),
        Status::NotFound
    );
    req.checks = vec![
        Check::at_path(D, "p.name", PredOp::Eq(s("Jo"))),
        Check::at_path(D, "p.age", PredOp::Ge(Value::Int(18))),
    ];
    assert!(evaluate(&space, Some(&object), &req).is_ok());
    req.checks = vec![Check::at_path(D, "p.age", PredOp::Ge(Value::Float(18.0)))];
    let refusal = evaluate(&space, Some(&object), &req).unwrap_err();
    assert_eq!(cmpfail_kind(refusal), CmpFailKind::Predicate);
    req.flags = UpdateFlags {
        must_not_exist: true,
        ..UpdateFlags::default()
    };
    req.checks.clear();
    let refusal = evaluate(&space, Some(&object), &req).unwrap_err();
    assert_eq!(cmpfail_kind(refusal), CmpFailKind::Exists);
    // Predicates are not evaluated on a missing object that may be created.
    req.flags = UpdateFlags::default();
    req.checks = vec![Check::new(I, PredOp::Eq(Value::Int(99)))];
    assert!(evaluate(&space, None, &req).is_ok());
}

#[test]
fn types_defaults_and_empty_containers() {
    let space = space();
    let o = defaults(&space);
    assert_eq!(o.values[S], s(""));
    assert_eq!(o.values[I], Value::Int(0));
    assert_eq!(o.values[F], Value::Float(0.0));
    assert_eq!(o.values[TS], Value::Timestamp(0));
    assert_eq!(o.values[D], doc("{}"));
    // An empty container of any shape is retyped to the attribute's type.
    assert_eq!(
        one(
            ST,
            Value::Set(vec![s("a")]),
            Action::Set(Value::List(vec![]))
        ),
        Ok(Value::Set(vec![]))
    );
    assert_eq!(
        one(MI, Value::Map(vec![]), Action::Set(Value::Map(vec![]))),
        Ok(Value::Map(vec![]))
    );
    // int <-> float on writes.
    assert_eq!(
        one(I, Value::Int(0), Action::Set(Value::Float(3.7))),
        Ok(Value::Int(4))
    );
    assert_eq!(
        one(F, Value::Float(0.0), Action::Set(Value::Int(3))),
        Ok(Value::Float(3.0))
    );
    assert_eq!(
        one(TS, Value::Timestamp(0), Action::Set(Value::Int(9))),
        Ok(Value::Timestamp(9))
    );
    wrong_type(one(TS, Value::Timestamp(0), Action::Set(Value::Float(9.0))));
}

/// Every one of the nine map(K, V) types: a whole map is stored sorted by
/// key with the last duplicate winning; add, remove, atomics and string
/// ops on values follow V's rules; `contains` finds keys; a key or value of
/// another kind is refused.
#[test]
fn every_map_combination() {
    use NumOp::*;
    let prims = [Prim::String, Prim::Int, Prim::Float];
    let sample = |p: Prim, n: i64| match p {
        Prim::String => s(&format!("v{n}")),
        Prim::Int => Value::Int(n),
        Prim::Float => Value::Float(n as f64 + 0.5),
    };
    let other_kind = |p: Prim| match p {
        Prim::String => Value::Int(1),
        _ => s("x"),
    };
    for kp in prims {
        for vp in prims {
            let space = Space {
                id: SpaceId(1),
                desc: SpaceDesc {
                    name: "t".into(),
                    attrs: vec![
                        Attribute {
                            name: "k".into(),
                            dtype: DataType::String,
                        },
                        Attribute {
                            name: "m".into(),
                            dtype: DataType::Map(kp, vp),
                        },
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
            };
            let what = format!("map({kp:?}, {vp:?})");
            let eval = |start: Value, actions: Vec<Action>| {
                let object = Object {
                    values: vec![s("key"), start],
                };
                let ms = actions.into_iter().map(|a| m(1, a)).collect();
                evaluate(&space, Some(&object), &request(ms)).map(|o| o.unwrap().values[1].clone())
            };
            let (k1, k2, k3) = (sample(kp, 1), sample(kp, 2), sample(kp, 3));
            let (v1, v2, v3) = (sample(vp, 1), sample(vp, 2), sample(vp, 3));
            let stored = eval(
                Value::Map(vec![]),
                vec![Action::Set(Value::Map(vec![
                    (k2.clone(), v1.clone()),
                    (k1.clone(), v2.clone()),
                    (k2.clone(), v3.clone()),
                ]))],
            )
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(
                stored,
                Value::Map(vec![(k1.clone(), v2.clone()), (k2.clone(), v3.clone())]),
                "{what}: sorted by key, the last duplicate wins"
            );
            let edited = eval(
                stored.clone(),
                vec![
                    Action::MapAdd(k3.clone(), v1.clone()),
                    Action::MapRemove(k1.clone()),
                    Action::MapRemove(sample(kp, 9)),
                ],
            )
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(
                edited,
                Value::Map(vec![(k2.clone(), v3.clone()), (k3.clone(), v1.clone())]),
                "{what}: add and remove"
            );
            let holder = Object {
                values: vec![s("key"), edited.clone()],
            };
            assert!(Check::new(1, PredOp::Contains(k3.clone())).matches(&holder));
            assert!(!Check::new(1, PredOp::Contains(k1.clone())).matches(&holder));
            assert!(Check::new(1, PredOp::LenEq(2)).matches(&holder));
            wrong_type(eval(
                stored.clone(),
                vec![Action::MapAdd(other_kind(kp), v1.clone())],
            ));
            wrong_type(eval(
                stored.clone(),
                vec![Action::MapAdd(k1.clone(), other_kind(vp))],
            ));
            match vp {
                Prim::String => {
                    assert_eq!(
                        eval(
                            stored.clone(),
                            vec![
                                Action::MapStringAppend(k1.clone(), b"!".to_vec()),
                                Action::MapStringPrepend(sample(kp, 9), b"<".to_vec()),
                            ],
                        )
                        .unwrap_or_else(|e| panic!("{what}: {e:?}")),
                        Value::Map(vec![
                            (k1.clone(), s("v2!")),
                            (k2.clone(), v3.clone()),
                            (sample(kp, 9), s("<")),
                        ]),
                        "{what}: string ops on values, a missing key from \"\""
                    );
                    wrong_type(eval(
                        stored.clone(),
                        vec![Action::MapNum(k1.clone(), Add, Value::Int(1))],
                    ));
                }
                Prim::Int => {
                    assert_eq!(
                        eval(
                            stored.clone(),
                            vec![
                                Action::MapNum(k1.clone(), Mul, Value::Int(5)),
                                Action::MapNum(sample(kp, 9), Sub, Value::Int(4)),
                            ],
                        )
                        .unwrap_or_else(|e| panic!("{what}: {e:?}")),
                        Value::Map(vec![
                            (k1.clone(), Value::Int(10)),
                            (k2.clone(), v3.clone()),
                            (sample(kp, 9), Value::Int(-4)),
                        ]),
                        "{what}: atomics on values, a missing key from 0"
                    );
                    assert_eq!(
                        kind(eval(
                            stored.clone(),
                            vec![Action::MapNum(k1.clone(), Mod, Value::Int(0))]
                        )),
                        CmpFailKind::DivideByZero,
                        "{what}"
                    );
                    wrong_type(eval(
                        stored.clone(),
                        vec![Action::MapStringAppend(k1.clone(), b"x".to_vec())],
                    ));
                }
                Prim::Float => {
                    assert_eq!(
                        eval(
                            stored.clone(),
                            vec![
                                Action::MapNum(k1.clone(), Max, Value::Float(9.0)),
                                Action::MapNum(sample(kp, 9), Add, Value::Float(0.25)),
                            ],
                        )
                        .unwrap_or_else(|e| panic!("{what}: {e:?}")),
                        Value::Map(vec![
                            (k1.clone(), Value::Float(9.0)),
                            (k2.clone(), v3.clone()),
                            (sample(kp, 9), Value::Float(0.25)),
                        ]),
                        "{what}: atomics on values, a missing key from 0"
                    );
                    wrong_type(eval(
                        stored.clone(),
                        vec![Action::MapNum(k1.clone(), Xor, Value::Float(1.0))],
                    ));
                }
            }
        }
    }
}
