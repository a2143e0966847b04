"""What an editor and help() show: the stubs match the runtime, and every
public method is documented with what it returns."""

import ast
import inspect
import os
import pydoc

import tessera.admin
import tessera.client

PACKAGE = os.path.dirname(tessera.client.__file__)


def stub_classes(filename):
    tree = ast.parse(open(os.path.join(PACKAGE, filename)).read())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {
                f.name: [a.arg for a in f.args.args]
                for f in node.body if isinstance(f, ast.FunctionDef)
            }
    return classes


def public_methods(cls):
    return {n: m for n, m in vars(cls).items() if callable(m) and not n.startswith("_")}


def check_class(cls, stub):
    runtime = public_methods(cls)
    stubbed = {n for n in stub if not n.startswith("_")}
    assert set(runtime) == stubbed, (set(runtime) ^ stubbed)
    for name, method in runtime.items():
        params = list(inspect.signature(method).parameters)
        assert stub[name] == params, name
        assert method.__doc__ and method.__doc__.strip(), name


def test_client_stub_matches_the_runtime():
    stubs = stub_classes("client.pyi")
    check_class(tessera.client.Client, stubs["Client"])
    check_class(tessera.client.Microtransaction, stubs["Microtransaction"])
    for name in tessera.client.__all__:
        assert name in stubs or name in ("ClientError", "HyperDexClientException", "Document"), name


def test_admin_stub_matches_the_runtime():
    check_class(tessera.admin.Admin, stub_classes("admin.pyi")["Admin"])


def test_help_says_what_put_returns():
    text = pydoc.render_doc(tessera.client.Client.put, renderer=pydoc.plaintext)
    assert "put(self, space, key, attributes, secret=None, auth=None)" in text
    assert "Returns True" in text
    text = pydoc.render_doc(tessera.client.Client.cond_put, renderer=pydoc.plaintext)
    assert "None when the key has no object" in text and "False when nothing changed" in text
    text = pydoc.render_doc(tessera.client.Client.async_put, renderer=pydoc.plaintext)
    assert "Deferred" in text
    assert "thread" in tessera.client.Client.__doc__.lower()
    assert "thread" in tessera.admin.Admin.__doc__.lower() or "thread" in tessera.admin.__doc__.lower()


def test_every_method_of_the_api_catalogue_exists():
    """API.md §3.6: every family in plain, cond_ and group_ form, each with async_."""
    families = ["put", "atomic_add", "atomic_sub", "atomic_mul", "atomic_div", "atomic_mod", "atomic_and",
                "atomic_or", "atomic_xor", "atomic_min", "atomic_max", "string_prepend", "string_append",
                "string_ltrim", "string_rtrim", "list_lpush", "list_rpush", "set_add", "set_remove",
                "set_union", "set_intersect", "map_add", "map_remove", "map_string_prepend",
                "map_string_append", "document_rename", "document_unset"] + [
        "map_atomic_" + op for op in ("add", "sub", "mul", "div", "mod", "and", "or", "xor", "min", "max")]
    names = set()
    for f in families:
        names |= {f, "cond_" + f, "group_" + f}
    names |= {"get", "get_partial", "put_if_not_exist", "cond_put_or_create", "delete", "cond_del", "group_del",
              "count", "search_describe"}
    for name in names:
        assert callable(getattr(tessera.client.Client, name)), name
        assert callable(getattr(tessera.client.Client, "async_" + name)), name
    for name in ("search", "sorted_search", "loop", "microtransaction_init", "async_del"):
        assert callable(getattr(tessera.client.Client, name))
