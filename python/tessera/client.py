"""``tessera.client``: store, fetch and search objects (HyperDex's
``hyperdex.client``, API.md §3).

>>> from tessera.client import Client, Range
>>> c = Client('127.0.0.1', 1982)
>>> c.put('phonebook', 'jsmith', {'first': 'John', 'last': 'Smith', 'phone': 6075551024})
True
>>> c.get('phonebook', 'jsmith')
{'first': 'John', 'last': 'Smith', 'phone': 6075551024}
>>> [o['username'] for o in c.search('phonebook', {'phone': Range(6075550000, 6075559999)})]
['jsmith']

Results (API.md §3.4): a mutation returns ``True`` when applied, ``None``
when the key has no object (NOTFOUND) and ``False`` when nothing changed
(CMPFAIL: a predicate failed, the object exists for ``put_if_not_exist``,
or the mutation could not be applied — overflow, division by zero, a bad
document path). ``get`` returns a ``dict`` without the key, or ``None``.
``count`` and ``group_*`` return a number. Every other outcome raises
``ClientError`` (``HyperDexClientException``).

Values (API.md §2.2–2.3): ``str`` (stored as UTF-8) or ``bytes`` in, ``str``
out when the stored bytes are valid UTF-8 else ``bytes``; ``int``;
``float``; ``list``, ``set`` and ``dict`` (a map) of strings, ints or floats,
one kind per container; ``Document`` for documents; ``datetime.datetime``
for timestamps (naive values are UTC; results are naive UTC).

Asynchronous forms: every method ``m`` except ``search``, ``sorted_search``,
``loop`` and ``microtransaction_init`` has ``async_m``, which checks its
arguments at once (raising what would fail before sending), starts the
operation in the background and returns a ``Deferred``; ``m(...)`` returns
what ``async_m(...).wait()`` returns.

Authorization (API.md §10, ``docs/design/authorization.md``): on a space
``with authorization``, ``put(..., secret=...)`` creates an object with its
secret (``bytes`` or ``str``), and every later call passes ``auth=[...]``:
macaroons minted with that secret, as ``pymacaroons.Macaroon`` objects or
their ``serialize()`` text, discharges after the macaroon they discharge.
``search``, ``sorted_search``, ``count`` and ``group_*`` take ``auth=`` too
and see exactly the objects one of the macaroons authorizes. Failures raise
``ClientError`` UNAUTHORIZED.
"""

from tessera import _core
from tessera._errors import ClientError, HyperDexClientException
from tessera._values import Document

__all__ = [
    "Client", "Deferred", "Iterator", "Microtransaction", "Document",
    "ClientError", "HyperDexClientException",
    "Predicate", "Equals", "LessThan", "LessEqual", "GreaterThan", "GreaterEqual", "Range",
    "Regex", "LengthEquals", "LengthLessEqual", "LengthGreaterEqual", "Contains",
]

Deferred = _core.Deferred
Iterator = _core.Iterator


# ---------------------------------------------------------------- predicates

class Predicate(object):
    """Base of the predicate classes. A predicates dict maps an attribute
    name (or ``doc.path``) to a value (equality), a ``(lo, hi)`` tuple of
    one type (lo <= x <= hi), a predicate object, or a list of these (all
    must hold)."""

    __slots__ = ()

    def _tessera_checks(self):
        raise NotImplementedError

    def __eq__(self, other):
        if type(self) is type(other):
            return self._tessera_checks() == other._tessera_checks()
        return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, repr(self._tessera_checks())))


def _predicate(name, op, doc):
    def __init__(self, value):
        self.value = value

    def _tessera_checks(self):
        return [(op, self.value)]

    def __repr__(self):
        return "%s(%r)" % (name, self.value)

    return type(name, (Predicate,), {
        "__slots__": ("value",), "__init__": __init__, "__doc__": doc,
        "_tessera_checks": _tessera_checks, "__repr__": __repr__,
    })


Equals = _predicate("Equals", "eq", "Equals(v): the attribute equals v.")
LessThan = _predicate("LessThan", "lt", "LessThan(v): the attribute is < v (strings bytewise, numbers, timestamps).")
LessEqual = _predicate("LessEqual", "le", "LessEqual(v): the attribute is <= v.")
GreaterThan = _predicate("GreaterThan", "gt", "GreaterThan(v): the attribute is > v.")
GreaterEqual = _predicate("GreaterEqual", "ge", "GreaterEqual(v): the attribute is >= v.")
Regex = _predicate(
    "Regex", "regex",
    "Regex(pattern): the string attribute matches pattern somewhere (HyperDex's dialect: "
    "literal bytes, '.', 'c*', '^' at the start, '$' at the end, '\\\\x' escapes).")
