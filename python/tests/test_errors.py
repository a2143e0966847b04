"""Outcomes and errors (API.md §3.4, §4, §5)."""

import pytest

import tessera.admin
import tessera.client
from tessera.client import ClientError, HyperDexClientException
from tessera.admin import AdminError, HyperDexAdminException


@pytest.fixture
def space(make_space):
    return make_space("key k attributes int n, string s")


def test_hyperdex_names_are_the_same_classes():
    assert HyperDexClientException is ClientError
    assert HyperDexAdminException is AdminError
    assert tessera.client.HyperDexClientException is tessera.client.ClientError
    assert tessera.admin.HyperDexAdminException is tessera.admin.AdminError


def test_unknown_space(client):
    with pytest.raises(ClientError) as e:
        client.get("no_such_space", "k")
    assert e.value.status() == 8512
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNSPACE"
    assert "no_such_space" in e.value.message()
    assert str(e.value) == "%s [HYPERDEX_CLIENT_UNKNOWNSPACE]" % e.value.message()
    with pytest.raises(ClientError) as e:
        client.put("no_such_space", "k", {})
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNSPACE"
    with pytest.raises(ClientError) as e:
        client.search("no_such_space", {})
    assert e.value.symbol() == "HYPERDEX_CLIENT_UNKNOWNSPACE"


def test_wrong_type_unknown_attribute_and_key(client, space):
    cases = [
        (lambda: client.put(space, "k", {"n": "text"}), "WRONGTYPE", 8525),
        (lambda: client.put(space, 5, {"n": 1}), "WRONGTYPE", 8525),
        (lambda: client.put(space, "k", {"nope": 1}), "UNKNOWNATTR", 8520),
        (lambda: client.put(space, "k", {"k": "x"}), "DONTUSEKEY", 8524),
        (lambda: client.get_partial(space, "k", ["k"]), "DONTUSEKEY", 8524),
        (lambda: client.get_partial(space, "k", ["zz"]), "UNKNOWNATTR", 8520),
        (lambda: client.string_append(space, "k", {"n": "x"}), "WRONGTYPE", 8525),
        (lambda: client.atomic_add(space, "k", {"s": 1}), "WRONGTYPE", 8525),
        (lambda: list(client.search(space, {"n": "x"})), "WRONGTYPE", 8525),
        (lambda: client.sorted_search(space, {}, "zz", 1, "max"), "UNKNOWNATTR", 8520),
    ]
    for call, name, status in cases:
        with pytest.raises(ClientError) as e:
            call()
        assert e.value.symbol() == "HYPERDEX_CLIENT_" + name, (name, e.value)
        assert e.value.status() == status


def test_notfound_is_none_and_cmpfail_is_false(client, space):
    assert client.get(space, "absent") is None
    assert client.delete(space, "absent") is None
    assert client.atomic_add(space, "absent", {"n": 1}) is None
    assert client.cond_put(space, "absent", {"n": 1}, {"n": 2}) is None
    assert client.put(space, "k", {"n": 1}) is True
    assert client.put_if_not_exist(space, "k", {"n": 5}) is False
    assert client.cond_put(space, "k", {"n": 2}, {"n": 3}) is False
    assert client.get(space, "k") == {"n": 1, "s": ""}
    # A mutation that cannot be applied is CMPFAIL too (§0.2).
    assert client.put(space, "big", {"n": 2 ** 63 - 1}) is True
    assert client.atomic_add(space, "big", {"n": 1}) is False
    assert client.atomic_div(space, "k", {"n": 0}) is False
    assert client.get(space, "big")["n"] == 2 ** 63 - 1


def test_errors_compare_by_status():
    assert ClientError(8449, "HYPERDEX_CLIENT_NOTFOUND", "a") == ClientError(8449, "HYPERDEX_CLIENT_NOTFOUND", "b")
    assert ClientError(8449, "X", "a") != ClientError(8451, "Y", "a")
    assert repr(AdminError(8775, "HYPERDEX_ADMIN_BADSPACE", "m")) == "AdminError(8775, 'HYPERDEX_ADMIN_BADSPACE', 'm')"


def test_admin_errors(admin, make_space):
    with pytest.raises(AdminError) as e:
        admin.add_space("space broken key k attributes int")
    assert e.value.status() == 8775 and e.value.symbol() == "HYPERDEX_ADMIN_BADSPACE"
    assert "line 1" in e.value.message() and "column" in e.value.message()
    name = make_space("key k")
    with pytest.raises(AdminError) as e:
        admin.add_space("space %s key k" % name)
    assert e.value.symbol() == "HYPERDEX_ADMIN_DUPLICATE"
    with pytest.raises(AdminError) as e:
        admin.rm_space("no_such_space_here")
    assert e.value.symbol() == "HYPERDEX_ADMIN_NOTFOUND"


def test_unreachable_coordinator_is_coordfail():
    from conftest import free_cluster_port
    c = tessera.client.Client("127.0.0.1", free_cluster_port())
    with pytest.raises(ClientError) as e:
        c.get("s", "k")
    assert e.value.symbol() == "HYPERDEX_CLIENT_COORDFAIL"
