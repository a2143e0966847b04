"""Value conversion both ways (API.md §2.2–2.3, §0.2)."""

import datetime

import pytest

from tessera.client import ClientError, Document

ALL_TYPES = ("key k attributes string s, int i, float f, document d, timestamp(second) ts, "
             "list(string) ls, list(int) li, list(float) lf, set(string) ss, set(int) si, "
             "set(float) sf, map(string, string) mss, map(string, int) msi, map(int, float) mif")


@pytest.fixture
def space(make_space):
    return make_space(ALL_TYPES)


def test_defaults_of_a_new_object(client, space):
    assert client.put(space, "k", {}) is True
    assert client.get(space, "k") == {
        "s": "", "i": 0, "f": 0.0, "d": Document({}), "ts": datetime.datetime(1970, 1, 1),
        "ls": [], "li": [], "lf": [], "ss": set(), "si": set(), "sf": set(),
        "mss": {}, "msi": {}, "mif": {}}


def test_every_type_round_trips(client, space):
    when = datetime.datetime(2024, 2, 29, 13, 14, 15, 123456)
    value = {
        "s": "hello", "i": -(2 ** 63), "f": 2.5, "d": Document({"a": [1, 2.5, "x"], "b": {"c": None}}),
        "ts": when, "ls": ["b", "a", "b"], "li": [3, -1, 3], "lf": [0.5, -0.25],
        "ss": {"x", "y"}, "si": {5, -5, 0}, "sf": {1.5}, "mss": {"k": "v", "k2": ""},
        "msi": {"a": 1, "b": -2}, "mif": {7: 0.5, -7: 1.0},
    }
    assert client.put(space, "all", value) is True
    assert client.get(space, "all") == value


def test_str_and_bytes_in_str_out_when_utf8(client, space):
    assert client.put(space, "u", {"s": "naïve – 日本語 🎉"}) is True
    assert client.get(space, "u")["s"] == "naïve – 日本語 🎉"
    # bytes that are UTF-8 come back as str.
    assert client.put(space, "b", {"s": "ünïcode".encode("utf-8")}) is True
    assert client.get(space, "b")["s"] == "ünïcode"
    # bytes that are not come back as bytes, every byte intact (NUL too).
    raw = bytes(range(256))
    assert client.put(space, "raw", {"s": raw, "ls": [b"\xff\x00", b"ok"], "mss": {b"\xfe": b"\x00\xff"}}) is True
    got = client.get(space, "raw")
    assert got["s"] == raw and isinstance(got["s"], bytes)
    assert got["ls"] == [b"\xff\x00", "ok"]
    assert got["mss"] == {b"\xfe": b"\x00\xff"}
    # Keys may be unicode or binary too.
    assert client.put(space, "ключ", {"i": 1}) is True
    assert client.get(space, "ключ") == client.get(space, "ключ".encode("utf-8"))
    assert client.put(space, b"\x00\xff", {"i": 2}) is True
    assert client.get(space, b"\x00\xff")["i"] == 2
    keys = {o["k"] for o in client.search(space, {"i": (1, 2)})}
    assert keys == {"ключ", b"\x00\xff"}


def test_numbers_mix_on_put_but_not_in_predicates(client, space):
    # API.md §2.2: an int attribute takes a float (rounded), a float an int.
    assert client.put(space, "n", {"i": 3.7, "f": 2}) is True
    got = client.get(space, "n")
    assert got["i"] == 4 and isinstance(got["i"], int)
    assert got["f"] == 2.0 and isinstance(got["f"], float)
    with pytest.raises(ClientError) as e:
        list(client.search(space, {"f": 2}))
    assert e.value.symbol() == "HYPERDEX_CLIENT_WRONGTYPE"


def test_bool_is_an_int(client, space):
    assert client.put(space, "b", {"i": True}) is True
    assert client.get(space, "b")["i"] == 1