LengthEquals = _predicate("LengthEquals", "len_eq", "LengthEquals(n): string bytes, elements or map entries == n.")
LengthLessEqual = _predicate("LengthLessEqual", "len_le", "LengthLessEqual(n): the length is <= n.")
LengthGreaterEqual = _predicate("LengthGreaterEqual", "len_ge", "LengthGreaterEqual(n): the length is >= n.")
Contains = _predicate("Contains", "contains", "Contains(e): a list or set holds e, or a map holds the key e.")


class Range(Predicate):
    """Range(lo, hi): lo <= attribute <= hi (both inclusive)."""

    __slots__ = ("lower", "upper")

    def __init__(self, lower, upper):
        self.lower = lower
        self.upper = upper

    def _tessera_checks(self):
        return [("ge", self.lower), ("le", self.upper)]

    def __repr__(self):
        return "Range(%r, %r)" % (self.lower, self.upper)


# ---------------------------------------------------------------- method tables

_FLAG = (" Returns True when applied, None when the key has no object (NOTFOUND), "
         "False when nothing changed (CMPFAIL: a predicate failed, or the operation "
         "could not be applied, e.g. overflow or division by zero).")
_COND = " Only if every predicate holds on the object, atomically with the write."
_GROUP = (" On every object matching the predicates, each re-checked atomically with its "
          "own write (not atomic across objects). Returns the number of objects changed, "
          "once every change has been applied.")

#: family name -> what it does to each attribute. Each has X, cond_X, group_X.
_ATTR_FAMILIES = [
    ("atomic_add", "Adds the operand to each int or float attribute (or numeric document field); int overflow fails."),
    ("atomic_sub", "Subtracts the operand from each numeric attribute; int overflow fails."),
    ("atomic_mul", "Multiplies each numeric attribute by the operand; int overflow fails."),
    ("atomic_div", "Divides each numeric attribute by the operand (ints truncate; int division by zero fails)."),
    ("atomic_mod", "Replaces each int attribute by its remainder modulo the operand (ints only)."),
    ("atomic_and", "Bitwise and of each int attribute with the operand (ints only)."),
    ("atomic_or", "Bitwise or of each int attribute with the operand (ints only)."),
    ("atomic_xor", "Bitwise xor of each int attribute with the operand (ints only)."),
    ("atomic_min", "Stores the minimum of each numeric attribute and the operand."),
    ("atomic_max", "Stores the maximum of each numeric attribute and the operand."),
    ("string_prepend", "Concatenates the operand (str or bytes) before each string attribute."),
    ("string_append", "Concatenates the operand (str or bytes) after each string attribute."),
    ("string_ltrim", "Drops N bytes (a non-negative int) from the start of each string attribute."),
    ("string_rtrim", "Drops N bytes (a non-negative int) from the end of each string attribute."),
    ("list_lpush", "Pushes the operand at the front of each list attribute (or document array)."),
    ("list_rpush", "Pushes the operand at the back of each list attribute (or document array)."),
    ("set_add", "Adds the operand to each set attribute."),
    ("set_remove", "Removes the operand from each set attribute (absent: no change)."),
    ("set_union", "Stores the union of each set attribute with the operand set."),
    ("set_intersect", "Stores the intersection of each set attribute with the operand set."),
    ("map_remove", "Removes the entry with the given map key from each map attribute (absent: no change)."),
    ("document_rename", "Moves each document field named by 'attr.path' to the new path given (relative to the document root); a missing source fails."),
    ("document_unset", "Removes each document field named by 'attr.path' (the value is ignored); a missing field fails."),
]

#: families taking mapattributes: attribute -> {map key: operand}.
_MAP_FAMILIES = [
    ("map_add", "Inserts or overwrites each given map key with its value."),
] + [
    ("map_atomic_" + op, "Applies atomic_%s to the value under each given map key (a missing key starts from 0)." % op)
    for op in ("add", "sub", "mul", "div", "mod", "and", "or", "xor", "min", "max")
] + [
    ("map_string_prepend", "Prepends to the string under each given map key (a missing key starts from '')."),
    ("map_string_append", "Appends to the string under each given map key (a missing key starts from '')."),
]

