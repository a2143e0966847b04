"""The exceptions of the package (API.md §4, §5): a HyperDex status number,
its symbol and a message."""

__all__ = ["ClientError", "HyperDexClientException", "AdminError", "HyperDexAdminException"]


class _StatusError(Exception):
    """An error with a stable status: ``status()`` (int), ``symbol()`` (the
    HyperDex name, e.g. ``HYPERDEX_CLIENT_NOTFOUND``) and ``message()``.
    Two errors compare equal when their statuses are equal."""

    def __init__(self, status, symbol, message=""):
        super().__init__(status, symbol, message)
        self._status = int(status)
        self._symbol = str(symbol)
        self._message = str(message)

    def status(self):
        """The status number, e.g. 8449 for ``HYPERDEX_CLIENT_NOTFOUND``."""
        return self._status

    def symbol(self):
        """The status's HyperDex name, e.g. ``'HYPERDEX_CLIENT_WRONGTYPE'``."""
        return self._symbol

    def message(self):
        """What exactly went wrong, in words."""
        return self._message

    def __str__(self):
        return "%s [%s]" % (self._message, self._symbol)

    def __repr__(self):
        return "%s(%d, %r, %r)" % (type(self).__name__, self._status, self._symbol, self._message)

    def __eq__(self, other):
        if isinstance(other, _StatusError) and type(self) is type(other):
            return self._status == other._status
        return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, self._status))


class ClientError(_StatusError):
    """A data operation failed (``tessera.client``); also exported as
    ``HyperDexClientException``.

    ``status()`` is HyperDex's number (e.g. 8512 UNKNOWNSPACE, 8525
    WRONGTYPE, 8517 RECONFIGURE), ``symbol()`` its name
    (``HYPERDEX_CLIENT_...``) and ``message()`` the reason. NOTFOUND and
    CMPFAIL are not raised by the operations that define them: they return
    ``None`` and ``False``."""


class AdminError(_StatusError):
    """An administrative operation failed (``tessera.admin``); also exported
    as ``HyperDexAdminException``. ``symbol()`` is ``HYPERDEX_ADMIN_...``
    (e.g. BADSPACE, DUPLICATE, NOTFOUND, COORDFAIL); for BADSPACE the
    message names the line and column of the problem."""


HyperDexClientException = ClientError
HyperDexAdminException = AdminError
