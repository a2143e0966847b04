"""HyperDex's quick-start flow, as its users wrote it, on Tessera."""

import uuid

from tessera.client import Client, Range, Regex
from tessera.admin import Admin


def test_phonebook_quick_start(cluster):
    a = Admin(cluster.host, cluster.port)
    space = "phonebook_" + uuid.uuid4().hex[:8]
    assert a.add_space(
        "space %s key username attributes first, last, int phone "
        "subspace first, last, phone create 8 partitions tolerate 1 failure" % space) is True
    try:
        c = Client(cluster.host, cluster.port)
        assert c.put(space, "jsmith1", {"first": "John", "last": "Smith", "phone": 6075551024}) is True
        assert c.get(space, "jsmith1") == {"first": "John", "last": "Smith", "phone": 6075551024}

        # Search by any attribute; results include the key.
        assert list(c.search(space, {"first": "John"})) == [
            {"username": "jsmith1", "first": "John", "last": "Smith", "phone": 6075551024}]
        assert c.put(space, "jd", {"first": "John", "last": "Doe", "phone": 6075557878}) is True
        assert sorted(o["username"] for o in c.search(space, {"first": "John"})) == ["jd", "jsmith1"]
        assert [o["username"] for o in c.search(space, {"first": "John", "last": "Doe"})] == ["jd"]
        assert sorted(o["username"] for o in c.search(space, {"phone": (6075550000, 6075559999)})) == ["jd", "jsmith1"]
        assert [o["username"] for o in c.search(space, {"phone": Range(6075551000, 6075552000)})] == ["jsmith1"]
        assert [o["username"] for o in c.search(space, {"last": Regex("^Smi")})] == ["jsmith1"]

        # A partial update keeps the other attributes.
        assert c.put(space, "jsmith1", {"phone": 5551212}) is True
        assert c.get(space, "jsmith1") == {"first": "John", "last": "Smith", "phone": 5551212}
        assert c.get_partial(space, "jsmith1", ["phone", "first"]) == {"phone": 5551212, "first": "John"}

        # Delete, then the object is gone everywhere.
        assert c.delete(space, "jd") is True
        assert c.get(space, "jd") is None
        assert c.delete(space, "jd") is None
        assert [o["username"] for o in c.search(space, {"first": "John"})] == ["jsmith1"]
        assert c.count(space, {}) == 1

        # The search fixing every attribute of the subspace contacts one region.
        plan = c.search_describe(space, {"first": "John", "last": "Smith", "phone": 5551212})
        assert isinstance(plan, str) and plan

        subspaces = a.list_subspaces(space)
        assert [(s.identifier, s.attributes) for s in subspaces] == [
            (0, ["username"]), (1, ["first", "last", "phone"])]
    finally:
        assert a.rm_space(space) is True
    assert space not in a.list_spaces()
