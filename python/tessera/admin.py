"""``tessera.admin``: spaces and the cluster (HyperDex's ``hyperdex.admin``,
API.md §7 and §0.2).

>>> from tessera.admin import Admin
>>> a = Admin('127.0.0.1', 1982)
>>> a.add_space('space phonebook key username attributes first, last, int phone '
...             'subspace first, last, phone create 8 partitions tolerate 1 failure')
True
>>> a.list_spaces()
['phonebook']

Errors raise ``AdminError`` (also ``HyperDexAdminException``) with
``status()``, ``symbol()`` (``HYPERDEX_ADMIN_...``) and ``message()``.

Thread safety: an Admin is safe to use from several threads at once; each
call releases the GIL while it waits on the coordinator.

Layouts change live (API.md §12.2): ``add_subspace``, ``rm_subspace``,
``add_index``, ``rm_index`` and ``relayout`` return once the coordinator
accepted the change; a new part is built by the daemons in the background
and searches use it once it is ready (``list_indices`` and ``show-config``
show its state).

What Tessera's server does not do yet, and so raises ``AdminError``
COORDFAIL naming it: changing a space's fault tolerance, renaming a space
(``mv_space``) and performance counters.
"""

from tessera import _core
from tessera._errors import AdminError, HyperDexAdminException

__all__ = ["Admin", "AdminError", "HyperDexAdminException", "Subspace", "Index"]

_COORDFAIL = (8774, "HYPERDEX_ADMIN_COORDFAIL")


def _unsupported(what, why):
    return AdminError(_COORDFAIL[0], _COORDFAIL[1],
                      "%s is not supported by this Tessera server: %s" % (what, why))


class Subspace(object):
    """One subspace of a space: ``identifier`` (0 is the key subspace, then
    the declared subspaces in order) and ``attributes`` (names)."""

    __slots__ = ("identifier", "attributes")

    def __init__(self, identifier, attributes):
        self.identifier = identifier
        self.attributes = list(attributes)

    def __eq__(self, other):
        if isinstance(other, Subspace):
            return (self.identifier, self.attributes) == (other.identifier, other.attributes)
        return NotImplemented

    def __repr__(self):
        return "Subspace(%r, %r)" % (self.identifier, self.attributes)


class Index(object):
    """One local index of a space: ``identifier`` (what ``rm_index`` takes;
    unique within its space), ``attribute`` (its name; a document index
    shows the attribute only), ``state`` (``'ready'``, ``'building 37%'``)
    and ``space`` (its space's name, so that ``rm_index(index)`` needs no
    other argument)."""

    __slots__ = ("identifier", "attribute", "state", "space")

    def __init__(self, identifier, attribute, state="ready", space=None):
        self.identifier = identifier
        self.attribute = attribute
        self.state = state
        self.space = space

    def __eq__(self, other):
        if isinstance(other, Index):
            return (self.identifier, self.attribute) == (other.identifier, other.attribute)
        return NotImplemented

    def __repr__(self):
        return "Index(%r, %r)" % (self.identifier, self.attribute)


