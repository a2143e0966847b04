"""Authorization with macaroons (API.md §10, docs/design/authorization.md)
through the Python package, with tokens minted by pymacaroons — the usual
Python macaroon library, which ``pip install tessera`` brings along."""

import random
import time

import pytest
from pymacaroons import Macaroon

from tessera.client import ClientError, LessEqual

UNAUTHORIZED = 8534

ACCOUNTS = """key account
attributes
    string name,
    int balance
with authorization"""


def unauthorized(call, *args, **kwargs):
    with pytest.raises(ClientError) as e:
        call(*args, **kwargs)
    assert e.value.status() == UNAUTHORIZED, e.value


def test_hyperdex_tutorial_flow(client, make_space):
    # HyperDex's authorization tutorial, unchanged but for the imports:
    # pymacaroons' Macaroon(...) where libmacaroons' bindings had
    # macaroons.create(...).
    accounts = make_space(ACCOUNTS)
    SECRET = "super secret"
    assert client.put(accounts, "account-1", {"name": "Alice", "balance": 10}, secret=SECRET) is True

    M = Macaroon(location="account number 1", identifier="account-1", key=SECRET)
    M.add_first_party_caveat("op = read")
    token = M.serialize()
    assert client.get(accounts, "account-1", auth=[token]) == {"name": "Alice", "balance": 10}
    unauthorized(client.atomic_add, accounts, "account-1", {"balance": 5}, auth=[token])
    unauthorized(client.get, accounts, "account-1")

    # The owner's unrestricted macaroon writes; a time-limited one expires.
    owner = Macaroon(location="account number 1", identifier="account-1", key=SECRET)
    assert client.atomic_add(accounts, "account-1", {"balance": 5}, auth=[owner.serialize()]) is True
    later = Macaroon(location="a", identifier="account-1", key=SECRET)
    later.add_first_party_caveat("time < %d" % (time.time() + 3600))
    assert client.get(accounts, "account-1", auth=[later])["balance"] == 15
    expired = Macaroon(location="a", identifier="account-1", key=SECRET)
    expired.add_first_party_caveat("time < %d" % (time.time() - 60))
    unauthorized(client.get, accounts, "account-1", auth=[expired])

    # A third-party caveat, discharged by the third party and bound with
    # prepare_for_request.
    M = Macaroon(location="account number 1", identifier="account-1", key=SECRET)
    M.add_third_party_caveat("auth.example.org", "third party key", "user = alice")
    D = Macaroon(location="auth.example.org", identifier="user = alice", key="third party key")
    DP = M.prepare_for_request(D)
    assert client.get(accounts, "account-1", auth=[M.serialize(), DP.serialize()])["name"] == "Alice"
    unauthorized(client.get, accounts, "account-1", auth=[M.serialize(), D.serialize()])
    unauthorized(client.get, accounts, "account-1", auth=[M.serialize()])


def test_bad_tokens_and_the_secret(client, make_space):
    accounts = make_space(ACCOUNTS)
    unauthorized(client.put, accounts, "a", {"name": "x"})  # creation needs a secret
    assert client.put(accounts, "a", {"name": "x"}, secret=b"\x00binary secret") is True
    good = Macaroon(location="", identifier="a", key=b"\x00binary secret")
    obj = client.get(accounts, "a", auth=[good])
    assert obj == {"name": "x", "balance": 0}, "the secret is never returned"
    for bad in ["", "garbage!", "AgJ0ZXNzZXJh", Macaroon(location="", identifier="a", key="wrong")]:
        unauthorized(client.get, accounts, "a", auth=[bad])
    unauthorized(client.get, accounts, "missing", auth=[good])
    with pytest.raises(TypeError):
        client.get(accounts, "a", auth=[42])
    with pytest.raises(TypeError):
        client.put(accounts, "a", {"name": "x"}, secret=42)
    # A space without authorization takes no secret.
    plain = make_space("key k attributes string v")
    unauthorized(client.put, plain, "k", {"v": "x"}, secret="s")


def test_authorized_search_matches_a_model(client, make_space):
    accounts = make_space(ACCOUNTS.replace("with", "subspace balance\nwith"))
    rng = random.Random(16)
    secrets = ["s%d" % i for i in range(5)]
    objects = {}
    for i in range(60):
        secret, balance = rng.choice(secrets), rng.randrange(10)
        assert client.put(accounts, "acct%02d" % i, {"balance": balance}, secret=secret)
        objects["acct%02d" % i] = (balance, secret)
    # A search's refusal comes as the iterator's last item (API.md §3).
    [refusal] = list(client.search(accounts, {}))
    assert isinstance(refusal, ClientError) and refusal.status() == UNAUTHORIZED
    unauthorized(client.count, accounts, {})
    for trial in range(25):
        chosen = rng.sample(secrets + ["nobody"], rng.randrange(1, 4))
        reads = {s: rng.random() < 0.7 for s in chosen}
        tokens = []
        for s in chosen:
            m = Macaroon(location="", identifier="any", key=s)
            m.add_first_party_caveat("op = read" if reads[s] else "op = write")
            tokens.append(m if rng.random() < 0.5 else m.serialize())
        bound = rng.randrange(10)
        want = sorted(k for k, (b, s) in objects.items() if b <= bound and reads.get(s))
        got = sorted(o["account"] for o in client.search(accounts, {"balance": LessEqual(bound)}, auth=tokens))
        assert got == want, (trial, chosen, reads)
        assert client.count(accounts, {"balance": LessEqual(bound)}, auth=tokens) == len(want)
        top = [o["account"] for o in client.sorted_search(accounts, {}, "balance", 3, "max", auth=tokens)]
        readable = sorted((k for k, (b, s) in objects.items() if reads.get(s)), key=lambda k: (-objects[k][0], k))
        assert top == readable[:3], trial
        writable = [k for k, (b, s) in objects.items() if b <= bound and s in reads and not reads[s]]
        assert client.group_atomic_add(accounts, {"balance": LessEqual(bound)}, {"balance": 0}, auth=tokens) == len(writable)
