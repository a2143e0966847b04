"""async_* methods, Deferred.wait() and Client.loop() (API.md §3.3)."""

import pytest

from tessera.client import ClientError, Deferred, GreaterEqual


@pytest.fixture
def space(make_space):
    return make_space("key int k attributes int n, string s")


def test_many_outstanding_then_loop_returns_each_once(client, space):
    count = 500
    started = {}
    for k in range(count):
        d = client.async_put(space, k, {"n": k * 2})
        assert isinstance(d, Deferred)
        started[id(d)] = (k, d)
    seen = set()
    for _ in range(count):
        d = client.loop()
        assert id(d) in started and id(d) not in seen
        seen.add(id(d))
        assert d.wait() is True
        assert d.wait() is True  # again: the same result
    with pytest.raises(ClientError) as e:
        client.loop()
    assert e.value.symbol() == "HYPERDEX_CLIENT_NONEPENDING"
    reads = [client.async_get(space, k) for k in range(count)]
    assert [d.wait() for d in reads] == [{"n": k * 2, "s": ""} for k in range(count)]
    assert client.count(space, {}) == count


def test_loop_with_nothing_issued_raises_nonepending_at_once(client):
    with pytest.raises(ClientError) as e:
        client.loop()
    assert e.value.status() == 8523


def test_window_of_64(client, space):
    """The HyperDex window pattern: keep 64 outstanding, retire one with
    loop() + wait() before starting the next."""
    total, window = 1000, 64
    for k in range(10):
        assert client.put(space, k, {"n": 0}) is True
    outstanding = 0
    results = []
    for k in range(total):
        if outstanding == window:
            results.append(client.loop().wait())
            outstanding -= 1
        client.async_atomic_add(space, k % 10, {"n": 1})
        outstanding += 1
    while outstanding:
        results.append(client.loop().wait())
        outstanding -= 1
    assert len(results) == total and all(r is True for r in results)
    assert [client.get(space, k)["n"] for k in range(10)] == [total // 10] * 10


def test_wait_without_loop_and_loop_skips_waited(client, space):
    a = client.async_put(space, 1, {"n": 1})
    b = client.async_put(space, 2, {"n": 2})
    assert a.wait() is True
    assert client.loop() is b
    assert b.wait() is True
    with pytest.raises(ClientError):
        client.loop()


def test_results_and_errors_through_deferreds(client, space):
    assert client.async_get(space, 99).wait() is None
    assert client.async_delete(space, 99).wait() is None
    assert client.async_put(space, 1, {"n": 5}).wait() is True
    assert client.async_put_if_not_exist(space, 1, {"n": 6}).wait() is False
    assert client.async_cond_put(space, 1, {"n": 5}, {"s": "x"}).wait() is True
    assert client.async_get_partial(space, 1, ["s"]).wait() == {"s": "x"}
    assert client.async_count(space, {"n": GreaterEqual(0)}).wait() == 1
    assert client.async_group_atomic_add(space, {}, {"n": 1}).wait() == 1
    assert isinstance(client.async_search_describe(space, {}).wait(), str)
    assert client.async_del(space, 1).wait() is True


def test_argument_errors_raise_at_the_async_call(client, space):
    for call, symbol in [
        (lambda: client.async_put("no_such_space", 1, {}), "UNKNOWNSPACE"),
        (lambda: client.async_put(space, "not an int", {"n": 1}), "WRONGTYPE"),
        (lambda: client.async_put(space, 1, {"n": "text"}), "WRONGTYPE"),
        (lambda: client.async_atomic_add(space, 1, {"zz": 1}), "UNKNOWNATTR"),
        (lambda: client.async_put(space, 1, {"k": 1}), "DONTUSEKEY"),
        (lambda: client.async_count(space, {"n": "x"}), "WRONGTYPE"),
        (lambda: client.async_get(space, "x"), "WRONGTYPE"),
    ]:
        with pytest.raises(ClientError) as e:
            call()
        assert e.value.symbol() == "HYPERDEX_CLIENT_" + symbol
    # Nothing was started by the refused calls.
    with pytest.raises(ClientError) as e:
        client.loop()
    assert e.value.symbol() == "HYPERDEX_CLIENT_NONEPENDING"
    with pytest.raises(TypeError):
        client.async_put(space, 1, {"n": None})
