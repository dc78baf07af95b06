"""The object store dies under a job: no reader ever gets bytes the store did not send.

Each test starts its own store and kills it at one point of a job's life: before the first byte, in the middle of an
object, between two files. FastFile turns every failed fetch into an I/O error on that file, for every reader, and
the job fails naming it; File mode fails before the script starts and leaves no run directory behind.
"""

from __future__ import annotations

import errno
import hashlib
import json
import random
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helpers.checks.findings import ChannelError
from helpers.job_spec import Job
from helpers.local.containers import LocalJob
from helpers.targets import Target
from sagemaker_standin.objectstore import ObjectStore
from sagemaker_standin.s3_profile import S3Profile

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

CPU = Target("local_cpu", "local_cpu", 0, 2)
BUCKET = "faults"
URI = f"s3://{BUCKET}/blobs/"
SIZES = {"a.bin": 300_000, "b.bin": 4_000_000, "c.bin": 300_000, "d.bin": 300_000}
# jobs read the store through the S3-profile proxy, as lab 05's do; only SeaweedFS dies, the proxy goes on answering
FAST = S3Profile(first_byte_ms=0, connection_mb_per_s=1000)
SLOW = S3Profile(first_byte_ms=0, connection_mb_per_s=2)  # b.bin takes 2 s: time to die in the middle of it

# reads every file of the channel twice, in order, and records what each read gave: a digest, or the error
PROBE = textwrap.dedent("""
    import hashlib, json, os, sys, time
    root = os.environ["SM_CHANNEL_TRAIN"]
    wait_for = sys.argv[sys.argv.index("--wait_for") + 1] if "--wait_for" in sys.argv else ""
    reads = []
    for name in sorted(os.listdir(root)):
        for attempt in (1, 2):
            try:
                with open(os.path.join(root, name), "rb") as f:
                    reads.append({"file": name, "sha": hashlib.sha256(f.read()).hexdigest()})
            except OSError as err:
                reads.append({"file": name, "errno": err.errno, "error": str(err)})
        print(f"[probe] read={name}", flush=True)
        while wait_for and not os.path.exists(wait_for):  # the test kills the store, then lets us go on
            time.sleep(0.05)
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "reads.json"), "w") as f:
        json.dump(reads, f)
""")


def blobs(root: Path) -> dict[str, bytes]:
    rng = random.Random(7)
    root.mkdir(parents=True)
    out = {}
    for name, size in SIZES.items():
        out[name] = rng.randbytes(size)
        (root / name).write_bytes(out[name])
    return out


@pytest.fixture
def store(tmp_path, request):
    profile = getattr(request, "param", FAST)
    with ObjectStore(tmp_path / "store", profile=profile) as s:
        s.create_bucket(BUCKET)
        data = blobs(tmp_path / "blobs")
        s.upload_dir(tmp_path / "blobs", URI)
        yield s, data


def kill(store: ObjectStore) -> None:
    """SIGKILL the SeaweedFS process, as the issue's reproduction did (the proxy in front of it stays)."""
    store.proc.kill()
    store.proc.wait()


def job(store, mode: str, probe_dir: Path, **hyperparameters) -> Job:
    return Job(
        f"faults-{mode.lower()}",
        hyperparameters,
        {"train": URI},
        input_mode=mode,
        s3_endpoint=store.endpoint,
        entry_point="probe.py",
        source_dir=probe_dir,
    )


def reads_of(result) -> list[dict]:
    return json.loads((result.model_dir / "reads.json").read_text())


def assert_no_wrong_bytes(reads: list[dict], data: dict[str, bytes]) -> list[dict]:
    """Every read either holds the object's own bytes or failed with EIO; returns the failed ones."""
    failed = []
    for r in reads:
        if "sha" in r:
            assert r["sha"] == hashlib.sha256(data[r["file"]]).hexdigest(), f"{r['file']}: bytes the store never sent"
        else:
            assert r["errno"] == errno.EIO, r
            failed.append(r)
    return failed


def part_sizes(root: Path) -> list[int]:
    """Sizes of the objects being fetched under ``root`` right now (their ``.part`` files come and go)."""
    sizes = []
    for p in root.rglob("*.part"):
        try:
            sizes.append(p.stat().st_size)
        except FileNotFoundError:
            pass
    return sizes


