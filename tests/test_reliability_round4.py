"""Reliability, round 4: a set-up no optional tool can stop, a lab runner whose streams die with it and hold its
folder, damaged sharded checkpoints refused by name, nothing left outside a run's folder, exercise checks run out
of order."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.job import DATA_DIR, Job
from helpers.local import failures
from helpers.local.runner import LocalRunner
from helpers.targets import resolve

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------- make setup
def _setup_lines_with(word: str) -> list[str]:
    """The venv recipe's shell lines (continuations joined, make's ``$$`` unescaped) that mention ``word``."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = text.split("$(VENV)/.ready:", 1)[1].split("\n\n", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", recipe)
    lines = [line.strip() for line in joined.splitlines()[1:] if line.startswith("\t")]
    return [line.replace("$$", "$") for line in lines if word in line and not line.startswith("#")]


def test_a_failing_npm_never_stops_make_setup(tmp_path):
    """npm behind a TLS-inspecting proxy fails every install: each of the recipe's npm lines still succeeds (make
    goes on to the labs) and says which test that costs."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "npm").write_text("#!/bin/sh\necho 'npm ERR! self-signed certificate in certificate chain' >&2\nexit 1\n")
    (fake / "npm").chmod(0o755)
    lines = _setup_lines_with("npm ci")
    assert lines, "the Makefile's setup recipe installs nothing from npm: update this test"
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    for line in lines:
        done = subprocess.run(["/bin/sh", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        assert "self-signed certificate" in done.stderr  # the fake npm really ran, and failed
        assert re.search(r"note: .*tests/test_\w+\.py", done.stdout), done.stdout  # names the test it costs


# ---------------------------------------------------------------------------------------------------- checkpoints
def _elastic_job(name: str, **hp) -> Job:
    settings = {"steps": 9, "subset": 800, "global_batch": 32, "micro_batch": 8, "checkpoint_every": 4, **hp}
    return Job(
        name, settings, {"train": DATA_DIR / "catalog" / "train"}, entry_point="train_elastic.py", processes_per_host=2
    )


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """The checkpoints of a two-rank train_elastic.py job (steps 4 and 8, two shards each), as lab 08 writes them."""
    runs = tmp_path_factory.mktemp("elastic")
    result = LocalRunner(runs_dir=runs, echo=False).run(_elastic_job("sharded"), resolve("local_cpu"))
    checkpoints = result.run_dir / "algo-1" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000004", "step-000008"]
    return checkpoints


def _truncate(file: Path, size: int) -> None:
    file.write_bytes(file.read_bytes()[:size])


def _half(file: Path) -> int:
    return file.stat().st_size // 2


def _flip_64_bytes_at_90_percent(file: Path) -> None:
    data = bytearray(file.read_bytes())
    at = int(len(data) * 0.9)
    data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
    file.write_bytes(bytes(data))


DAMAGE = {  # each case of the review, on the newest checkpoint: what is done to it, and what the refusal names
    "a deleted shard": (lambda s: (s / "__1_0.distcp").unlink(), "__1_0.distcp is missing"),
    "a shard cut to half": (
        lambda s: _truncate(s / "__0_0.distcp", (s / "__0_0.distcp").stat().st_size // 2),
        "__0_0.distcp is",
    ),
    "a shard cut to 0": (lambda s: _truncate(s / "__1_0.distcp", 0), "__1_0.distcp is 0 bytes"),
    "a truncated .metadata": (lambda s: _truncate(s / ".metadata", 10), ".metadata is 10 bytes"),
    "a missing .metadata": (lambda s: (s / ".metadata").unlink(), ".metadata is missing"),
    "64 bytes flipped at 90% of the second shard": (
        lambda s: _flip_64_bytes_at_90_percent(s / "__1_0.distcp"),
        "__1_0.distcp does not match its SHA-256",
    ),
    "a truncated meta.json": (lambda s: _truncate(s / "meta.json", 40), "meta.json is unreadable (JSONDecodeError"),
}


def _damaged_copy(sharded: Path, into: Path, case: str) -> Path:
    copy = into / "checkpoints"
    shutil.copytree(sharded, copy)
    DAMAGE[case][0](copy / "step-000008")
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_sharded_checkpoint_is_refused_before_launch_by_name(sharded, tmp_path, case):
    """check_resume (before launch) and the script's own resume path both refuse it, naming the checkpoint, what
    is wrong and the earlier checkpoint that would do; the undamaged one passes both."""
    import train_elastic

    assert failures.check_resume(sharded, _elastic_job("resume"))["files_verified"] == 3
    assert train_elastic.damage(str(sharded / "step-000008"))[1] == ""
    copy = _damaged_copy(sharded, tmp_path, case)
    with pytest.raises(failures.ResumeRefused) as refused:
        failures.check_resume(copy, _elastic_job("resume"))
    said = str(refused.value)
    assert "step-000008" in said and DAMAGE[case][1] in said and "step-000004 beside it verifies" in said, said
    assert DAMAGE[case][1] in train_elastic.damage(str(copy / "step-000008"))[1]


@pytest.mark.slow
def test_a_job_never_resumes_from_a_changed_shard(sharded, tmp_path):
    """The case that passed everything before: 64 bytes flipped deep in a shard. The job fails at once, saying
    which file and which earlier checkpoint would do, and trains no step."""
    copy = _damaged_copy(sharded, tmp_path, "64 bytes flipped at 90% of the second shard")
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False, checkpoint_dir=copy)
    result = runner.run(_elastic_job("resume"), resolve("local_cpu"))
    assert result.status == "Failed"
    assert "__1_0.distcp does not match its SHA-256" in result.failure_reason, result.failure_reason
    assert "step-000004 beside it verifies" in result.failure_reason
    assert not [h for h in result.history if h["kind"] == "train"]
