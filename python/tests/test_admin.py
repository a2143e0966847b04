"""tessera.admin (API.md §7, §0.2)."""

import uuid

import pytest

from tessera.admin import Admin, AdminError, Index, Subspace
from tessera.client import Client, ClientError


def test_spaces_subspaces_and_indices(admin):
    name = "adm_" + uuid.uuid4().hex[:8]
    assert admin.validate_space("space %s key k attributes a, int b subspace a index b" % name) is True
    assert admin.add_space("space %s key k attributes a, int b, c, list(int) l, float f "
                           "subspace a subspace b, c index f index l" % name) is True
    try:
        assert name in admin.list_spaces()
        assert admin.list_subspaces(name) == [Subspace(0, ["k"]), Subspace(1, ["a"]), Subspace(2, ["b", "c"])]
        # Hashable attributes of subspaces and index clauses (a list is not indexed).
        assert admin.list_indices(name) == [Index(1, "a"), Index(2, "b"), Index(3, "c"), Index(5, "f")]
        assert admin.list_subspaces("no_such_space") == []
        assert admin.list_indices("no_such_space") == []
    finally:
        assert admin.rm_space(name) is True
    assert name not in admin.list_spaces()


def test_validate_space_names_the_problem():
    a = Admin("127.0.0.1", 1)  # validate_space sends nothing
    with pytest.raises(AdminError) as e:
        a.validate_space("space x key k attributes\n  int")
    assert e.value.symbol() == "HYPERDEX_ADMIN_BADSPACE"
    assert "line 2" in e.value.message()


def test_index_operations_are_refused_clearly(admin, make_space):
    name = make_space("key k attributes int n, document d")
    with pytest.raises(AdminError) as e:
        admin.add_index(name, "n")
    assert e.value.symbol() == "HYPERDEX_ADMIN_COORDFAIL"
    assert "add_index is not supported" in e.value.message()
    with pytest.raises(AdminError) as e:
        admin.add_index(name, "nope")
    assert e.value.symbol() == "HYPERDEX_ADMIN_NOTFOUND"
    with pytest.raises(AdminError) as e:
        admin.add_index("no_such_space", "n")
    assert e.value.symbol() == "HYPERDEX_ADMIN_NOTFOUND"
    with pytest.raises(ValueError):
        admin.rm_index("3")
    with pytest.raises(AdminError) as e:
        admin.rm_index(3)
    assert "rm_index is not supported" in e.value.message()
    for call in (lambda: admin.mv_space(name, "other"), lambda: admin.fault_tolerance(name, 2),
                 lambda: admin.backup("b")):
        with pytest.raises(AdminError) as e:
            call()
        assert "not supported" in e.value.message()


def test_dump_config_and_wait_until_stable(admin, cluster):
    assert admin.wait_until_stable() is True
    config = admin.dump_config()
    assert config["cluster"] == 0
    assert isinstance(config["version"], int) and config["version"] > 0
    assert len(config["servers"]) == 3
    ports = sorted(int(s["location"].rsplit(":", 1)[1]) for s in config["servers"])
    assert ports == [cluster.port + 30 + i for i in range(3)]
    assert all(s["state"] == "AVAILABLE" for s in config["servers"])
    assert config["read_only"] is False


def test_read_only_refuses_writes_and_keeps_reads(admin, client, make_space):
    space = make_space("key k attributes int v")
    assert client.put(space, "a", {"v": 1}) is True
    assert admin.set_read_only() is True
    try:
        # Every daemon runs the read-only configuration once stable.
        assert admin.wait_until_stable() is True
        with pytest.raises(ClientError) as e:
            client.put(space, "a", {"v": 2})
        assert e.value.symbol() == "HYPERDEX_CLIENT_READONLY"
        with pytest.raises(ClientError) as e:
            client.atomic_add(space, "b", {"v": 1})
        assert e.value.symbol() == "HYPERDEX_CLIENT_READONLY"
        assert client.get(space, "a") == {"v": 1}
        assert client.get(space, "b") is None
    finally:
        assert admin.set_read_write() is True
    assert admin.wait_until_stable() is True
    assert client.put(space, "a", {"v": 3}) is True
    assert client.get(space, "a") == {"v": 3}


def test_read_only_flag(admin):
    """The flag is in the configuration."""
    assert admin.set_read_only() is True
    try:
        assert admin.dump_config()["read_only"] is True
    finally:
        assert admin.set_read_write() is True
    assert admin.dump_config()["read_only"] is False
    assert admin.read_only(True) is True
    assert admin.dump_config()["read_only"] is True
    assert admin.read_only(False) is True
    assert admin.dump_config()["read_only"] is False


def test_server_operations_on_an_unknown_server(admin):
    for op in (admin.server_offline, admin.server_online, admin.server_kill, admin.server_forget):
        with pytest.raises(AdminError) as e:
            op(987654321)
        assert e.value.symbol() == "HYPERDEX_ADMIN_NOTFOUND"
