"""Data parallelism in the training script: loss parity across world sizes and topologies, and the SMDDP backend
(used where importable, a logged fallback elsewhere, a clear error under mpirun without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SRC, TINY, run_script

from helpers import jobs, targets

FAKE_SMDDP = Path(__file__).resolve().parent / "fake_smddp"
# two epochs (the plan reshuffles at the boundary), dropout 0 and fp32: every process count sees the same rows
# 191 validation rows: the two ranks evaluate unequal shares, and the reduced metrics must not notice
PARITY = {**TINY, "subset": 384, "eval_subset": 191, "epochs": 2, "log_every": 4, "evals_per_epoch": 1}


def _run(runner, small_catalog, name, procs=1, nodes=1, **extra):
    job = jobs.Job(
        name=name,
        hyperparameters={**PARITY, **extra.pop("hyperparameters", {})},
        channels=jobs.catalog_channels(small_catalog),
        processes_per_host=procs,
        instance_count=nodes,
        **extra,
    )
    return runner.run(job, targets.resolve("local_cpu"))


def _losses(result, kind="train", key="train_loss"):
    return [(h["step"], h[key]) for h in result.history if h["kind"] == kind]


def _setup(result):
    return next(h for h in result.history if h["kind"] == "setup")


@pytest.fixture(scope="module")
def single(small_catalog, tmp_path_factory):
    from helpers.local.runner import LocalRunner

    return _run(LocalRunner(runs_dir=tmp_path_factory.mktemp("jobs"), echo=False), small_catalog, "single")


def _assert_parity(a, b):
    la, lb = _losses(a), _losses(b)
    assert len(la) == 6 and [s for s, _ in la] == [s for s, _ in lb]
    for (step, x), (_, y) in zip(la, lb):
        assert y == pytest.approx(x, rel=1e-4, abs=1e-4), f"step {step}: {x} vs {y}"
    ea, eb = _losses(a, "eval", "val_loss"), _losses(b, "eval", "val_loss")
    assert [s for s, _ in ea] == [s for s, _ in eb] == [12, 24]
    assert [v for _, v in eb] == pytest.approx([v for _, v in ea], rel=1e-4)
    assert a.metrics["samples"] == b.metrics["samples"]  # the same global batches, the same number of rows
    # each rank pads its own share to its own longest title and counts those FLOPs; one process pads the whole
    # batch to its longest: never fewer
    assert 0.5 * a.metrics["flops_per_sample"] < b.metrics["flops_per_sample"] <= a.metrics["flops_per_sample"]


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(single, runner, small_catalog):
    ddp = _run(runner, small_catalog, "ddp2", procs=2)
    assert _setup(single)["world_size"] == 1 and _setup(ddp)["world_size"] == 2
    assert _setup(ddp)["backend"] == "gloo" and _setup(ddp)["global_batch"] == PARITY["batch_size"]
    _assert_parity(single, ddp)
    # rank 0 alone logs and saves, and the checkpoint has no DDP "module." prefix
    assert sum(1 for line in ddp.log_tail if line.startswith("[setup] device=")) == 1
    from safetensors.torch import load_file

    keys = load_file(ddp.model_dir / "model.safetensors").keys()
    assert keys and not any(k.startswith("module.") for k in keys)
    saved = json.loads((ddp.output_dir / "metrics.json").read_text())
    assert saved["summary"]["world_size"] == 2


@pytest.mark.slow
def test_two_nodes_with_smddp_requested_fall_back_and_still_match(single, runner, small_catalog):
    """Two "nodes" (torchrun --nnodes 2 on loopback) asking for SMDDP where it is not installed: the log says so,
    gloo carries the job, and the losses are the single process's."""
    nodes = _run(runner, small_catalog, "nodes2", nodes=2, hyperparameters={"backend": "smddp"})
    assert _setup(nodes)["backend"] == "gloo" and _setup(nodes)["world_size"] == 2
    warning = [line for line in nodes.log_tail if "[warn] --backend smddp" in line]
    assert len(warning) == 1 and "falling back to gloo" in warning[0] and "smdistributed" in warning[0]
    _assert_parity(single, nodes)
    commands = [json.loads((nodes.run_dir / h / "input" / "command.json").read_text()) for h in ("algo-1", "algo-2")]
    assert ["--node_rank=0" in c for c in commands] == [True, False] and all("--nnodes=2" in c for c in commands)


@pytest.mark.slow
def test_smddp_backend_is_used_where_the_library_imports(single, runner, small_catalog):
    """With a stand-in library on the path the script initialises backend "smddp" itself, not the fallback."""
    smddp = _run(
        runner,
        small_catalog,
        "smddp2",
        procs=2,
        hyperparameters={"backend": "smddp"},
        environment={"PYTHONPATH": str(FAKE_SMDDP)},
    )
    assert _setup(smddp)["backend"] == "smddp"
    assert not any("[warn]" in line for line in smddp.log_tail)
    _assert_parity(single, smddp)


@pytest.mark.slow
def test_smddp_under_mpirun_without_the_library_stops_with_a_clear_error(small_catalog, tmp_path, monkeypatch):
    """A bare mpirun (SageMaker's SMDDP launcher) sets OMPI_COMM_WORLD_*, not torchrun's rendezvous address: there is
    nothing to fall back on, so a missing or mismatched library must fail at once, saying what to change."""
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    done = run_script(
        [
            "train.py",
            "--train",
            str(small_catalog / "train"),
            "--validation",
            str(small_catalog / "validation"),
            "--backend",
            "smddp",
        ],
        env={
            "SM_OUTPUT_DIR": str(tmp_path),
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "CUDA_VISIBLE_DEVICES": "",
        },
        cwd=SRC,
        timeout=120,
    )
    assert done.returncode != 0
    failure = (tmp_path / "failure").read_text()
    assert "--backend smddp under mpirun" in failure and "distribution='torchrun'" in failure


def test_backend_choices_include_smddp():
    import train

    assert train.parse_args(["--backend", "smddp"]).backend == "smddp"
    with pytest.raises(SystemExit):
        train.parse_args(["--backend", "mpi"])
