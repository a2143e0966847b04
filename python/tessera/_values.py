"""Values that are not plain Python types: ``Document`` and the timestamp
conversions (API.md §2.2–2.3)."""

import datetime as _dt
import json as _json

__all__ = ["Document"]

_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MICROSECOND = _dt.timedelta(microseconds=1)


class Document(object):
    """A JSON document, the value of a ``document`` attribute.

    ``Document(x)`` takes a dict, a list, or JSON text (``str`` or
    ``bytes``); ``doc()`` returns the parsed value. Documents compare equal
    when their contents are equal; ordering comparisons raise ``TypeError``.
    A plain ``dict`` is a *map*, not a document: wrap it in ``Document``.
    """

    __slots__ = ("_doc",)

    def __init__(self, doc):
        if isinstance(doc, (bytes, bytearray)):
            doc = doc.decode("utf-8")
        if isinstance(doc, str):
            doc = _json.loads(doc)
        elif not isinstance(doc, (dict, list)):
            raise TypeError("Document takes a dict, a list or JSON text, not %s" % type(doc).__name__)
        self._doc = doc
        self._json()  # refuse what JSON cannot hold, now

    def doc(self):
        """The document as Python values (dicts, lists, str, int, float, bool, None)."""
        return self._doc

    def _json(self):
        return _json.dumps(self._doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    @classmethod
    def _from_json(cls, text):
        document = cls.__new__(cls)
        document._doc = _json.loads(text)
        return document

    def __eq__(self, other):
        if isinstance(other, Document):
            return self._doc == other._doc
        return NotImplemented

    def __ne__(self, other):
        if isinstance(other, Document):
            return self._doc != other._doc
        return NotImplemented

    def _unordered(self, other):
        raise TypeError("documents cannot be ordered")

    __lt__ = __le__ = __gt__ = __ge__ = _unordered
    __hash__ = None

    def __repr__(self):
        return "Document(%r)" % (self._doc,)


def _datetime_to_micros(value):
    """Microseconds since the Unix epoch; a naive datetime is taken as UTC."""
    if value.tzinfo is None or value.utcoffset() is None:
        return (value - _EPOCH_NAIVE) // _MICROSECOND
    return (value - _EPOCH_UTC) // _MICROSECOND


def _micros_to_datetime(micros):
    """A naive UTC datetime."""
    return _EPOCH_NAIVE + _dt.timedelta(microseconds=micros)
