"""The GIL is released while a call waits on the network, and a client
may be shared by threads (API.md issue point 4)."""

import select
import socket
import threading

import pytest

from tessera.client import Client


def test_other_threads_run_while_a_call_waits_on_the_network(cluster, make_space):
    """A client whose coordinator is a relay run by the main thread: the
    call in the worker thread can only finish if the main thread keeps
    running Python code (the relay) while the call waits. With the GIL held
    during the wait, the relay could not run and the call would not finish
    (the relay gives up after its deadline, and the test fails)."""
    space = make_space("key k attributes v")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    relay_port = listener.getsockname()[1]
    outcome = {}

    def worker():
        try:
            c = Client("127.0.0.1", relay_port)
            outcome["put"] = c.put(space, "k", {"v": "through the relay"})
        except Exception as e:  # reported below
            outcome["error"] = e

    thread = threading.Thread(target=worker)
    thread.start()
    relayed = 0
    pairs = {}
    deadline_rounds = 3000  # 3000 x 10 ms select: a bound, not a timing assertion
    for _ in range(deadline_rounds):
        if not thread.is_alive():
            break
        readable, _, _ = select.select([listener] + list(pairs), [], [], 0.01)
        for sock in readable:
            if sock is listener:
                inbound, _ = listener.accept()
                upstream = socket.create_connection((cluster.host, cluster.port))
                pairs[inbound], pairs[upstream] = upstream, inbound
                continue
            data = sock.recv(65536)
            other = pairs[sock]
            if not data:
                for s in (sock, other):
                    pairs.pop(s, None)
                    s.close()
                continue
            other.sendall(data)
            relayed += len(data)
    thread.join(30)
    for s in list(pairs):
        s.close()
    listener.close()
    assert not thread.is_alive()
    assert "error" not in outcome, outcome
    assert outcome["put"] is True
    assert relayed > 0  # the worker's configuration request went through the main thread
    assert Client(cluster.host, cluster.port).get(space, "k") == {"v": "through the relay"}


@pytest.mark.parametrize("shared", [True, False])
def test_threads_using_clients_at_once(cluster, make_space, shared):
    space = make_space("key int k attributes int n, string who")
    common = Client(cluster.host, cluster.port)
    errors = []

    def work(t):
        c = common if shared else Client(cluster.host, cluster.port)
        try:
            for i in range(100):
                k = t * 1000 + i
                assert c.put(space, k, {"n": i, "who": "t%d" % t}) is True
                assert c.get(space, k) == {"n": i, "who": "t%d" % t}
                assert c.atomic_add(space, k, {"n": 1}) is True
            assert c.count(space, {"who": "t%d" % t}) == 100
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert sorted(o["n"] for o in common.search(space, {})) == sorted(list(range(1, 101)) * 4)
