"""Every operation family (API.md §3.5–3.6): plain, cond_ and group_ forms,
checked against a Python model of the expected object."""

import random

import pytest

from tessera.client import ClientError, Document, GreaterEqual, LessThan

SCHEMA = ("key k attributes int i, float f, string s, list(int) l, set(string) st, "
          "map(string, int) m, map(int, string) ms, document d")

INT64_MAX = 2 ** 63 - 1


@pytest.fixture
def space(make_space):
    return make_space(SCHEMA)


def fresh(client, space, key, **values):
    assert client.put(space, key, values) is True
    return client.get(space, key)


def trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trunc_mod(a, b):
    return a - b * trunc_div(a, b)


INT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": trunc_div, "mod": trunc_mod, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b, "min": min, "max": max,
}


def test_int_atomics_against_a_model(client, space):
    rng = random.Random(5)
    value = 1000
    fresh(client, space, "a", i=value)
    for _ in range(60):
        op = rng.choice(sorted(INT_OPS))
        operand = rng.choice([rng.randrange(-50, 50), rng.randrange(1, 7), 0])
        expected_ok = not (op in ("div", "mod") and operand == 0)
        result = getattr(client, "atomic_" + op)(space, "a", {"i": operand})
        if expected_ok:
            new = INT_OPS[op](value, operand)
            if -2 ** 63 <= new <= INT64_MAX:
                assert result is True, (op, value, operand)
                value = new
            else:
                assert result is False
        else:
            assert result is False, (op, value, operand)
        assert client.get(space, "a")["i"] == value


def test_int_overflow_fails_and_changes_nothing(client, space):
    fresh(client, space, "o", i=INT64_MAX, s="keep")
    assert client.atomic_add(space, "o", {"i": 1}) is False
    assert client.atomic_mul(space, "o", {"i": 2}) is False
    assert client.put(space, "o", {"i": -2 ** 63}) is True
    assert client.atomic_div(space, "o", {"i": -1}) is False
    assert client.atomic_sub(space, "o", {"i": 1}) is False
    assert client.get(space, "o") ["i"] == -2 ** 63


def test_float_atomics(client, space):
    fresh(client, space, "f", f=1.5)
    assert client.atomic_add(space, "f", {"f": 2}) is True
    assert client.atomic_mul(space, "f", {"f": 3.0}) is True
    assert client.atomic_sub(space, "f", {"f": 0.5}) is True
    assert client.atomic_div(space, "f", {"f": 2.0}) is True
    assert client.atomic_max(space, "f", {"f": 100.0}) is True
    assert client.atomic_min(space, "f", {"f": 7.25}) is True
    assert client.get(space, "f")["f"] == 7.25
    for op in ("mod", "and", "or", "xor"):
        with pytest.raises(ClientError) as e:
            getattr(client, "atomic_" + op)(space, "f", {"f": 1.0})
        assert e.value.symbol() == "HYPERDEX_CLIENT_WRONGTYPE"
    # Division by zero of floats follows IEEE.
    assert client.atomic_div(space, "f", {"f": 0.0}) is True
    assert client.get(space, "f")["f"] == float("inf")


def test_string_ops(client, space):
    fresh(client, space, "s", s="middle")
    assert client.string_prepend(space, "s", {"s": "<"}) is True
    assert client.string_append(space, "s", {"s": b">"}) is True
    assert client.get(space, "s")["s"] == "<middle>"
    assert client.string_ltrim(space, "s", {"s": 1}) is True
    assert client.string_rtrim(space, "s", {"s": 2}) is True
    assert client.get(space, "s")["s"] == "middl"
    assert client.string_ltrim(space, "s", {"s": 100}) is True
    assert client.get(space, "s")["s"] == ""
    with pytest.raises(ClientError):
        client.string_ltrim(space, "s", {"s": -1})


def test_list_and_set_ops(client, space):
    fresh(client, space, "c", l=[2], st={"b"})
    assert client.list_lpush(space, "c", {"l": 1}) is True
    assert client.list_rpush(space, "c", {"l": 3}) is True
    assert client.set_add(space, "c", {"st": "a"}) is True
    assert client.set_add(space, "c", {"st": "a"}) is True
    assert client.set_remove(space, "c", {"st": "zz"}) is True
    got = client.get(space, "c")
    assert got["l"] == [1, 2, 3] and got["st"] == {"a", "b"}
    assert client.set_union(space, "c", {"st": {"c", "d"}}) is True
    assert client.set_intersect(space, "c", {"st": {"a", "c", "x"}}) is True
    assert client.set_remove(space, "c", {"st": "a"}) is True
    assert client.get(space, "c")["st"] == {"c"}
    with pytest.raises(ClientError):
        client.list_lpush(space, "c", {"l": "x"})


