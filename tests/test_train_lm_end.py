"""train_lm.py's end of a strategy: rank 0's check of the reloaded checkpoint stays bounded however big the model
(issue 14: the 7b SMP job's full check would have taken hours on one CPU thread while the other ranks waited past
the collective timeout), the process group's timeout is chosen (--dist_timeout_s), not the backend's default, and
a loss gone nan fails the job before anything is saved. No real 7b model
is allocated: its size comes from the meta device and the planner."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch

from helpers.planning import memory

import sharded_checkpoint  # noqa: E402  (the reload check: its plan and budget)
import train_lm  # noqa: E402

# rank 0 alone saves and loads without a process group on purpose (train_lm.main silences this too)
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")

VOCAB = 3000  # the test catalogue's tokenizer (conftest.small_catalog); the lab's is of the same order


def params_of(model_size: str, block_size: int = 2048) -> int:
    """The parameters ``--model_size`` builds, counted on the meta device (no memory, no initialisation)."""
    args = train_lm.parse_args(["--model_size", model_size, "--block_size", str(block_size)])
    with torch.device("meta"):
        model = train_lm.build_model(args, VOCAB)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.slow
def test_the_7b_shape_gets_a_bounded_check_with_its_reason():
    params = params_of("7b")
    assert params == memory.train_lm_shape("7b", VOCAB).params  # the script's model is the planner's 7b shape
    check = sharded_checkpoint.plan_reload_check(params, rows=32, tokens=2048)  # lab 04's SMP job: 32 blocks of 2,048
    assert not check.full
    assert (check.rows, check.tokens) == (
        1,
        int(sharded_checkpoint.RELOAD_CHECK_BUDGET // params),
    )  # a prefix of one block
    assert 0 < check.rows * check.tokens * params <= sharded_checkpoint.RELOAD_CHECK_BUDGET
    assert check.seconds <= 300  # minutes on one CPU thread, where the whole set would take hours:
    assert 2 * params * 32 * 2048 / sharded_checkpoint.CPU_FLOPS_ONE_THREAD > 3 * 3600
    assert "6.50B parameters x 65536 tokens would take about 5.3 h" in check.reason
    assert "scoring 1 x 615 tokens (about 3.0 min, budget 4e+12 parameters x tokens)" in check.reason
    blocks = torch.zeros(32, 2049, dtype=torch.long)
    assert check.cut(blocks).shape == (1, check.tokens + 1)  # inputs and targets


def test_the_labs_models_still_reload_in_full():
    for size, rows, tokens in [("tiny", 16, 64), ("tiny", 32, 64), ("small", 32, 64), ("1b", 32, 64)]:
        check = sharded_checkpoint.plan_reload_check(params_of(size, tokens), rows, tokens)
        assert check.full and (check.rows, check.tokens) == (rows, tokens), size
        blocks = torch.arange(rows * (tokens + 1)).view(rows, tokens + 1)
        assert torch.equal(check.cut(blocks), blocks)


def test_a_bounded_plan_keeps_whole_sequences_before_cutting_one():
    check = sharded_checkpoint.plan_reload_check(1000, rows=32, tokens=64, budget=1000 * 64 * 5 + 999)
    assert (check.rows, check.tokens, check.full) == (5, 64, False)
    check = sharded_checkpoint.plan_reload_check(10**13, rows=32, tokens=64, budget=1e12)  # not even one token fits
    assert (check.rows, check.tokens) == (1, 1)


def test_the_process_group_gets_the_jobs_timeout(monkeypatch):
    calls = []
    fake = lambda **kw: calls.append(kw)  # noqa: E731 - records the arguments, creates no process group
    monkeypatch.setattr(torch.distributed, "init_process_group", fake)
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    dist = train_lm.Dist

    def dist_then_stop(backend, timeout=None):
        dist(backend, timeout=timeout)
        raise SystemExit("stop: the process group is all this test looks at")

    monkeypatch.setattr(train_lm, "Dist", dist_then_stop)
    for argv, seconds in [([], 1800), (["--dist_timeout_s", "42"], 42)]:
        with pytest.raises(SystemExit, match="stop"):
            train_lm.main(train_lm.parse_args(["--backend", "gloo", *argv]))
        assert len(calls) == 1 and calls.pop()["timeout"] == timedelta(seconds=seconds)
    # the default leaves the bounded 7b check a wide margin (building and loading the plain model, then the end of
    # the run, come on top of scoring it)
    check = sharded_checkpoint.plan_reload_check(params_of("7b"), rows=32, tokens=2048)
    assert check.seconds * 5 < train_lm.parse_args([]).dist_timeout_s


def one_process():
    return SimpleNamespace(
        device=torch.device("cpu"), rank=0, world=1, enabled=False, master=True, print=print, all_reduce=lambda t: t
    )


@pytest.mark.parametrize(
    "steps, says",
    [
        (5, r"train_loss \(single\) is nan at step 3"),  # seen on the CPU every step
        (2, r"val_loss \(single\) is nan at step 2"),  # the last update did it: caught before the checkpoint
    ],
)
def test_a_loss_gone_nan_fails_the_job_before_anything_is_saved(tmp_path, steps, says):
    # a huge but finite lr passes every check before launch; its updates send the weights past fp32's range
    argv = ["--model_dir", str(tmp_path), "--max_steps", str(steps), "--batch_size", "4", "--precision", "fp32"]
    args = train_lm.parse_args([*argv, "--lr", "1e30"])
    gen = torch.Generator().manual_seed(0)
    blocks = torch.randint(1, VOCAB, (8, args.block_size + 1), generator=gen)
    val_blocks = torch.randint(1, VOCAB, (4, args.block_size + 1), generator=gen)
    d = one_process()
    with pytest.raises(SystemExit, match=says + r" \(lr=1e\+30, precision=fp32\): training diverged"):
        train_lm.train_one("single", d, args, blocks, val_blocks, VOCAB, train_lm.Metrics(d))
    assert list(tmp_path.iterdir()) == []  # no sharded checkpoint, no model


@pytest.mark.parametrize("budget", [None, 1.0])  # None: the default budget (full check); 1.0: a bounded one
def test_rank_0_checks_the_reloaded_model_on_the_planned_tokens(tmp_path, monkeypatch, capsys, budget):
    """One process, the tiny model, one step: the real save, reload and scoring, full and bounded."""
    if budget is not None:
        monkeypatch.setattr(sharded_checkpoint, "RELOAD_CHECK_BUDGET", budget)
    args = train_lm.parse_args(
        [
            "--model_size",
            "tiny",
            "--model_dir",
            str(tmp_path),
            "--max_steps",
            "1",
            "--batch_size",
            "4",
            "--precision",
            "fp32",
            "--log_every",
            "1",
        ]
    )
    d = one_process()
    gen = torch.Generator().manual_seed(0)
    blocks = torch.randint(1, VOCAB, (8, args.block_size + 1), generator=gen)
    val_blocks = torch.randint(1, VOCAB, (4, args.block_size + 1), generator=gen)
    out = train_lm.train_one("single", d, args, blocks, val_blocks, VOCAB, train_lm.Metrics(d))
    check, log = out["reload_check"], capsys.readouterr().out
    assert check["reloaded_loss"] == pytest.approx(check["loss"], abs=1e-5)
    if budget is None:  # as before: the whole validation set, the reloaded validation loss
        assert check["full"] and (check["rows"], check["tokens"]) == (4, args.block_size)
        assert out["reloaded_val_loss"] == check["reloaded_loss"] and check["loss"] == out["val_loss"]
        assert "reload check bounded" not in log and "reloaded_val_loss=" in log
    else:  # one token of one sequence, scored by the sharded model and by the reloaded one
        assert not check["full"] and (check["rows"], check["tokens"]) == (1, 1)
        assert "reloaded_val_loss" not in out and check["loss"] != out["val_loss"]
        assert "[checkpoint] strategy=single reload check bounded: " in log and "check_tokens=1" in log