_ASYNC_DOC = ("Starts {name} in the background and returns a Deferred; its wait() returns "
              "what {name} returns, or raises. Argument errors raise here.\n\n{doc}")


def _tokens(auth):
    """``auth=`` as a list of serialized macaroons (bytes): pymacaroons (or
    libmacaroons) objects are serialized, text is encoded; ``None`` stays
    ``None``. One macaroon alone may stand for a list of one."""
    if auth is None:
        return None
    if isinstance(auth, (str, bytes, bytearray)) or hasattr(auth, "serialize"):
        auth = [auth]
    tokens = []
    for m in auth:
        if hasattr(m, "serialize"):
            m = m.serialize()
        if isinstance(m, str):
            m = m.encode("utf-8")
        if not isinstance(m, (bytes, bytearray)):
            raise TypeError("auth takes macaroons or their serialized text, not %r" % (type(m).__name__,))
        tokens.append(bytes(m))
    return tokens


def _secret(secret):
    """``secret=`` as bytes (text is UTF-8 encoded)."""
    if secret is None or isinstance(secret, bytes):
        return secret
    if isinstance(secret, str):
        return secret.encode("utf-8")
    if isinstance(secret, bytearray):
        return bytes(secret)
    raise TypeError("secret must be bytes or str, not %r" % (type(secret).__name__,))


def _finish(function, owner, name, doc):
    function.__name__ = name
    function.__qualname__ = owner + "." + name
    function.__doc__ = doc
    return function


def _update_method(core_method, op, shape):
    """A method of one update operation calling ``core_method``
    (``ClientCore.call``, or ``ClientCore.start`` for ``async_X``).

    ``op`` is the name the core knows (``put``, ``cond_atomic_add``,
    ``group_del`` ...); ``shape`` names the arguments."""
    if shape == "key_attrs":
        def method(self, space, key, attributes, secret=None, auth=None):
            return core_method(self._core, op, space, key, None, attributes, _tokens(auth), _secret(secret))
    elif shape == "key_mattrs":
        def method(self, space, key, mapattributes, auth=None):
            return core_method(self._core, op, space, key, None, mapattributes, _tokens(auth))
    elif shape == "cond_attrs":
        def method(self, space, key, predicates, attributes, secret=None, auth=None):
            return core_method(self._core, op, space, key, predicates, attributes, _tokens(auth), _secret(secret))
    elif shape == "cond_mattrs":
        def method(self, space, key, predicates, mapattributes, auth=None):
            return core_method(self._core, op, space, key, predicates, mapattributes, _tokens(auth))
    elif shape == "group_attrs":
        def method(self, space, predicates, attributes, auth=None):
            return core_method(self._core, op, space, None, predicates, attributes, _tokens(auth))
    elif shape == "group_mattrs":
        def method(self, space, predicates, mapattributes, auth=None):
            return core_method(self._core, op, space, None, predicates, mapattributes, _tokens(auth))
    elif shape == "key":
        def method(self, space, key, auth=None):
            return core_method(self._core, op, space, key, None, None, _tokens(auth))
    elif shape == "cond_key":
        def method(self, space, key, predicates, auth=None):
            return core_method(self._core, op, space, key, predicates, None, _tokens(auth))
    elif shape == "group":
        def method(self, space, predicates, auth=None):
            return core_method(self._core, op, space, None, predicates, None, _tokens(auth))
    else:
        raise AssertionError(shape)
    return method