def test_map_ops(client, space):
    fresh(client, space, "m", m={"a": 1, "b": 2}, ms={1: "x"})
    assert client.map_add(space, "m", {"m": {"c": 3, "a": 10}, "ms": {2: "y"}}) is True
    assert client.map_remove(space, "m", {"m": "b"}) is True
    assert client.map_atomic_add(space, "m", {"m": {"a": 5, "new": 4}}) is True
    assert client.map_atomic_mul(space, "m", {"m": {"c": 3}}) is True
    assert client.map_atomic_min(space, "m", {"m": {"a": 7}}) is True
    assert client.map_atomic_max(space, "m", {"m": {"c": 100}}) is True
    assert client.map_atomic_xor(space, "m", {"m": {"new": 1}}) is True
    assert client.map_string_prepend(space, "m", {"ms": {1: "<"}}) is True
    assert client.map_string_append(space, "m", {"ms": {1: ">", 3: "z"}}) is True
    got = client.get(space, "m")
    assert got["m"] == {"a": 7, "c": 100, "new": 5}
    assert got["ms"] == {1: "<x>", 2: "y", 3: "z"}
    assert client.map_atomic_div(space, "m", {"m": {"a": 0}}) is False
    assert client.map_atomic_add(space, "m", {"m": {"a": INT64_MAX}}) is False
    assert client.get(space, "m")["m"]["a"] == 7


def test_document_ops(client, space):
    fresh(client, space, "d", d=Document({"a": {"b": 1}, "arr": [1], "t": "x"}))
    assert client.atomic_add(space, "d", {"d.a.b": 2}) is True
    assert client.atomic_add(space, "d", {"d.n": 5}) is True
    assert client.string_append(space, "d", {"d.t": "yz"}) is True
    assert client.list_rpush(space, "d", {"d.arr": 2}) is True
    assert client.list_lpush(space, "d", {"d.arr": Document({"o": 1})}) is True
    assert client.document_rename(space, "d", {"d.t": "text"}) is True
    assert client.document_unset(space, "d", {"d.a.b": True}) is True
    assert client.get(space, "d")["d"].doc() == {"a": {}, "arr": [{"o": 1}, 1, 2], "n": 5, "text": "xyz"}
    # Failures change nothing (CMPFAIL -> False).
    assert client.document_unset(space, "d", {"d.missing": 0}) is False
    assert client.document_rename(space, "d", {"d.missing": "x"}) is False
    assert client.put(space, "d", {"d.arr[0].o.x": 1}) is False
    assert client.cond_document_unset(space, "d", {"i": 1}, {"d.n": 0}) is False
    assert client.cond_document_unset(space, "d", {"i": 0}, {"d.n": 0}) is True
    assert "n" not in client.get(space, "d")["d"].doc()


def test_cond_forms(client, space):
    fresh(client, space, "c", i=5, s="x")
    assert client.cond_put(space, "c", {"i": 5}, {"s": "y"}) is True
    assert client.cond_put(space, "c", {"i": 6}, {"s": "z"}) is False
    assert client.cond_atomic_add(space, "c", {"s": "y", "i": GreaterEqual(5)}, {"i": 1}) is True
    assert client.cond_atomic_add(space, "c", {"i": LessThan(6)}, {"i": 1}) is False
    assert client.cond_string_append(space, "c", {"i": 6}, {"s": "!"}) is True
    assert client.cond_list_rpush(space, "c", {"i": 6}, {"l": 9}) is True
    assert client.cond_set_add(space, "c", {"i": 6}, {"st": "q"}) is True
    assert client.cond_map_add(space, "c", {"i": 6}, {"m": {"k": 1}}) is True
    assert client.cond_map_add(space, "c", {"i": 7}, {"m": {"k": 2}}) is False
    assert client.get(space, "c") == {"i": 6, "f": 0.0, "s": "y!", "l": [9], "st": {"q"},
                                      "m": {"k": 1}, "ms": {}, "d": Document({})}
    assert client.cond_put(space, "absent", {"i": 1}, {"s": "y"}) is None
    assert client.cond_put_or_create(space, "new", {"i": 99}, {"s": "made"}) is True
    assert client.get(space, "new")["s"] == "made"
    assert client.cond_put_or_create(space, "new", {"i": 99}, {"s": "again"}) is False
    assert client.cond_del(space, "c", {"i": 5}) is False
    assert client.cond_del(space, "c", {"i": 6}) is True
    assert client.get(space, "c") is None
    assert client.cond_del(space, "c", {"i": 6}) is None