class Admin(object):
    """Administers a cluster through one coordinator member.

    ``Admin(host, port=1982)``: no network activity until the first call.
    Every method blocks until the coordinator answered (with the GIL
    released) and returns its value or raises ``AdminError``.

    ``tls_ca`` (a path to the cluster CA's PEM file) connects with TLS;
    ``admin_token_file`` (a path) carries the admin credential that a
    coordinator started with ``--admin-token-file`` requires for
    configuration changes (UNAUTHORIZED without it).
    """

    def __init__(self, host="127.0.0.1", port=1982, tls_ca=None, admin_token_file=None):
        self._core = _core.AdminCore(
            str(host),
            int(port),
            None if tls_ca is None else str(tls_ca),
            None if admin_token_file is None else str(admin_token_file),
        )
        self.host = host
        self.port = port

    def __repr__(self):
        return "Admin(%r, %r)" % (self.host, self.port)

    # -- spaces

    def add_space(self, description):
        """Creates a space from its description (API.md §8). Returns True.
        BADSPACE names the line and column of a mistake; DUPLICATE when the
        name exists."""
        return self._core.add_space(_text(description))

    def rm_space(self, name):
        """Removes a space and its data. Returns True; NOTFOUND when there is none."""
        return self._core.rm_space(_text(name))

    def list_spaces(self):
        """The names of every space, as a list of str."""
        return self._core.list_spaces()

    def list_subspaces(self, space):
        """The space's subspaces as Subspace objects, the key subspace (0)
        first; an identifier is stable (removing one subspace renumbers no
        other) and is what rm_subspace takes. [] for an unknown space."""
        return [Subspace(i, attrs) for i, attrs in self._core.list_subspaces(_text(space))]

    def list_indices(self, space):
        """The space's local indexes (its ``index`` clauses and those added
        since) as Index objects with their state; [] for an unknown space."""
        name = _text(space)
        return [Index(i, attr, state, name) for i, attr, state in self._core.list_indices(name)]

    def add_subspace(self, space, attributes):
        """Adds a subspace on ``attributes`` (a list of names), built live.
        Returns its identifier once the coordinator accepted it. NOTFOUND
        (space or attribute), DUPLICATE (the subspace exists), BADSPACE (the
        key, a repeated or an unhashable attribute)."""
        if isinstance(attributes, (str, bytes)):
            attributes = [attributes]
        return self._core.add_subspace(_text(space), [_text(a) for a in attributes])

    def rm_subspace(self, space, n):
        """Drops subspace ``n`` (a Subspace or its identifier; never 0, the
        key subspace, which is COORDFAIL) live. Returns True; NOTFOUND for a
        subspace the space does not have."""
        if isinstance(n, Subspace):
            n = n.identifier
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValueError("rm_subspace takes a Subspace or an int id, not %r" % (n,))
        return self._core.rm_subspace(_text(space), n)

    def add_index(self, space, attribute):
        """Adds a local index on ``attribute`` or a document path
        ``docattr.path``, built live; existing objects are indexed in the
        background and searches use the index once it is ready. Returns
        True. NOTFOUND (space or attribute), DUPLICATE (the index exists),
        COORDFAIL (a document without a path, a path on a non-document, a
        type no index can hold)."""
        self._core.add_index(_text(space), _text(attribute))
        return True

    def add_global_index(self, space, attribute, partitions=None):
        """Adds a global secondary index on ``attribute`` (a string, int,
        float or timestamp), range-partitioned into ``partitions``
        indexlets (default: the space's partitions), built live. Returns
        True. NOTFOUND (space or attribute), DUPLICATE, BADSPACE (the key,
        a document or container attribute, a path)."""
        self._core.add_global_index(_text(space), _text(attribute), partitions)
        return True

    def rm_global_index(self, space, attribute):
        """Drops the global index on ``attribute`` live. Returns True;
        NOTFOUND when the space has none."""
        return self._core.rm_global_index(_text(space), _text(attribute))

    def rm_index(self, idx):
        """Drops an index live: an Index from list_indices, or an int id
        (then of the one space that has an index with that id; COORDFAIL
        when several do). Returns True. NOTFOUND when there is none;
        COORDFAIL when a subspace uses the attribute; ValueError for an id
        that is not an int."""
        space = None
        if isinstance(idx, Index):
            idx, space = idx.identifier, idx.space
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise ValueError("rm_index takes an Index or an int id, not %r" % (idx,))
        return self._core.rm_index(idx, space)

    def relayout(self, space, description):
        """Moves the space to the subspaces and indexes of ``description``
        (the same space: name, key and attributes unchanged, else BADSPACE)
        live: the new parts are built first, then the omitted ones dropped.
        Returns True once the coordinator accepted the change."""
        return self._core.relayout(_text(space), _text(description))

    def validate_space(self, description):
        """Parses and checks a description locally, sending nothing. Returns
        True, or raises BADSPACE naming the problem's line and column."""
        return _core.validate_space(_text(description))

    def mv_space(self, source, target):
        """Not supported: raises AdminError COORDFAIL."""
        raise _unsupported("mv_space", "spaces cannot be renamed")

    def fault_tolerance(self, space, tolerance):
        """Not supported: raises AdminError COORDFAIL (a space's fault
        tolerance is fixed by its description)."""
        raise _unsupported("fault_tolerance", "a space's fault tolerance is fixed when it is created")

    # -- the cluster

    def dump_config(self):
        """The configuration as a dict: ``cluster`` (always 0: Tessera has no
        cluster id), ``version`` (the configuration's epoch), ``servers``
        (a list of {'id', 'location', 'state'} with state 'AVAILABLE' or
        'NOT_AVAILABLE'), ``read_only`` and ``spaces`` (names)."""
        return self._core.dump_config()

    def wait_until_stable(self, timeout=60.0):
        """Blocks until every available daemon runs the current configuration
        and no state transfer is running; returns True. Raises TIMEOUT after
        ``timeout`` seconds."""
        return self._core.wait_until_stable(float(timeout))

    def backup(self, path):
        """Takes a consistent backup of the whole cluster into the directory
        ``path``, which must not exist or be empty (docs/design/backup.md).
        Writes fail with READONLY only while the daemons freeze their
        objects; the copy is made after writes resume. Returns a dict:
        ``epoch``, ``pause_ms`` (how long writes were refused),
        ``objects``, ``regions``, ``bytes``. Raises LOCALERROR when the
        directory exists or cannot be written, or a daemon fails. Restore
        with ``tessera restore PATH --data DIR``."""
        return self._core.backup(str(path))

    def read_only(self, flag=True):
        """Sets (True) or clears (False) the cluster-wide read-only flag in
        the configuration. Returns True. While it is set, every write fails
        with READONLY (a ClientError); reads and searches keep working.
        Daemons apply it as they install the new configuration, so
        wait_until_stable() first when the next write must see it."""
        return self._core.set_read_only(bool(flag))

    def set_read_only(self):
        """Sets the read-only flag (see read_only()). Returns True."""
        return self._core.set_read_only(True)

    def set_read_write(self):
        """Clears the read-only flag. Returns True."""
        return self._core.set_read_only(False)

    def server_offline(self, server_id):
        """Takes the daemon with this id out of every replica chain; it keeps its data. Returns True."""
        return self._core.server("offline", int(server_id))

    def server_online(self, server_id):
        """Lets an offline daemon take regions again. Returns True."""
        return self._core.server("online", int(server_id))

    def server_kill(self, server_id):
        """Marks the daemon offline and tells it to stop. Returns True."""
        return self._core.server("kill", int(server_id))

    def server_forget(self, server_id):
        """Removes the daemon from the configuration for good. Returns True."""
        return self._core.server("forget", int(server_id))

    def enable_perf_counters(self):
        """Not supported: raises AdminError COORDFAIL."""
        raise _unsupported("enable_perf_counters", "the daemons report no performance counters")

    def disable_perf_counters(self):
        """Not supported: raises AdminError COORDFAIL."""
        raise _unsupported("disable_perf_counters", "the daemons report no performance counters")


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value
