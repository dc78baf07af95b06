"""Lab 08's pieces, fast: the fault switch refuses a malformed fault, a checkpoint that would train something else is
refused before launch (and by the script itself), the stacks are read from py-spy's and faulthandler's formats, and
py-spy reads a live process (or says why not)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from argparse import Namespace

import pytest

from helpers.job_spec import DATA_DIR, Job
from helpers.local import failures, restarts
from helpers.local.runner import LocalRunner
from helpers.targets import resolve

import faults
import options


def fault_args(**given) -> Namespace:
    return Namespace(**{"fault": "none", "fault_rank": 1, "fault_step": None, "fault_delay_s": 0.0, **given})


@pytest.mark.parametrize(
    "given, world, says",
    [
        (dict(fault="stop", fault_rank=2, fault_step=3), 2, "the job has 2 rank(s), 0 to 1"),
        (dict(fault="stop", fault_rank=-1, fault_step=3), 2, "0 to 1"),
        (dict(fault="stop"), 2, "needs --fault_step"),
        (dict(fault="slow", fault_step=3), 2, "needs --fault_delay_s > 0"),
        (dict(fault="crash", fault_step=3, fault_delay_s=0.5), 2, "for --fault slow only"),
        (dict(fault="skip_collective", fault_rank=0, fault_step=3), 1, "at least 2 ranks"),
        (dict(fault_step=3), 2, "need a --fault"),
        (dict(fault_delay_s=1.0), 2, "need a --fault"),
    ],
)
def test_a_malformed_fault_is_refused_with_the_reason(given, world, says):
    assert says in faults.problem(fault_args(**given), world)


def test_a_well_formed_fault_or_none_passes_and_hits_its_rank_only():
    assert faults.problem(fault_args(), 2) is None
    slow = fault_args(fault="slow", fault_rank=1, fault_step=2, fault_delay_s=0.05)
    assert faults.problem(slow, 2) is None
    assert faults.Fault(slow, 0).kind == "none" and faults.Fault(slow, 1).kind == "slow"
    skip = faults.Fault(fault_args(fault="skip_collective", fault_step=4), 1)
    assert [skip.before_collective(s) for s in (3, 4, 5)] == [False, True, False]
    t0 = time.perf_counter()
    faults.Fault(slow, 1).slow_down(1)  # before its step: no delay
    assert time.perf_counter() - t0 < 0.04
    faults.Fault(slow, 1).slow_down(2)
    assert time.perf_counter() - t0 >= 0.05


def test_crash_fails_the_first_attempt_only(monkeypatch):
    crash = faults.Fault(fault_args(fault="crash", fault_step=2), 1)
    monkeypatch.setenv(faults.RESTART_COUNT, "0")
    with pytest.raises(SystemExit, match="failed at step 2 on purpose"):
        crash.before_collective(2)
    monkeypatch.setenv(faults.RESTART_COUNT, "1")  # torchrun restarted the workers: the fault is behind them
    assert crash.before_collective(2) is False


def test_the_parser_refuses_an_unknown_fault_and_a_step_below_one():
    parser = options.elastic_parser()
    with pytest.raises(SystemExit, match="invalid choice: 'hang'"):
        parser.parse_args(["--fault", "hang"])
    with pytest.raises(SystemExit, match="out of range"):
        parser.parse_args(["--fault", "stop", "--fault_step", "0"])
    assert "train_elastic.py" in options.schema()["scripts"]


def test_the_script_refuses_a_world_size_that_cannot_keep_the_global_batch_and_changed_settings():
    import train_elastic

    args = Namespace(global_batch=32, micro_batch=8)
    assert train_elastic.accumulation_problem(args, 2) is None
    assert "World sizes that keep this global batch: 1, 2, 4" in train_elastic.accumulation_problem(args, 3)
    saved = {"lr": 0.01, "dim": 64, "step": 12, "world_size": 2}
    assert train_elastic.differences(saved, {"lr": 0.01, "dim": 64}) == []  # the world size may differ
    assert train_elastic.differences(saved, {"lr": 0.01, "dim": 96}) == ["dim: checkpoint 64, this run 96"]


def _checkpoint(tmp_path, **meta):
    import train_elastic

    step = tmp_path / "checkpoints" / "step-000012"
    step.mkdir(parents=True)
    settings = {"global_batch": 32, "micro_batch": 8, "steps": 24, "lr": 0.01, "buckets": 16384, "dim": 64}
    settings |= {"hidden": 256, "seed": 42, "subset": 2000, "step": 12, "world_size": 2, **meta}
    for name in (".metadata", "__0_0.distcp", "__1_0.distcp"):  # stand-ins for DCP's files, recorded as it records them
        (step / name).write_bytes(name.encode() * 100)
    settings["files"] = train_elastic.file_records(str(step))
    (step / failures.META).write_text(json.dumps(settings))
    return step.parent


def _job(processes=1, **hp):
    hyperparameters = {"steps": 24, "subset": 2000, "global_batch": 32, "micro_batch": 8, **hp}
    train = {"train": DATA_DIR / "catalog" / "train"}
    return Job("resume", hyperparameters, train, entry_point="train_elastic.py", processes_per_host=processes)


def test_check_resume_keeps_the_global_batch_on_another_world_size(tmp_path):
    checkpoints = _checkpoint(tmp_path)
    assert failures.check_resume(checkpoints, _job(1))["accumulation_now"] == 4
    assert failures.check_resume(checkpoints, _job(4))["accumulation_now"] == 1


@pytest.mark.parametrize(
    "job, says",
    [
        (_job(3), "3 rank(s) cannot split it (32 is not a multiple of 3 x 8)"),
        (_job(1, dim=96), "dim: the checkpoint's 64, this job's 96"),
        (_job(1, lr=0.02), "lr: the checkpoint's 0.01, this job's 0.02"),
        (_job(1, micro_batch=4), "micro_batch"),
    ],
)
def test_check_resume_refuses_before_launch_naming_why(tmp_path, job, says):
    with pytest.raises(failures.ResumeRefused, match="") as refused:
        failures.check_resume(_checkpoint(tmp_path), job)
    assert says in str(refused.value)


def test_check_resume_refuses_an_empty_or_incomplete_directory(tmp_path):
    (tmp_path / "step-000004").mkdir()  # no meta.json: written last, so this one never finished
    with pytest.raises(failures.ResumeRefused, match="no complete checkpoint"):
        failures.check_resume(tmp_path, _job(1))


def test_the_innermost_frame_of_the_training_code_is_read_from_either_tool():
    py_spy = (
        "Thread 1 (idle)\n    all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
        "    average_gradients (train_elastic.py:167)\n"
    )
    handler = (
        '  File "/x/torch/distributed/distributed_c10d.py", line 5356 in barrier\n'
        '  File "/y/code/container.py", line 81 in leave\n'
    )
    assert failures.innermost_own_frame(py_spy) == "average_gradients (train_elastic.py:167)"
    assert failures.innermost_own_frame(handler) == "leave (container.py:81)"
    assert failures.innermost_own_frame("nothing here") == ""


def test_py_spy_reads_a_live_process_or_says_why_not():
    ok, why = failures.py_spy_dump(2**22 + 12345)  # no such process
    assert not ok and "pid" in why
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time\ndef waiting_here():\n    time.sleep(60)\nwaiting_here()"]
    )
    try:
        time.sleep(1.0)
        ok, text = failures.py_spy_dump(sleeper.pid)
        assert ok, text
        assert "waiting_here" in text and "\x1b[" not in text
    finally:
        sleeper.kill()
        sleeper.wait()


def test_torchrun_restarts_a_crashed_rank_in_place_and_the_group_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """``PET_MAX_RESTARTS=1`` under the runner's (and SageMaker's) static rendezvous: before
    ``ranks.Dist.restart_store`` the restarted group read its dead predecessors' addresses from torchrun's store and
    failed (``Gloo connectFullMesh ... Connection refused``); now it resumes at the checkpoint's step, redoes the
    steps after it with the same losses and completes, and no process outlives it."""
    monkeypatch.setattr(restarts, "LocalRunner", functools.partial(LocalRunner, runs_dir=tmp_path / "jobs"))
    hp = {"steps": 10, "subset": 800, "global_batch": 32, "micro_batch": 8, "dist_timeout_s": 20}
    job = Job(
        "restart",
        {**hp, "fault": "crash", "fault_rank": 0, "fault_step": 7, "checkpoint_every": 5},
        {"train": DATA_DIR / "catalog" / "train"},
        entry_point="train_elastic.py",
        processes_per_host=2,
        environment={"PET_MAX_RESTARTS": "1", "LOGLEVEL": "INFO"},
    )
    d = restarts.restart_drill(job, resolve("local_cpu"))  # raises DrillFailed, naming what did not happen
    assert (d.crash_step, d.checkpoint_step, d.restarts, d.resume_step) == (7, 5, 1, 5)
    assert d.redone == [6] and d.redone_same_loss and d.last_step == 10 and d.result.status == "Completed"
    assert d.processes_left == 0


def test_a_restarted_group_does_not_see_what_the_first_attempt_left_in_torchruns_store(monkeypatch):
    """torchrun's static rendezvous keeps one store across restarts: the first attempt's keys (a rank's address) stay
    there. A restarted group's store (``TORCHELASTIC_RESTART_COUNT`` > 0) is prefixed per attempt, so a restarted rank
    waits for its peer's new address instead of reading the dead one's."""
    import datetime

    import torch.distributed as dist

    import ranks

    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=5), wait_for_workers=False)
    server.set("rank_0_address", "the first attempt's")
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(server.port), "TORCHELASTIC_USE_AGENT_STORE": "True"}
    for k, v in {**env, "TORCHELASTIC_RESTART_COUNT": "0"}.items():
        monkeypatch.setenv(k, v)
    assert ranks.Dist.restart_store(2) is None  # a first start: init_process_group uses torchrun's store as it is
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    store = ranks.Dist.restart_store(2, datetime.timedelta(seconds=1))
    assert not store.check(["rank_0_address"])
    store.set("rank_0_address", "the restart's")
    assert ranks.Dist.restart_store(2, datetime.timedelta(seconds=1)).get("rank_0_address") == b"the restart's"
    assert server.get("rank_0_address") == b"the first attempt's"


def test_the_written_out_adamw_is_torch_s_adamw_bit_for_bit():
    """train_elastic.py writes AdamW out (torch.optim imports torch._dynamo, seconds per rank at start-up); its
    update must stay torch.optim.AdamW's single-tensor one, to the last bit, over steps and weight decay."""
    import torch

    import train_elastic

    def trained(make_optimizer) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        optimizer = make_optimizer(model)
        for _ in range(20):
            loss = torch.nn.functional.cross_entropy(model(torch.randn(5, 6)), torch.randint(0, 3, (5,)))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return [p.detach().clone() for p in model.parameters()]

    ours = trained(lambda m: train_elastic.AdamW(m, lr=3e-2))
    torchs = trained(lambda m: torch.optim.AdamW(m.parameters(), lr=3e-2, foreach=False))
    assert all(torch.equal(a, b) for a, b in zip(ours, torchs))
    assert not torch.equal(ours[0], trained(lambda m: train_elastic.AdamW(m, lr=3e-3))[0])  # the comparison compares