def test_group_forms_against_a_model(client, space):
    rng = random.Random(11)
    model = {}
    for n in range(60):
        key = "g%02d" % n
        i = rng.randrange(0, 10)
        model[key] = {"i": i, "s": "", "st": set(), "m": {}}
        assert client.put(space, key, {"i": i}) is True

    def matching(pred):
        return {k for k, v in model.items() if pred(v)}

    hit = matching(lambda v: v["i"] >= 5)
    assert client.group_atomic_add(space, {"i": GreaterEqual(5)}, {"i": 100}) == len(hit)
    for k in hit:
        model[k]["i"] += 100
    hit = matching(lambda v: v["i"] < 3)
    assert client.group_string_append(space, {"i": LessThan(3)}, {"s": "low"}) == len(hit)
    for k in hit:
        model[k]["s"] += "low"
    hit = matching(lambda v: v["s"] == "low")
    assert client.group_set_add(space, {"s": "low"}, {"st": "tag"}) == len(hit)
    for k in hit:
        model[k]["st"].add("tag")
    assert client.group_map_add(space, {"s": "low"}, {"m": {"x": 1}}) == len(hit)
    for k in hit:
        model[k]["m"]["x"] = 1
    hit = matching(lambda v: v["i"] >= 100)
    assert client.group_put(space, {"i": GreaterEqual(100)}, {"s": "high"}) == len(hit)
    for k in hit:
        model[k]["s"] = "high"
    for key, want in model.items():
        got = client.get(space, key)
        assert {n: got[n] for n in want} == want, key
    assert client.count(space, {"s": "high"}) == len(matching(lambda v: v["s"] == "high"))
    hit = matching(lambda v: v["s"] == "low")
    assert client.group_del(space, {"s": "low"}) == len(hit)
    for k in hit:
        del model[k]
    assert {o["k"] for o in client.search(space, {})} == set(model)
    assert client.group_del(space, {}) == len(model)
    assert client.count(space, {}) == 0


def test_microtransactions(client, space):
    fresh(client, space, "t", i=1, s="a")
    tx = client.microtransaction_init(space)
    assert tx.put({"f": 2.5}) is True
    assert tx.atomic_add({"i": 10}) is True
    assert tx.string_append({"s": "b"}) is True
    assert tx.list_rpush({"l": 7}) is True
    assert tx.commit("t") is True
    got = client.get(space, "t")
    assert (got["i"], got["f"], got["s"], got["l"]) == (11, 2.5, "ab", [7])
    with pytest.raises(ValueError):
        tx.commit("t")
    # All or nothing: one failing operation leaves the object unchanged.
    tx = client.microtransaction_init(space)
    tx.atomic_add({"i": 1})
    tx.atomic_div({"i": 0})
    assert tx.commit("t") is False
    assert client.get(space, "t")["i"] == 11
    # Invalid operations raise when collected.
    tx = client.microtransaction_init(space)
    with pytest.raises(ClientError):
        tx.atomic_add({"s": 1})
    # A commit creates a missing object.
    tx = client.microtransaction_init(space)
    tx.put({"s": "created"})
    assert tx.commit("new") is True
    assert client.get(space, "new")["s"] == "created"
    tx = client.microtransaction_init(space)
    tx.atomic_add({"i": 1})
    assert tx.cond_commit("t", {"i": 12}) is False
    tx = client.microtransaction_init(space)
    tx.atomic_add({"i": 1})
    assert tx.async_cond_commit("t", {"i": 11}).wait() is True
    tx = client.microtransaction_init(space)
    tx.string_append({"s": "!"})
    assert tx.group_commit({"i": GreaterEqual(0)}) == 2
    assert {o["k"]: o["s"] for o in client.search(space, {})} == {"t": "ab!", "new": "created!"}
    with pytest.raises(ClientError) as e:
        client.microtransaction_init("no_such_space")
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNSPACE"
