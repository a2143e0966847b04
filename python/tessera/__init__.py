"""Tessera's Python client: a drop-in for HyperDex's.

A program written for HyperDex runs on Tessera after changing
``import hyperdex.client`` to ``import tessera.client`` (and
``hyperdex.admin`` to ``tessera.admin``):

>>> import tessera.client
>>> c = tessera.client.Client('127.0.0.1', 1982)
>>> c.put('phonebook', 'jsmith', {'first': 'John', 'last': 'Smith', 'phone': 6075551024})
True

Modules: :mod:`tessera.client` (data: ``Client``, ``Deferred``, ``Iterator``,
``Microtransaction``, ``Document``, the predicates, ``ClientError``) and
:mod:`tessera.admin` (spaces and the cluster: ``Admin``, ``AdminError``).
"""

__version__ = "0.1.0"
__all__ = ["client", "admin"]