def _update_table():
    """(method name, core op, shape, docstring) of every update method."""
    table = [
        ("put", "put", "key_attrs",
         "Creates or updates the object under key: the named attributes take the given values, "
         "the others keep theirs (or their type's default on creation). Names may be document "
         "paths ('doc.a.b'). Returns True (False if a document path cannot be written)."),
        ("put_if_not_exist", "put_if_not_exist", "key_attrs",
         "Creates the object only if the key has none. Returns True when created, False (CMPFAIL) when it exists."),
        ("cond_put", "cond_put", "cond_attrs",
         "Updates the object only if every predicate holds, atomically." + _FLAG),
        ("cond_put_or_create", "cond_put_or_create", "cond_attrs",
         "Creates the object if the key has none (ignoring the predicates); else updates it only "
         "if every predicate holds. Returns True, or False when a predicate failed."),
        ("group_put", "group_put", "group_attrs", "Puts the attributes into every matching object." + _GROUP),
        ("delete", "del", "key",
         "Deletes the object under key. Returns True, or None when there was none (NOTFOUND)."),
        ("cond_del", "cond_del", "cond_key", "Deletes the object only if every predicate holds." + _FLAG),
        ("group_del", "group_del", "group",
         "Deletes every object matching the predicates ({} deletes all). Returns the number deleted."),
    ]
    for name, doc in _ATTR_FAMILIES:
        table.append((name, name, "key_attrs", doc + _FLAG))
        table.append(("cond_" + name, "cond_" + name, "cond_attrs", doc + _COND + _FLAG))
        table.append(("group_" + name, "group_" + name, "group_attrs", doc + _GROUP))
    for name, doc in _MAP_FAMILIES:
        doc += " mapattributes: {attribute: {map key: operand}}."
        table.append((name, name, "key_mattrs", doc + _FLAG))
        table.append(("cond_" + name, "cond_" + name, "cond_mattrs", doc + _COND + _FLAG))
        table.append(("group_" + name, "group_" + name, "group_mattrs", doc + _GROUP))
    return table


# ---------------------------------------------------------------- Client

class Client(object):
    """A connection to a Tessera cluster through one coordinator member.

    ``Client(host, port=1982)``: no network activity happens until the first
    call; an unreachable coordinator then raises ``ClientError`` COORDFAIL.
    The client fetches the cluster's configuration, follows its changes,
    and sends each operation straight to the daemons that hold the data.

    Thread safety: a Client is safe to use from several threads at once.
    Every call releases the GIL while it waits on the network, so threads
    (with one client each, or sharing one) run their operations in parallel.
    ``loop()`` returns finished operations of this client whichever thread
    started them, so threads that each drive a window with ``loop()`` should
    each have their own client.
    """

    def __init__(self, host="127.0.0.1", port=1982, tls_ca=None):
        # tls_ca: a path to the cluster CA's PEM file, to connect with TLS.
        self._core = _core.ClientCore(str(host), int(port), None if tls_ca is None else str(tls_ca))
        self.host = host
        self.port = port

    def __repr__(self):
        return "Client(%r, %r)" % (self.host, self.port)

    # -- reads

    def get(self, space, key, auth=None):
        """The object under key as a dict of every attribute except the key;
        None when there is none (NOTFOUND). On a space with authorization,
        UNAUTHORIZED unless a macaroon of ``auth`` allows reading it (a
        missing object included)."""
        return self._core.call("get", space, key, None, None, _tokens(auth))

    def async_get(self, space, key, auth=None):
        """Starts get in the background; the Deferred's wait() returns a dict or None."""
        return self._core.start("get", space, key, None, None, _tokens(auth))

    def get_partial(self, space, key, attributenames, auth=None):
        """The named attributes of the object under key as a dict; None when
        there is none. Naming the key raises DONTUSEKEY, an unknown name
        UNKNOWNATTR."""
        return self._core.call("get_partial", space, key, None, attributenames, _tokens(auth))

    def async_get_partial(self, space, key, attributenames, auth=None):
        """Starts get_partial in the background; wait() returns a dict or None."""
        return self._core.start("get_partial", space, key, None, attributenames, _tokens(auth))

    def count(self, space, predicates, auth=None):
        """The number of objects matching every predicate ({} counts all);
        on a space with authorization, of those ``auth`` allows reading."""
        return self._core.call("count", space, None, predicates, None, _tokens(auth))

    def async_count(self, space, predicates, auth=None):
        """Starts count in the background; wait() returns the number."""
        return self._core.start("count", space, None, predicates, None, _tokens(auth))

    def search_describe(self, space, predicates):
        """How a search with these predicates would run (the subspace chosen
        and the regions contacted), as text."""
        return self._core.call("search_describe", space, None, predicates, None)

    def async_search_describe(self, space, predicates):
        """Starts search_describe in the background; wait() returns the text."""
        return self._core.start("search_describe", space, None, predicates, None)

    # -- search

    def search(self, space, predicates, auth=None):
        """Every object matching every predicate ({} matches all), as a lazy
        Iterator of dicts that include the key; each key at most once.
        Results stream: they are fetched while you iterate. Argument errors
        (unknown space or attribute, wrong types) raise here; an error after
        the search started is yielded as a ClientError object and ends the
        iteration. On a space with authorization, only the objects one of
        the macaroons of ``auth`` allows reading."""
        return self._core.search(space, predicates, None, _tokens(auth))

    def sorted_search(self, space, predicates, sortby, limit, maxmin, auth=None):
        """At most ``limit`` matching objects ordered by the attribute
        ``sortby`` (which may be the key): ``maxmin`` 'max'/'maximize' for
        largest first, 'min'/'minimize' for smallest first (anything else:
        ValueError). An Iterator of dicts that include the key. Sorting by a
        container or document raises WRONGTYPE."""
        if maxmin in ("max", "maximize", b"max", b"maximize"):
            descending = True
        elif maxmin in ("min", "minimize", b"min", b"minimize"):
            descending = False
        else:
            raise ValueError("maxmin must be 'max', 'maximize', 'min' or 'minimize', not %r" % (maxmin,))
        limit = int(limit)
        if limit < 0:
            raise ValueError("limit must be non-negative")
        return self._core.search(space, predicates, (sortby, limit, descending), _tokens(auth))

    # -- asynchronous operations

    def loop(self):
        """Blocks until some operation started with an ``async_*`` method
        finishes and returns its Deferred (whose wait() then returns at
        once). Each operation is returned once. Raises ClientError
        NONEPENDING at once when no started operation is left to return."""
        return self._core.loop()

    # -- microtransactions

    def microtransaction_init(self, space):
        """A Microtransaction on ``space``: collect several mutations, then
        commit them to one key atomically. UNKNOWNSPACE raises here."""
        return Microtransaction(self._core.microtransaction(space))


