"""A local run opens no network connection beyond loopback.

Two independent checks on a real 2-process job: every Python-level connect/lookup in every process passes an audit
hook that blocks and records non-loopback destinations (installed through ``sitecustomize``), and the job's process
tree is sampled for TCP connections (gloo's C++ sockets do not pass Python's hooks).
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import textwrap
import threading

import psutil
import pytest
from conftest import TINY

from helpers.job_spec import Job, catalog_channels
from helpers.local.runner import LocalRunner
from helpers.targets import Target

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

GUARD = textwrap.dedent("""
    import ipaddress, json, os, sys
    _log = os.environ["NETWORK_GUARD_LOG"]

    def _loopback(host):
        if host in ("localhost", "", None) or str(host).startswith("/"):
            return True
        try:
            address = ipaddress.ip_address(str(host).split("%")[0])
            return (getattr(address, "ipv4_mapped", None) or address).is_loopback
        except ValueError:
            return False  # a host name other than localhost means a lookup on the network

    def _hook(event, args):
        if event == "socket.connect":
            address = args[1]
            host = address[0] if isinstance(address, tuple) else address
        elif event == "socket.getaddrinfo":
            host = args[0]
        else:
            return
        if isinstance(host, bytes):
            host = host.decode()
        if not _loopback(host):
            with open(_log, "a") as f:
                f.write(json.dumps({"pid": os.getpid(), "event": event, "host": str(host)}) + "\\n")
            raise PermissionError(f"network guard: {event} to {host} blocked")

    sys.addaudithook(_hook)
""")


@pytest.fixture
def guard(tmp_path):
    site = tmp_path / "guard"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network.log"
    return {"PYTHONPATH": str(site), "NETWORK_GUARD_LOG": str(log)}, log


def test_the_guard_catches_and_blocks_a_non_loopback_connect(guard):
    env, log = guard
    code = (
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\nexcept PermissionError: pass"
    )
    subprocess.run([sys.executable, "-c", code], env={**env, "PATH": ""}, check=True, timeout=60)
    assert "192.0.2.1" in log.read_text()


def _remote_addresses(root: psutil.Process, seen: set, stop: threading.Event):
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                for c in p.net_connections(kind="inet"):
                    if c.raddr:
                        seen.add(c.raddr.ip)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        stop.wait(0.2)


def test_two_process_job_stays_on_loopback(small_catalog, tmp_path, guard):
    env, log = guard
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False)
    job = Job(
        "offline",
        {**TINY, "subset": 800, "eval_subset": 200},
        catalog_channels(small_catalog),
        processes_per_host=2,
        environment=env,
    )
    running = runner.start(job, Target("local_cpu", "local_cpu", 0, 2))
    seen: set = set()
    stop = threading.Event()
    watchers = [
        threading.Thread(target=_remote_addresses, args=(psutil.Process(p.pid), seen, stop), daemon=True)
        for p in running.procs.values()
    ]
    for w in watchers:
        w.start()
    try:
        result = running.wait()
    finally:
        stop.set()
    assert result.status == "Completed", result.log_tail
    assert not log.exists(), log.read_text()
    assert seen, "the sampler saw no connections at all: gloo's loopback sockets should have shown"
    assert all(_is_loopback(ip) for ip in seen), seen


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is IPv4 loopback seen by a dual-stack socket
    return (mapped or address).is_loopback
