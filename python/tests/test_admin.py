"""tessera.admin (API.md §7, §0.2)."""

import time
import uuid

import pytest

from tessera.admin import Admin, AdminError, Index, Subspace
from tessera.client import Client, ClientError, GreaterEqual, LessThan


def test_spaces_subspaces_and_indices(admin):
    name = "adm_" + uuid.uuid4().hex[:8]
    assert admin.validate_space("space %s key k attributes a, int b subspace a index b" % name) is True
    assert admin.add_space("space %s key k attributes a, int b, c, list(int) l, float f "
                           "subspace a subspace b, c index f index l" % name) is True
    try:
        assert name in admin.list_spaces()
        assert admin.list_subspaces(name) == [Subspace(0, ["k"]), Subspace(1, ["a"]), Subspace(2, ["b", "c"])]
        # The index clauses, numbered after the subspaces, all ready.
        assert admin.list_indices(name) == [Index(3, "f"), Index(4, "l")]
        assert [i.state for i in admin.list_indices(name)] == ["ready", "ready"]
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


def _refused(call, symbol):
    with pytest.raises(AdminError) as e:
        call()
    assert e.value.symbol() == symbol, e.value.message()
    return e.value.message()


def _wait_ready(admin, name, identifier, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        states = [i.state for i in admin.list_indices(name) if i.identifier == identifier]
        if states == ["ready"]:
            return
        assert time.monotonic() < deadline, "index %d still %s" % (identifier, states)
        time.sleep(0.1)


def test_indexes_are_added_and_removed_live(admin, client, make_space):
    name = make_space("key k attributes int n, document d, list(int) l")
    for i in range(50):
        assert client.put(name, "k%d" % i, {"n": i % 5}) is True
    assert admin.add_index(name, "n") is True
    (index,) = admin.list_indices(name)
    assert (index.identifier, index.attribute, index.space) == (1, "n", name)
    assert index.state.startswith("building") or index.state == "ready"
    # The daemons index the existing objects and the coordinator marks the
    # index ready; searches see every object throughout.
    _wait_ready(admin, name, index.identifier)
    assert sorted(o["k"] for o in client.search(name, {"n": 3})) == sorted("k%d" % i for i in range(3, 50, 5))
    _refused(lambda: admin.add_index(name, "n"), "HYPERDEX_ADMIN_DUPLICATE")
    _refused(lambda: admin.add_index(name, "nope"), "HYPERDEX_ADMIN_NOTFOUND")
    _refused(lambda: admin.add_index("no_such_space", "n"), "HYPERDEX_ADMIN_NOTFOUND")
    # A document is indexed by a path inside it, and only a document has paths.
    _refused(lambda: admin.add_index(name, "d"), "HYPERDEX_ADMIN_COORDFAIL")
    _refused(lambda: admin.add_index(name, "n.x"), "HYPERDEX_ADMIN_COORDFAIL")
    _refused(lambda: admin.add_index(name, "l"), "HYPERDEX_ADMIN_COORDFAIL")
    assert admin.add_index(name, "d.a.b") is True
    doc = [i for i in admin.list_indices(name) if i.identifier != index.identifier]
    assert [(i.identifier, i.attribute) for i in doc] == [(2, "d")]
    with pytest.raises(ValueError):
        admin.rm_index("3")
    assert admin.rm_index(index) is True
    _refused(lambda: admin.rm_index(index), "HYPERDEX_ADMIN_NOTFOUND")
    # Index ids are per space, so other tests' spaces may share id 2: the
    # Index object names its space.
    assert admin.rm_index(doc[0]) is True
    assert admin.list_indices(name) == []
    _refused(lambda: admin.rm_index(987654), "HYPERDEX_ADMIN_NOTFOUND")
    for call in (lambda: admin.mv_space(name, "other"), lambda: admin.fault_tolerance(name, 2)):
        with pytest.raises(AdminError) as e:
            call()
        assert "not supported" in e.value.message()


def test_subspaces_are_added_and_removed_live(admin, make_space):
    name = make_space("key k attributes a, int b, list(int) l subspace a")
    assert admin.add_subspace(name, ["b", "a"]) == 2
    assert admin.list_subspaces(name) == [Subspace(0, ["k"]), Subspace(1, ["a"]), Subspace(2, ["b", "a"])]
    _refused(lambda: admin.add_subspace(name, ["a"]), "HYPERDEX_ADMIN_DUPLICATE")
    _refused(lambda: admin.add_subspace(name, ["k"]), "HYPERDEX_ADMIN_BADSPACE")
    _refused(lambda: admin.add_subspace(name, ["l"]), "HYPERDEX_ADMIN_BADSPACE")
    _refused(lambda: admin.add_subspace(name, ["zz"]), "HYPERDEX_ADMIN_NOTFOUND")
    _refused(lambda: admin.rm_subspace(name, 0), "HYPERDEX_ADMIN_COORDFAIL")
    _refused(lambda: admin.rm_subspace(name, 9), "HYPERDEX_ADMIN_NOTFOUND")
    with pytest.raises(ValueError):
        admin.rm_subspace(name, "1")
    assert admin.rm_subspace(name, 1) is True
    # Subspace 2 keeps its number.
    assert admin.list_subspaces(name) == [Subspace(0, ["k"]), Subspace(2, ["b", "a"])]
    # relayout: same space, other subspaces; a changed key is refused.
    message = _refused(lambda: admin.relayout(name, "space %s key int k attributes a, int b, list(int) l" % name),
                       "HYPERDEX_ADMIN_BADSPACE")
    assert "key" in message
    assert admin.relayout(name, "space %s key k attributes a, int b, list(int) l subspace b, a subspace a "
                          "index b" % name) is True
    subspaces = admin.list_subspaces(name)
    assert [s.attributes for s in subspaces] == [["k"], ["b", "a"], ["a"]]
    assert subspaces[2].identifier == 3, "ids are never reused"
    assert [i.attribute for i in admin.list_indices(name)] == ["b"]


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


def test_backup_writes_a_verified_directory(admin, client, make_space, tmp_path):
    name = make_space("key k attributes int v")
    for i in range(30):
        assert client.put(name, "k%d" % i, {"v": i}) is True
    target = tmp_path / "backup"
    report = admin.backup(target)
    # Other tests' spaces may hold objects too: at least these 30.
    assert report["objects"] >= 30
    assert isinstance(report["pause_ms"], float)
    manifest = (target / "MANIFEST").read_text().splitlines()
    assert manifest[0] == "tessera-backup 1"
    assert manifest[-1] == "end %d" % report["regions"]
    # Writes resumed.
    assert client.put(name, "after", {"v": 1}) is True
    # An existing, non-empty directory is refused and left as it was.
    with pytest.raises(AdminError) as e:
        admin.backup(target)
    assert e.value.symbol() == "HYPERDEX_ADMIN_LOCALERROR"
    assert "exists and is not empty" in e.value.message()
    assert (target / "MANIFEST").read_text().splitlines() == manifest


def test_global_indexes_are_added_searched_and_removed_live(admin, client, make_space):
    name = make_space("key k attributes name, int n, document d")
    names = ["apple", "apricot", "banana", "kiwi", "mango", "zebra", "", "a\x00b"]
    objects = {}
    for i in range(80):
        objects["k%d" % i] = names[i % len(names)] + str(i % 3)
        assert client.put(name, "k%d" % i, {"name": objects["k%d" % i], "n": i}) is True
    assert admin.add_global_index(name, "name", 16) is True
    _refused(lambda: admin.add_global_index(name, "name"), "HYPERDEX_ADMIN_DUPLICATE")
    _refused(lambda: admin.add_global_index(name, "k"), "HYPERDEX_ADMIN_BADSPACE")
    _refused(lambda: admin.add_global_index(name, "d"), "HYPERDEX_ADMIN_BADSPACE")
    _refused(lambda: admin.add_global_index(name, "nope"), "HYPERDEX_ADMIN_NOTFOUND")
    # A global index is neither a subspace nor a local index of HyperDex's API.
    assert [s.identifier for s in admin.list_subspaces(name)] == [0]
    assert admin.list_indices(name) == []
    # Searches are exact while it builds and after (a string range: the
    # index reads the indexlets of names from "ap" to "b" once ready).
    for _ in range(20):
        found = sorted(o["k"] for o in client.search(name, {"name": [GreaterEqual("ap"), LessThan("b")]}))
        assert found == sorted(k for k, v in objects.items() if "ap" <= v < "b")
        time.sleep(0.1)
    assert admin.rm_global_index(name, "name") is True
    _refused(lambda: admin.rm_global_index(name, "name"), "HYPERDEX_ADMIN_NOTFOUND")