def test_int_outside_int64_is_overflow_error(client, space):
    with pytest.raises(OverflowError):
        client.put(space, "o", {"i": 2 ** 63})
    with pytest.raises(OverflowError):
        client.put(space, "o", {"li": [1, -(2 ** 63) - 1]})


def test_unconvertible_values_are_type_errors(client, space):
    for bad in (None, (1, 2), object(), [[1]], [1, "a"], [1, 1.5], {"a": 1, "b": "x"}, {1: 1, "a": 1},
                {frozenset()}):
        with pytest.raises(TypeError):
            client.put(space, "t", {"ls": bad})
    with pytest.raises(TypeError) as e:
        client.put(space, "t", {"s": None})
    assert "Cannot convert object to a HyperDex type" in str(e.value)
    with pytest.raises(TypeError) as e:
        client.put(space, "t", {"li": [1, "a"]})
    assert "heterogenous" in str(e.value)


def test_empty_containers_take_the_attribute_type(client, space):
    assert client.put(space, "e", {"li": [1], "ss": {"a"}, "msi": {"a": 1}}) is True
    assert client.put(space, "e", {"li": [], "ss": set(), "msi": {}, "lf": [], "sf": set(), "mif": {}}) is True
    got = client.get(space, "e")
    assert (got["li"], got["ss"], got["msi"]) == ([], set(), {})
    # A list may be given for a set attribute.
    assert client.put(space, "e", {"si": [3, 1, 3]}) is True
    assert client.get(space, "e")["si"] == {1, 3}


def test_container_of_wrong_element_type_is_wrongtype(client, space):
    with pytest.raises(ClientError) as e:
        client.put(space, "w", {"li": ["a"]})
    assert e.value.status() == 8525


def test_timestamps_naive_are_utc_and_aware_are_converted(client, space):
    naive = datetime.datetime(2020, 1, 2, 3, 4, 5, 6)
    aware = datetime.datetime(2020, 1, 2, 5, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    assert client.put(space, "t1", {"ts": naive}) is True
    assert client.put(space, "t2", {"ts": aware}) is True
    assert client.get(space, "t1")["ts"] == naive
    assert client.get(space, "t2")["ts"] == naive
    before = datetime.datetime(1969, 7, 20, 20, 17, 40)
    assert client.put(space, "t3", {"ts": before}) is True
    assert client.get(space, "t3")["ts"] == before
    assert {o["k"] for o in client.search(space, {"ts": naive})} == {"t1", "t2"}
    # A timestamp attribute wants a datetime, not a string.
    with pytest.raises(ClientError):
        client.put(space, "t4", {"ts": "2020-01-01"})


def test_documents(client, space):
    doc = Document({"name": "Jo", "tags": ["a"], "n": 1})
    assert client.put(space, "d", {"d": doc}) is True
    got = client.get(space, "d")["d"]
    assert isinstance(got, Document)
    assert got == doc and got.doc() == {"name": "Jo", "tags": ["a"], "n": 1}
    assert Document('{"a": 1}') == Document({"a": 1}) != Document({"a": 2})
    with pytest.raises(TypeError):
        got < doc
    with pytest.raises(TypeError):
        Document(3)
    with pytest.raises(ValueError):
        Document("{not json")
    # A dict is a map, not a document.
    with pytest.raises(ClientError) as e:
        client.put(space, "d", {"d": {"a": 1}})
    assert e.value.symbol() == "HYPERDEX_CLIENT_WRONGTYPE"
    # Paths write inside.
    assert client.put(space, "d", {"d.name": "Al", "d.x.y": 5}) is True
    assert client.get(space, "d")["d"].doc() == {"name": "Al", "tags": ["a"], "n": 1, "x": {"y": 5}}
    assert [o["k"] for o in client.search(space, {"d.name": "Al"})] == ["d"]


def test_names_may_be_bytes(client, space):
    assert client.put(space.encode(), b"k", {b"s": b"v"}) is True
    assert client.get(space, "k")["s"] == "v"
