"""TLS and the admin credential from Python (docs/design/tls.md): a
coordinator and a daemon as separate processes with a throwaway CA
(``scripts/tls-certs``, openssl) and an admin token; ``Client(tls_ca=)``
and ``Admin(tls_ca=, admin_token_file=)`` against them."""

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, tessera_bin
from tessera.admin import Admin, AdminError
from tessera.client import Client, ClientError

TOKEN = "python-test-admin-token-0123456789"
SPACE = "space tls_people key int id attributes string city subspace city create 4 partitions"


def free_port():
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tls_cluster():
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test CA (scripts/tls-certs)")
    with tempfile.TemporaryDirectory(prefix="tessera-tls-") as d:
        certs = os.path.join(d, "certs")
        subprocess.run([os.path.join(ROOT, "scripts", "tls-certs"), certs], check=True,
                       stdout=subprocess.DEVNULL)
        token = os.path.join(d, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        flags = ["--tls-ca", os.path.join(certs, "ca.pem"),
                 "--tls-cert", os.path.join(certs, "server.pem"),
                 "--tls-key", os.path.join(certs, "server-key.pem"),
                 "--admin-token-file", token]
        cport, dport = free_port(), free_port()
        log = open(os.path.join(d, "servers.log"), "wb")
        procs = [subprocess.Popen([tessera_bin(), "coordinator", "--port", str(cport),
                                   "--data", os.path.join(d, "c")] + flags,
                                  stdout=log, stderr=log, stdin=subprocess.DEVNULL)]
        procs.append(subprocess.Popen([tessera_bin(), "daemon", "--port", str(dport),
                                       "--coordinator", "127.0.0.1:%d" % cport,
                                       "--data", os.path.join(d, "d")] + flags,
                                      stdout=log, stderr=log, stdin=subprocess.DEVNULL))
        try:
            admin = Admin("127.0.0.1", cport, tls_ca=os.path.join(certs, "ca.pem"),
                          admin_token_file=token)
            deadline = time.time() + 60
            while True:
                try:
                    servers = admin.dump_config()["servers"]
                    if any(s["state"] == "AVAILABLE" for s in servers):
                        break
                except AdminError:
                    pass
                assert time.time() < deadline, "the TLS cluster did not start"
                time.sleep(0.1)
            yield {"port": cport, "ca": os.path.join(certs, "ca.pem"), "token": token,
                   "admin": admin}
        finally:
            for p in procs:
                p.kill()
                p.wait()
            log.close()


def test_tls_clients_work_and_the_credential_is_required(tls_cluster):
    port, ca = tls_cluster["port"], tls_cluster["ca"]
    tokenless = Admin("127.0.0.1", port, tls_ca=ca)
    with pytest.raises(AdminError) as e:
        tokenless.add_space(SPACE)
    assert e.value.symbol() == "HYPERDEX_ADMIN_UNAUTHORIZED"
    assert "tls_people" not in tokenless.list_spaces()

    admin = tls_cluster["admin"]
    assert admin.add_space(SPACE) is True
    c = Client("127.0.0.1", port, tls_ca=ca)
    model = {}
    for i in range(10):
        city = ["Oslo", "Lima"][i % 2]
        assert c.put("tls_people", i, {"city": city}) is True
        model[i] = city
    assert c.get("tls_people", 3) == {"city": model[3]}
    lima = sorted(o["id"] for o in c.search("tls_people", {"city": "Lima"}))
    assert lima == sorted(k for k, v in model.items() if v == "Lima")

    with pytest.raises(AdminError) as e:
        tokenless.rm_space("tls_people")
    assert e.value.symbol() == "HYPERDEX_ADMIN_UNAUTHORIZED"
    assert admin.rm_space("tls_people") is True


def test_a_plain_client_is_refused_clearly(tls_cluster):
    with pytest.raises(ClientError) as e:
        Client("127.0.0.1", tls_cluster["port"]).get("tls_people", 1)
    assert "TLS" in e.value.message()


def test_a_bad_ca_file_raises_at_once(tmp_path):
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("hello")
    with pytest.raises(ValueError):
        Client("127.0.0.1", 1, tls_ca=str(bad))
