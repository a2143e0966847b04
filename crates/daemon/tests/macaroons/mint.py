"""Mints the macaroons of `fixtures.json` with pymacaroons and records what
pymacaroons' own Verifier decides for each, so that the daemon's verifier
(crates/daemon/src/auth_macaroon.rs) is checked against the Python
ecosystem and not against itself.

Run from this folder: python3 mint.py > fixtures.json (needs pymacaroons).
"""

import json

from pymacaroons import MACAROON_V1, MACAROON_V2, Macaroon, Verifier
from pymacaroons.exceptions import MacaroonException

SECRET = b"account-secret"
NOW = 1_700_000_000


def verdict(tokens, secret, op, now):
    """pymacaroons' decision: the first token the root, the rest discharges,
    with the caveats a Tessera daemon understands."""
    try:
        root = Macaroon.deserialize(tokens[0])
        discharges = [Macaroon.deserialize(t) for t in tokens[1:]]
    except Exception:  # noqa: BLE001 - any decoding failure refuses
        return False
    v = Verifier()
    v.satisfy_exact("op = " + op)
    v.satisfy_general(
        lambda p: p.startswith("time < ") and p[7:].isdigit() and now < int(p[7:])
    )
    try:
        return bool(v.verify(root, secret, discharges))
    except MacaroonException:
        return False
    except Exception:  # noqa: BLE001 - e.g. a verification id that does not decrypt
        return False


def mint(version, caveats=(), secret=SECRET):
    m = Macaroon(location="tessera", identifier="account-1", key=secret, version=version)
    for c in caveats:
        m.add_first_party_caveat(c)
    return m


cases = []


def case(name, tokens, secret=SECRET, ops=("read", "write"), now=NOW):
    for op in ops:
        cases.append(
            {
                "name": name,
                "tokens": tokens,
                "secret": secret.decode(),
                "op": op,
                "now": now,
                "expected": verdict(tokens, secret, op, now),
            }
        )


for version, tag in ((MACAROON_V1, "v1"), (MACAROON_V2, "v2")):
    case(tag + " plain", [mint(version).serialize()])
    case(tag + " op = read", [mint(version, ["op = read"]).serialize()])
    case(tag + " op = write", [mint(version, ["op = write"]).serialize()])
    case(tag + " both ops", [mint(version, ["op = read", "op = write"]).serialize()])
    case(tag + " time in the future", [mint(version, ["time < %d" % (NOW + 60)]).serialize()])
    case(tag + " time in the past", [mint(version, ["time < %d" % (NOW - 60)]).serialize()])
    case(tag + " time at now", [mint(version, ["time < %d" % NOW]).serialize()])
    case(tag + " unknown caveat", [mint(version, ["account = alice"]).serialize()])
    case(tag + " wrong secret", [mint(version, ["op = read"]).serialize()], secret=b"other")
    # A caveat dropped from an attenuated macaroon, its signature kept.
    forged = mint(version, ["op = read"])
    stripped = Macaroon(location="tessera", identifier="account-1", key=b"x", version=version)
    stripped.signature = forged.signature
    case(tag + " caveat dropped", [stripped.serialize()])

    # Third-party caveats.
    root = mint(version, ["op = read"])
    root.add_third_party_caveat("auth.example", "third-party-key", "user-is-alice", nonce=b"\x07" * 24)
    discharge = Macaroon(location="auth.example", identifier="user-is-alice", key="third-party-key", version=version)
    discharge.add_first_party_caveat("time < %d" % (NOW + 60))
    bound = root.prepare_for_request(discharge)
    case(tag + " third party discharged", [root.serialize(), bound.serialize()])
    case(tag + " third party unbound discharge", [root.serialize(), discharge.serialize()])
    case(tag + " third party no discharge", [root.serialize()])
    case(tag + " third party discharge expired", [root.serialize(), bound.serialize()], now=NOW + 120)
    wrong = Macaroon(location="auth.example", identifier="user-is-alice", key="not-the-key", version=version)
    case(tag + " third party wrong discharge key", [root.serialize(), root.prepare_for_request(wrong).serialize()])

print(json.dumps({"secret_note": "tokens are pymacaroons serialize() output", "cases": cases}, indent=1))
