"""Every predicate (API.md §6) on every type it applies to, against a
brute-force filter of the objects in Python."""

import datetime
import random
import re

import pytest

from tessera.client import (ClientError, Contains, Document, Equals, GreaterEqual, GreaterThan,
                            LengthEquals, LengthGreaterEqual, LengthLessEqual, LessEqual, LessThan,
                            Range, Regex)

SCHEMA = ("key int k attributes string s, int i, float f, timestamp(day) ts, list(int) l, "
          "set(string) st, map(string, int) m, document d subspace i create 4 partitions")

WORDS = ["apple", "apricot", "banana", "band", "", "a.b", "zeta", "Apple"]
T0 = datetime.datetime(2021, 3, 1)


@pytest.fixture(scope="module")
def data(cluster):
    """One space with 120 random objects, and the model of them."""
    from tessera.admin import Admin
    from tessera.client import Client
    import uuid
    admin = Admin(cluster.host, cluster.port)
    space = "p_" + uuid.uuid4().hex[:10]
    admin.add_space("space %s %s" % (space, SCHEMA))
    client = Client(cluster.host, cluster.port)
    rng = random.Random(7)
    model = {}
    for k in range(120):
        obj = {
            "s": rng.choice(WORDS), "i": rng.randrange(-20, 20), "f": rng.choice([-1.5, 0.0, 0.25, 3.0, 10.0]),
            "ts": T0 + datetime.timedelta(hours=rng.randrange(0, 200)),
            "l": [rng.randrange(0, 5) for _ in range(rng.randrange(0, 4))],
            "st": set(rng.sample(["x", "y", "z"], rng.randrange(0, 4))),
            "m": {w: rng.randrange(0, 3) for w in rng.sample(["p", "q", "r"], rng.randrange(0, 4))},
            "d": Document({"n": rng.randrange(0, 5), "name": rng.choice(["Jo", "Al"])}),
        }
        assert client.put(space, k, obj) is True
        model[k] = obj
    yield client, space, model
    admin.rm_space(space)


def hyperdex_regex(pattern):
    """API.md §6.3 in Python's re: literal bytes, '.', 'c*', '^', '$'."""
    out = ""
    for ch in pattern:
        out += ch if ch in ".*^$" else re.escape(ch)
    return out


CASES = [
    ({"s": "apple"}, lambda o: o["s"] == "apple"),
    ({"s": Equals("band")}, lambda o: o["s"] == "band"),
    ({"s": LessThan("b")}, lambda o: o["s"] < "b"),
    ({"s": LessEqual("band")}, lambda o: o["s"] <= "band"),
    ({"s": GreaterThan("b")}, lambda o: o["s"] > "b"),
    ({"s": GreaterEqual("banana")}, lambda o: o["s"] >= "banana"),
    ({"s": ("apple", "banana")}, lambda o: "apple" <= o["s"] <= "banana"),
    ({"s": Regex("^ap")}, lambda o: re.search(hyperdex_regex("^ap"), o["s"])),
    ({"s": Regex("an")}, lambda o: "an" in o["s"]),
    ({"s": Regex("a.*a$")}, lambda o: re.search(hyperdex_regex("a.*a$"), o["s"])),
    ({"s": Regex("a\\.b")}, lambda o: "a.b" in o["s"]),
    ({"s": LengthEquals(4)}, lambda o: len(o["s"]) == 4),
    ({"s": LengthLessEqual(4)}, lambda o: len(o["s"]) <= 4),
    ({"s": LengthGreaterEqual(6)}, lambda o: len(o["s"]) >= 6),
    ({"i": 3}, lambda o: o["i"] == 3),
    ({"i": LessThan(0)}, lambda o: o["i"] < 0),
    ({"i": LessEqual(0)}, lambda o: o["i"] <= 0),
    ({"i": GreaterThan(10)}, lambda o: o["i"] > 10),
    ({"i": GreaterEqual(10)}, lambda o: o["i"] >= 10),
    ({"i": Range(-5, 5)}, lambda o: -5 <= o["i"] <= 5),
    ({"i": (-5, 5)}, lambda o: -5 <= o["i"] <= 5),
    ({"i": [GreaterEqual(-10), LessThan(0)]}, lambda o: -10 <= o["i"] < 0),
    ({"k": Range(10, 19)}, lambda o: 10 <= o["k"] <= 19),
    ({"f": 0.25}, lambda o: o["f"] == 0.25),
    ({"f": GreaterThan(0.0)}, lambda o: o["f"] > 0.0),
    ({"f": (0.0, 3.0)}, lambda o: 0.0 <= o["f"] <= 3.0),
    ({"ts": LessThan(T0 + datetime.timedelta(hours=50))}, lambda o: o["ts"] < T0 + datetime.timedelta(hours=50)),
    ({"ts": Range(T0 + datetime.timedelta(hours=10), T0 + datetime.timedelta(hours=100))},
     lambda o: T0 + datetime.timedelta(hours=10) <= o["ts"] <= T0 + datetime.timedelta(hours=100)),
    ({"l": Contains(3)}, lambda o: 3 in o["l"]),
    ({"l": LengthEquals(0)}, lambda o: len(o["l"]) == 0),
    ({"l": LengthGreaterEqual(2)}, lambda o: len(o["l"]) >= 2),
    ({"st": Contains("y")}, lambda o: "y" in o["st"]),
    ({"st": {"x", "z"}}, lambda o: o["st"] == {"x", "z"}),
    ({"st": LengthLessEqual(1)}, lambda o: len(o["st"]) <= 1),
    ({"m": Contains("q")}, lambda o: "q" in o["m"]),
    ({"m": LengthEquals(3)}, lambda o: len(o["m"]) == 3),
    ({"d.n": 2}, lambda o: o["d"].doc()["n"] == 2),
    ({"d.n": GreaterEqual(3)}, lambda o: o["d"].doc()["n"] >= 3),
    ({"d.name": "Jo"}, lambda o: o["d"].doc()["name"] == "Jo"),
    ({"s": Regex("^a"), "i": GreaterEqual(0), "st": Contains("x")},
     lambda o: o["s"].startswith("a") and o["i"] >= 0 and "x" in o["st"]),
    ({}, lambda o: True),
]


