"""Search iterators: lazy, streamed, each key once (API.md §3.4, §3.6)."""

import gc

import pytest

from tessera.client import ClientError, GreaterEqual, Iterator, LessThan

N = 3000


@pytest.fixture(scope="module")
def big(cluster):
    import uuid
    from tessera.admin import Admin
    from tessera.client import Client
    admin = Admin(cluster.host, cluster.port)
    space = "it_" + uuid.uuid4().hex[:10]
    admin.add_space("space %s key int k attributes int n, string pad create 8 partitions" % space)
    client = Client(cluster.host, cluster.port)
    window = []
    for k in range(N):
        window.append(client.async_put(space, k, {"n": k % 100, "pad": "x" * 200}))
        if len(window) == 64:
            assert all(d.wait() is True for d in window)
            window = []
    assert all(d.wait() is True for d in window)
    yield client, space
    admin.rm_space(space)


def test_a_large_result_streams_through_the_iterator(big):
    client, space = big
    it = client.search(space, {})
    assert isinstance(it, Iterator)
    assert iter(it) is it
    keys = []
    for obj in it:
        assert obj == {"k": obj["k"], "n": obj["k"] % 100, "pad": "x" * 200}
        keys.append(obj["k"])
    assert sorted(keys) == list(range(N))
    assert len(set(keys)) == N
    # Exhausted stays exhausted.
    assert list(it) == []


def test_has_next_and_next(big):
    client, space = big
    it = client.search(space, {"n": 7})
    got = []
    while it.hasNext():
        got.append(it.next()["k"])
    assert sorted(got) == [k for k in range(N) if k % 100 == 7]
    assert it.hasNext() is False
    with pytest.raises(StopIteration):
        it.next()


def test_stopping_early_and_dropping_iterators(big):
    client, space = big
    for _ in range(20):
        it = client.search(space, {})
        first = next(it)
        assert 0 <= first["k"] < N
        del it
    gc.collect()
    # The client is unaffected by abandoned searches.
    assert client.count(space, {"n": LessThan(10)}) == N // 10
    assert client.get(space, 5)["n"] == 5


def test_iterators_interleave(big):
    client, space = big
    a = client.search(space, {"n": 1})
    b = client.sorted_search(space, {"n": GreaterEqual(98)}, "k", 10, "max")
    pairs = list(zip(a, b))
    assert len(pairs) == 10
    assert [p[1]["k"] for p in pairs] == sorted((k for k in range(N) if k % 100 >= 98), reverse=True)[:10]


def test_argument_errors_raise_from_the_call(big):
    client, space = big
    with pytest.raises(ClientError) as e:
        client.search(space, {"nope": 1})
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNATTR"


def test_results_are_fetched_while_iterating(client, make_space):
    """The iterator holds a bounded amount ahead of the reader: after the
    first result, delete every object; the iterator then yields only what
    it had fetched already — fewer than all — where a client that fetched
    the whole result first would yield every object."""
    # 4 regions; pages of 256 KiB hold 64 of these objects, so the pages a
    # stream holds ahead (a couple per region) plus the iterator's channel
    # (256) are far fewer than n.
    space = make_space("key int k attributes string pad", partitions=4)
    n = 2000
    pad = "p" * 4096
    window = []
    for k in range(n):
        window.append(client.async_put(space, k, {"pad": pad}))
        if len(window) == 64:
            assert all(d.wait() is True for d in window)
            window = []
    assert all(d.wait() is True for d in window)
    it = client.search(space, {})
    first = next(it)
    assert first["pad"] == pad
    assert client.group_del(space, {}) == n
    assert client.count(space, {}) == 0
    rest = [obj["k"] for obj in it]
    yielded = [first["k"]] + rest
    assert len(set(yielded)) == len(yielded)
    assert set(yielded) <= set(range(n))
    assert len(yielded) < n
