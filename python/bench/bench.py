#!/usr/bin/env python3
"""Get and put throughput from Python, beside the same from the Rust client.

Starts `tessera dev` (3 daemons on 127.0.0.1, data in a temporary
directory) unless --port names a running cluster, then:

1. Python (`tessera.client`): loads --records YCSB-shaped records (key
   `user<N>`, `int recno`, ten 100-byte fields), then runs --operations
   gets (uniform random keys) and --operations puts (one random field, 100
   random printable bytes), first sequentially (one at a time, the
   synchronous methods), then with a window of 64 operations outstanding
   (`async_get`/`async_put` with `loop()` + `wait()`).
2. Rust (`tessera_client`): `tessera bench latency` against the same
   cluster — the same record shape, key choice and operations, at 1 and 64
   operations in flight.

Prints one table of operations per second and the Python ÷ Rust ratio.
Every phase is bounded by its operation count. Run it with a release build
of both:

    cargo build --release -p tessera-cli
    (cd python && maturin develop --release)
    python python/bench/bench.py --tessera target/release/tessera
"""

import argparse
import json
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

WINDOW = 64
FIELDS = ["field%d" % i for i in range(10)]


def free_cluster_port():
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 60000)
        ok = True
        for p in [port] + [port + 30 + i for i in range(3)]:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free ports")


def start_dev(tessera, directory):
    port = free_cluster_port()
    proc = subprocess.Popen([tessera, "dev", "--daemons", "3", "--port", str(port),
                             "--data", os.path.join(directory, "data")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    ready = threading.Event()

    def read():
        for line in proc.stdout:
            if b"ready" in line:
                ready.set()
                break

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(90):
        proc.kill()
        raise RuntimeError("tessera dev did not become ready")
    return proc, port


def stop(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def value(rng):
    return bytes(rng.randrange(32, 127) for _ in range(100))


def run_sequential(op, count):
    start = time.perf_counter()
    for i in range(count):
        op(i)
    return count / (time.perf_counter() - start)


def run_window(client, start_op, count, window=WINDOW):
    """Keeps `window` operations outstanding; each result is checked."""
    outstanding = 0
    bad = 0
    begin = time.perf_counter()
    for i in range(count):
        if outstanding == window:
            bad += client.loop().wait() in (None, False)
            outstanding -= 1
        start_op(i)
        outstanding += 1
    while outstanding:
        bad += client.loop().wait() in (None, False)
        outstanding -= 1
    rate = count / (time.perf_counter() - begin)
    if bad:
        raise RuntimeError("%d operations did not succeed" % bad)
    return rate


def python_phases(host, port, records, operations, partitions):
    from tessera.admin import Admin
    from tessera.client import Client
    admin = Admin(host, port)
    space = "bench_py_" + uuid.uuid4().hex[:8]
    admin.add_space("space %s key k attributes int recno, %s subspace recno create %d partitions tolerate 1 failure"
                    % (space, ", ".join(FIELDS), partitions))
    client = Client(host, port)
    rng = random.Random(1)
    keys = ["user%d" % i for i in range(records)]
    run_window(client, lambda i: client.async_put(space, keys[i], dict(
        [("recno", i)] + [(f, value(rng)) for f in FIELDS])), records)
    gets = [keys[rng.randrange(records)] for _ in range(operations)]
    puts = [(keys[rng.randrange(records)], rng.choice(FIELDS), value(rng)) for _ in range(operations)]

    def get(i):
        if client.get(space, gets[i]) is None:
            raise RuntimeError("missing record")

    def put(i):
        key, field, v = puts[i]
        if client.put(space, key, {field: v}) is not True:
            raise RuntimeError("put failed")

    results = {
        "get x1": run_sequential(get, operations),
        "put x1": run_sequential(put, operations),
        "get x%d" % WINDOW: run_window(client, lambda i: client.async_get(space, gets[i]), operations),
        "put x%d" % WINDOW: run_window(
            client, lambda i: client.async_put(space, puts[i][0], {puts[i][1]: puts[i][2]}), operations),
    }
    admin.rm_space(space)
    return results


def rust_phases(tessera, port, records, operations, partitions):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([tessera, "bench", "latency", "--host", "127.0.0.1", "--port", str(port),
                        "--records", str(records), "--operations", str(operations),
                        "--workers", str(WINDOW), "--partitions", str(partitions), "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            results = json.load(f)["results"]
    return {r["phase"]: r["throughput"] for r in results}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessera", default="target/release/tessera", help="the tessera binary")
    parser.add_argument("--port", type=int, help="coordinator port of a running cluster (default: start one)")
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--operations", type=int, default=10000)
    parser.add_argument("--partitions", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tessera-pybench-") as directory:
        proc = None
        port = args.port
        if port is None:
            proc, port = start_dev(args.tessera, directory)
        try:
            py = python_phases("127.0.0.1", port, args.records, args.operations, args.partitions)
            rust = rust_phases(args.tessera, port, args.records, args.operations, args.partitions)
        finally:
            if proc is not None:
                stop(proc)
    print("%d records, %d operations per phase, 3 daemons, tolerate 1 failure, %d partitions"
          % (args.records, args.operations, args.partitions))
    print("%-10s %14s %14s %8s" % ("phase", "python ops/s", "rust ops/s", "py/rust"))
    for phase in ("get x1", "put x1", "get x%d" % WINDOW, "put x%d" % WINDOW):
        r = rust.get(phase)
        print("%-10s %14.0f %14s %8s" % (phase, py[phase], "%.0f" % r if r else "?",
                                          "%.2f" % (py[phase] / r) if r else "?"))


if __name__ == "__main__":
    sys.exit(main())
