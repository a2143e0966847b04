//! The operation families (API.md §3.6) through the Rust client against a
//! real cluster: each evaluated once at the point leader, the resulting
//! object replicated through the value-dependent chain, so a search on a
//! subspace sees the new value; results mapped as §3.4 says; mutation
//! failures report their precise reason; group operations return the exact
//! count after every update is applied.

mod common;

use common::Cluster;
use tessera_client::{
    BlockingClient, CmpFailKind, NumOp, Op, Outcome, PredOp, Status, UpdateFlags, Value,
};

const SPACE: &str = "space t key k attributes int n, float x, string s, list(int) l, \
                     set(string) st, map(string, int) m, document d \
                     subspace n subspace s create 4 partitions tolerate 1 failure";

fn s(x: &str) -> Value {
    Value::str(x)
}

fn doc_json(v: Option<&Value>) -> String {
    match v {
        Some(Value::Document(t)) => {
            tessera_types::value::json::from_str::<tessera_types::value::json::Value>(t)
                .unwrap()
                .to_string()
        }
        other => panic!("not a document: {other:?}"),
    }
}

#[test]
fn operation_families_through_the_chain() {
    let cluster = Cluster::start(4);
    cluster.admin().add_space(SPACE).expect("add_space");
    let c = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let none = Vec::<(&str, PredOp)>::new;

    // Mutators on a missing key: NOTFOUND (HyperDex's None).
    let missing = c.atomic_add("t", s("a"), [("n", Value::Int(1))]).unwrap();
    assert_eq!(missing, Outcome::NotFound);
    assert_eq!(missing.as_option(), None);
    assert_eq!(
        c.put("t", s("a"), [("n", Value::Int(10)), ("s", s("mid"))])
            .unwrap(),
        Outcome::Done
    );

    // Numeric atomics, results and subspace relocation.
    assert_eq!(
        c.atomic_add("t", s("a"), [("n", Value::Int(5))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.atomic_mul("t", s("a"), [("n", Value::Int(2))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.atomic_mod("t", s("a"), [("n", Value::Int(7))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.get("t", s("a")).unwrap().unwrap().get("n"),
        Some(&Value::Int(2))
    );
    let found = c.search("t", [("n", PredOp::Eq(Value::Int(2)))]).unwrap();
    assert_eq!(found.len(), 1, "the subspace on n holds the new value");
    // Overflow and ÷0: CMPFAIL → false, nothing changed, precise reason.
    assert!(c
        .put("t", s("a"), [("n", Value::Int(i64::MAX))])
        .unwrap()
        .is_done());
    let overflow = c.atomic_add("t", s("a"), [("n", Value::Int(1))]).unwrap();
    assert_eq!(overflow.as_option(), Some(false));
    assert_eq!(overflow.cmp_fail_kind(), Some(CmpFailKind::Overflow));
    let outcome = c
        .execute(
            "t",
            s("a"),
            UpdateFlags {
                must_exist: true,
                ..UpdateFlags::default()
            },
            none(),
            vec![
                ("s".into(), Op::StringAppend(s("!"))),
                ("n".into(), Op::Atomic(NumOp::Div, Value::Int(0))),
            ],
        )
        .unwrap();
    match outcome {
        Outcome::CmpFail { kind, .. } => assert_eq!(kind, CmpFailKind::DivideByZero),
        other => panic!("{other:?}"),
    }
    let got = c.get("t", s("a")).unwrap().unwrap();
    assert_eq!(got.get("n"), Some(&Value::Int(i64::MAX)));
    assert_eq!(got.get("s"), Some(&s("mid")));
    // mod on a float: WRONGTYPE before sending.
    assert_eq!(
        c.atomic_mod("t", s("a"), [("x", Value::Float(1.0))])
            .unwrap_err()
            .status(),
        Status::WrongType
    );

    // Strings, lists, sets, maps.
    assert_eq!(
        c.string_prepend("t", s("a"), [("s", s("<"))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.string_rtrim("t", s("a"), [("s", Value::Int(1))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.list_rpush("t", s("a"), [("l", Value::Int(2))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.list_lpush("t", s("a"), [("l", Value::Int(1))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.set_union("t", s("a"), [("st", Value::Set(vec![s("y"), s("x")]))])
            .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.set_remove("t", s("a"), [("st", s("y"))]).unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.map_add(
            "t",
            s("a"),
            [("m", vec![(s("p"), Value::Int(1)), (s("q"), Value::Int(2))])]
        )
        .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.map_atomic_add(
            "t",
            s("a"),
            [("m", vec![(s("p"), Value::Int(10)), (s("r"), Value::Int(3))])]
        )
        .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.map_remove("t", s("a"), [("m", s("q"))]).unwrap(),
        Outcome::Done
    );
    let got = c.get("t", s("a")).unwrap().unwrap();
    assert_eq!(got.get("s"), Some(&s("<mi")));
    assert_eq!(
        got.get("l"),
        Some(&Value::List(vec![Value::Int(1), Value::Int(2)]))
    );
    assert_eq!(got.get("st"), Some(&Value::Set(vec![s("x")])));
    assert_eq!(
        got.get("m"),
        Some(&Value::Map(vec![
            (s("p"), Value::Int(11)),
            (s("r"), Value::Int(3))
        ]))
    );

    // Documents: put by path, atomics, rename, unset, path predicates.
    assert_eq!(
        c.put(
            "t",
            s("a"),
            [
                ("d.profile.name", s("Jo")),
                ("d.profile.age", Value::Int(30)),
            ],
        )
        .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.atomic_add("t", s("a"), [("d.profile.age", Value::Int(1))])
            .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.document_rename("t", s("a"), [("d.profile.name", s("profile.first"))])
            .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        c.document_unset("t", s("a"), [("d.nothing", Value::Int(0))])
            .unwrap()
            .as_option(),
        Some(false)
    );
    // A put through a non-object: CMPFAIL (False), nothing changed, with
    // the reason.
    let through_int = c
        .put(
            "t",
            s("a"),
            [("s", s("never")), ("d.profile.age.x", Value::Int(1))],
        )
        .unwrap();
    assert_eq!(through_int.as_option(), Some(false));
    assert_eq!(through_int.cmp_fail_kind(), Some(CmpFailKind::BadPath));
    assert_eq!(
        c.get("t", s("a")).unwrap().unwrap().get("s"),
        Some(&s("<mi"))
    );
    let got = c.get("t", s("a")).unwrap().unwrap();
    assert_eq!(
        doc_json(got.get("d")),
        r#"{"profile":{"age":31,"first":"Jo"}}"#
    );
    assert_eq!(
        c.search("t", [("d.profile.age", PredOp::Ge(Value::Int(31)))])
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        c.cond_atomic_sub(
            "t",
            s("a"),
            [("d.profile.first", PredOp::Eq(s("Al")))],
            [("n", Value::Int(1))]
        )
        .unwrap()
        .cmp_fail_kind(),
        Some(CmpFailKind::Predicate)
    );

    // get_partial.
    let partial = c.get_partial("t", s("a"), ["n", "s"]).unwrap().unwrap();
    assert_eq!(partial.attrs.len(), 2);
    assert_eq!(
        c.get_partial("t", s("a"), ["k"]).unwrap_err().status(),
        Status::DontUseKey
    );

    // Microtransaction: creates, applies together.
    let mut tx = c.microtransaction("t").unwrap();
    tx.put([("s", s("tx"))]).unwrap();
    tx.atomic(NumOp::Sub, [("n", Value::Int(3))]).unwrap();
    tx.add("l", Op::ListRpush(Value::Int(9))).unwrap();
    assert_eq!(c.commit(tx, s("b")).unwrap(), Outcome::Done);
    let got = c.get("t", s("b")).unwrap().unwrap();
    assert_eq!(got.get("n"), Some(&Value::Int(-3)));
    assert_eq!(got.get("l"), Some(&Value::List(vec![Value::Int(9)])));

    // Group operations: exact counts, applied when they return.
    for i in 0..20 {
        let outcome = c
            .put(
                "t",
                s(&format!("g{i}")),
                [("n", Value::Int(i)), ("s", s("group"))],
            )
            .unwrap();
        assert_eq!(outcome, Outcome::Done);
    }
    let even_or_small = [
        ("s", PredOp::Eq(s("group"))),
        ("n", PredOp::Lt(Value::Int(10))),
    ];
    assert_eq!(
        c.group_atomic_add("t", even_or_small, [("n", Value::Int(100))])
            .unwrap(),
        10
    );
    assert_eq!(
        c.count(
            "t",
            [
                ("s", PredOp::Eq(s("group"))),
                ("n", PredOp::Ge(Value::Int(100)))
            ]
        )
        .unwrap(),
        10
    );
    assert_eq!(
        c.group_string_append(
            "t",
            [
                ("s", PredOp::Eq(s("group"))),
                ("n", PredOp::Ge(Value::Int(100)))
            ],
            [("s", s("+"))]
        )
        .unwrap(),
        10
    );
    assert_eq!(c.count("t", [("s", PredOp::Eq(s("group+")))]).unwrap(), 10);
    assert_eq!(
        c.group_del("t", [("s", PredOp::Eq(s("group")))]).unwrap(),
        10
    );
    assert_eq!(
        c.count("t", [("s", PredOp::Regex("^group".into()))])
            .unwrap(),
        10
    );
    assert_eq!(
        c.cond_del("t", s("b"), [("n", PredOp::Eq(Value::Int(0)))])
            .unwrap()
            .cmp_fail_kind(),
        Some(CmpFailKind::Predicate)
    );
    assert_eq!(
        c.cond_del("t", s("b"), [("n", PredOp::Eq(Value::Int(-3)))])
            .unwrap(),
        Outcome::Done
    );
    assert_eq!(c.cond_del("t", s("b"), none()).unwrap(), Outcome::NotFound);
    assert_eq!(c.group_del("t", none()).unwrap(), 11);
    assert_eq!(c.count("t", none()).unwrap(), 0);
}
