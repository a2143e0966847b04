"""A real cluster for the tests: ``tessera dev`` (a coordinator and three
daemons on 127.0.0.1) in a temporary directory, started once per test
session and stopped by its process id at the end.

The binary is ``$TESSERA_BIN``, else ``target/debug/tessera`` of the
checkout (``scripts/test`` builds it).
"""

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DAEMONS = 3
#: Daemon i of `tessera dev --port P` listens on P + 30 + i.
DAEMON_PORT_OFFSET = 30
READY_TIMEOUT_S = 90
STOP_TIMEOUT_S = 30


def tessera_bin():
    path = os.environ.get("TESSERA_BIN") or os.path.join(ROOT, "target", "debug", "tessera")
    if not os.path.exists(path):
        raise RuntimeError("no tessera binary at %s: run `cargo build -p tessera-cli` or set TESSERA_BIN" % path)
    return path


def port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_cluster_port():
    """A coordinator port P with P and every daemon port free."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 60000)
        ports = [port] + [port + DAEMON_PORT_OFFSET + i for i in range(DAEMONS)]
        if all(port_free(p) for p in ports):
            return port
    raise RuntimeError("no free ports for a dev cluster")


class DevCluster(object):
    """One `tessera dev` process; `stop()` sends SIGINT to its pid (the
    clean stop, like Ctrl-C) and SIGKILL if it does not exit in time."""

    def __init__(self, directory):
        self.port = free_cluster_port()
        self.host = "127.0.0.1"
        self.log_path = os.path.join(directory, "dev.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [tessera_bin(), "dev", "--daemons", str(DAEMONS), "--port", str(self.port),
             "--data", os.path.join(directory, "data")],
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL)
        self.ready_line = self._wait_ready()

    def _wait_ready(self):
        lines = []
        found = threading.Event()

        def read():
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                if "ready" in line:
                    found.set()
                    break

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        if not found.wait(READY_TIMEOUT_S):
            self.stop()
            raise RuntimeError("tessera dev not ready after %ss; output %r; log %s"
                               % (READY_TIMEOUT_S, lines, self.log_path))
        return lines[-1]

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(STOP_TIMEOUT_S)
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def cluster():
    with tempfile.TemporaryDirectory(prefix="tessera-pytest-") as directory:
        dev = DevCluster(directory)
        try:
            yield dev
        finally:
            code = dev.stop()
            if code not in (0, -signal.SIGINT):
                sys.stderr.write("tessera dev exited with %s; log:\n" % code)
                with open(dev.log_path, "rb") as f:
                    sys.stderr.write(f.read()[-4000:].decode("utf-8", "replace"))


@pytest.fixture(scope="session")
def admin(cluster):
    from tessera.admin import Admin
    return Admin(cluster.host, cluster.port)


@pytest.fixture
def client(cluster):
    from tessera.client import Client
    return Client(cluster.host, cluster.port)


@pytest.fixture
def make_space(admin):
    """Creates spaces with unique names (``make_space('key k attributes v')``
    returns the name) and removes them after the test."""
    created = []

    def make(body, partitions=4):
        name = "t_" + uuid.uuid4().hex[:12]
        admin.add_space("space %s %s create %d partitions" % (name, body, partitions))
        created.append(name)
        return name

    yield make
    for name in created:
        admin.rm_space(name)


def deadline_loop(seconds, what):
    """Yields until `seconds` pass, then fails naming `what` (for waiting
    on a condition, never for timing)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
    raise AssertionError("timed out waiting for " + what)