def _install_update_methods():
    for name, op, shape, doc in _update_table():
        sync = _update_method(_core.ClientCore.call, op, shape)
        setattr(Client, name, _finish(sync, "Client", name, doc))
        async_ = _update_method(_core.ClientCore.start, op, shape)
        async_name = "async_" + name
        setattr(Client, async_name, _finish(async_, "Client", async_name, _ASYNC_DOC.format(name=name, doc=doc)))
    # HyperDex's C and wire name of delete.
    setattr(Client, "async_del", Client.async_delete)


_install_update_methods()


# ---------------------------------------------------------------- Microtransaction

class Microtransaction(object):
    """Several mutations of one key, applied together or not at all
    (``client.microtransaction_init(space)``).

    The collectors (``put``, ``atomic_*``, ``string_*``, ``list_*``,
    ``set_*``, ``map_remove``, ``document_rename``, ``document_unset``)
    each take an attributes dict, check it at once (raising ClientError)
    and return True. The finishers apply everything: ``commit(key)``
    (creates the object if missing) returns True, or False when an
    operation could not be applied; ``cond_commit(key, predicates)`` also
    None/False like cond_put; ``group_commit(predicates)`` returns the
    number of objects changed. A microtransaction is single-use. Not for
    sharing between threads.
    """

    __slots__ = ("_core",)

    def __init__(self, core):
        self._core = core

    def commit(self, key):
        """Applies every collected mutation to key, atomically."""
        return self._core.commit(key, None)

    def async_commit(self, key):
        """Starts commit in the background; returns a Deferred."""
        return self._core.start_commit(key, None)

    def cond_commit(self, key, predicates):
        """Applies everything to key only if every predicate holds."""
        return self._core.commit(key, predicates)

    def async_cond_commit(self, key, predicates):
        """Starts cond_commit in the background; returns a Deferred."""
        return self._core.start_commit(key, predicates)

    def group_commit(self, predicates):
        """Applies everything to each object matching the predicates; the count."""
        return self._core.commit(None, predicates)

    def async_group_commit(self, predicates):
        """Starts group_commit in the background; returns a Deferred."""
        return self._core.start_commit(None, predicates)


def _collector(op, doc):
    def method(self, attributes):
        return self._core.add(op, attributes)
    return _finish(method, "Microtransaction", op, "Collects: " + doc + " Returns True.")


_MICROTRANSACTION_OPS = [("put", "sets each attribute (or document path) to the value given.")] + [
    (name, doc) for name, doc in _ATTR_FAMILIES
]
for _name, _doc in _MICROTRANSACTION_OPS:
    setattr(Microtransaction, _name, _collector(_name, _doc))
del _name, _doc