def on_disk(path: Path) -> int:
    """Bytes a FastFile placeholder holds so far (it is sparse: its ranges land in place as they arrive)."""
    return path.stat().st_blocks * 512


def when(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_fastfile_store_dead_before_the_first_byte(store, runner, probe_dir):
    s, data = store
    spec = job(s, "FastFile", probe_dir)
    prepared = runner.prepare(spec, CPU)
    kill(s)  # every object presented, none fetched
    result = LocalJob(spec, CPU, prepared).wait()
    failed = assert_no_wrong_bytes(reads_of(result), data)
    assert len(failed) == 2 * len(SIZES)  # every file, on every open: a failed fetch is never retried into zeros
    assert "lost the object store" in failed[0]["error"]
    assert result.status == "Failed" and "input: lost the object store" in result.failure_reason


@pytest.mark.parametrize("store", [SLOW], indirect=True)
def test_fastfile_store_dies_in_the_middle_of_an_object(store, runner, probe_dir):
    s, data = store
    spec = job(s, "FastFile", probe_dir)
    prepared = runner.prepare(spec, CPU)
    b_bin = prepared.run_dir / "algo-1" / "input" / "data" / "train" / "b.bin"

    arrived = []

    def kill_mid_object():  # b.bin's bytes are arriving (more than all of a.bin), not all yet
        when(lambda: arrived.extend(n for n in [on_disk(b_bin)] if n > 400_000) or arrived)
        s.stop()  # the proxy too: it holds what SeaweedFS already sent, and would deliver it whole

    killer = threading.Thread(target=kill_mid_object)
    killer.start()
    result = LocalJob(spec, CPU, prepared).wait()
    killer.join()
    assert 400_000 < arrived[0] < SIZES["b.bin"]  # the store died with b.bin part-way through
    failed = assert_no_wrong_bytes(reads_of(result), data)
    assert {r["file"] for r in failed} >= {"b.bin", "c.bin", "d.bin"} and len(failed) >= 6
    assert result.status == "Failed" and "b.bin" in result.failure_reason


def test_fastfile_store_dies_between_files(store, runner, probe_dir, tmp_path):
    s, data = store
    go = tmp_path / "go"
    spec = job(s, "FastFile", probe_dir, wait_for=str(go))

    def after_first_file(host, line):
        if line == "[probe] read=a.bin":
            kill(s)
            go.touch()
        elif line.startswith("[probe] read=") and not go.exists():
            go.touch()

    spec_runner = type(runner)(runs_dir=runner.runs_dir, echo=False, check=False, on_line=after_first_file)
    result = spec_runner.run(spec, CPU)
    reads = reads_of(result)
    failed = assert_no_wrong_bytes(reads, data)
    assert [r["file"] for r in reads if "sha" in r][:2] == ["a.bin", "a.bin"]  # read whole before the store died
    assert {"c.bin", "d.bin"} <= {r["file"] for r in failed}
    assert result.status == "Failed"


def test_file_mode_store_dead_fails_before_the_script_and_leaves_nothing(store, runner, probe_dir):
    s, _ = store
    spec = job(s, "File", probe_dir)
    kill(s)
    with pytest.raises(ChannelError, match="cannot read channel.*'train'.*lost the object store"):
        runner.prepare(spec, CPU)
    assert not runner.runs_dir.exists() or not any(runner.runs_dir.iterdir())


@pytest.mark.parametrize("store", [SLOW], indirect=True)
def test_file_mode_store_dies_while_staging(store, runner, probe_dir):
    s, _ = store
    spec = job(s, "File", probe_dir)
    killer = threading.Thread(
        target=lambda: (
            when(lambda: any(n > 400_000 for n in part_sizes(runner.runs_dir))),
            s.stop(),
        )
    )
    killer.start()
    with pytest.raises(ChannelError, match="lost the object store") as raised:
        runner.prepare(spec, CPU)
    killer.join()
    assert "channel 'train'" in str(raised.value)
    assert not any(runner.runs_dir.iterdir())  # no half-staged run directory for anyone to trust


def test_describing_a_connection_error_never_raises():
    from botocore.exceptions import EndpointConnectionError

    from sagemaker_standin.store_client import describe_failure

    err = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    err.response = None  # what botocore's connection errors carry
    why = describe_failure(err, "s3://b/k", "http://127.0.0.1:1")
    assert "lost the object store at http://127.0.0.1:1" in why