@pytest.mark.parametrize("predicates,expect", CASES, ids=[repr(c[0]) for c in CASES])
def test_search_and_count_match_a_brute_force_filter(data, predicates, expect):
    client, space, model = data
    want = sorted(k for k, o in model.items() if expect(dict(o, k=k)))
    results = list(client.search(space, predicates))
    assert sorted(r["k"] for r in results) == want
    assert len(results) == len(want)  # each key once
    for r in results:
        assert {n: v for n, v in r.items() if n != "k"} == model[r["k"]]
    assert client.count(space, predicates) == len(want)


@pytest.mark.parametrize("attr", ["i", "s", "f", "k", "ts"])
@pytest.mark.parametrize("maxmin", ["max", "min", "maximize", "minimize"])
def test_sorted_search_orders_and_limits(data, attr, maxmin):
    client, space, model = data
    descending = maxmin.startswith("max")
    for limit in (1, 7, 500):
        got = list(client.sorted_search(space, {"i": GreaterEqual(-10)}, attr, limit, maxmin))
        eligible = [(o[attr] if attr != "k" else k) for k, o in model.items() if o["i"] >= -10]
        want = sorted(eligible, reverse=descending)[:limit]
        assert [r[attr] for r in got] == want


def test_sorted_search_refuses_bad_arguments(data):
    client, space, _ = data
    with pytest.raises(ValueError):
        client.sorted_search(space, {}, "i", 3, "sideways")
    with pytest.raises(ClientError) as e:
        client.sorted_search(space, {}, "l", 3, "max")
    assert e.value.symbol() == "HYPERDEX_CLIENT_WRONGTYPE"


def test_predicates_refused_by_type(data):
    client, space, _ = data
    for predicates in ({"i": Regex("a")}, {"i": LengthEquals(1)}, {"l": LessThan(1)}, {"s": Contains("a")},
                       {"f": 1}, {"i": 1.5}, {"st": Contains(1)}):
        with pytest.raises(ClientError) as e:
            client.search(space, predicates)
        assert e.value.symbol() == "HYPERDEX_CLIENT_WRONGTYPE", predicates
    with pytest.raises(TypeError):
        client.search(space, {"i": (1, "x")})
    with pytest.raises(ClientError) as e:
        client.count(space, {"nope": 1})
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNATTR"


def test_predicate_objects_compare_and_print():
    assert Range(1, 2) == Range(1, 2) != Range(1, 3)
    assert repr(LessThan(3)) == "LessThan(3)"
    assert Equals("a") != LessThan("a")
