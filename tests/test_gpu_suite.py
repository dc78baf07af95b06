"""benchmarks/gpu_suite.py: the GPU plan covers the issue's steps, a tiny CPU run measures for real, failures count.

No timing is asserted: on a CPU the suite's figures are real but its goals are never claimed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gpu_suite
import pytest
import single_gpu

REPO = Path(__file__).resolve().parent.parent


def by_name(steps):
    return {s.name: s for s in steps}


def has(command, *args):
    """``args`` appear in ``command`` side by side, in order."""
    n = len(args)
    return any(command[i : i + n] == list(args) for i in range(len(command) - n + 1))


# --- the plan --------------------------------------------------------------------------------------------------------


def test_one_gpu_plan_has_every_step_the_issue_asks_for(tmp_path):
    steps = by_name(gpu_suite.plan(tiny=False, gpus=1, out=tmp_path))
    lab01 = steps["lab01"].command  # base model (the lab's default on a GPU), full size but one epoch, fast path
    assert has(lab01, "-m", "course.run_labs", "--labs", "01", "--target", "local_gpu")
    assert "--full" in lab01 and has(lab01, "-p", "epochs", "1")
    assert "fast-path" in steps["lab01"].what
    for lab in ("04", "07"):
        command = steps[f"lab{lab}"].command
        assert has(command, "--labs", lab, "--target", "local_gpu") and "--smoke" in command
    # one GPU: lab 02's NCCL parity is a row that says why it did not run, never a silent gap
    lab02 = steps["lab02"]
    assert not lab02.command and "NCCL" in lab02.reason and "one GPU per rank" in lab02.reason
    assert not steps["lab04_gpu_ranks"].command and steps["lab04_gpu_ranks"].reason
    random, titles = steps["bench_random"].command, steps["bench_titles"].command
    assert has(random, "--device", "cuda") and has(random, "--modes", "random")
    assert has(random, "--batch_sizes", "256,64")
    assert has(titles, "--device", "cuda") and has(titles, "--modes", "titles")
    assert random[1] == titles[1] == str(REPO / "benchmarks" / "single_gpu.py")
    assert has(random, "--out", str(tmp_path / "bench_random.json"))


def test_two_gpus_run_lab02_on_them(tmp_path):
    steps = by_name(gpu_suite.plan(tiny=False, gpus=2, out=tmp_path))
    assert has(steps["lab02"].command, "--labs", "02", "--target", "local_gpu")
    assert "lab04_gpu_ranks" not in steps


def test_tiny_plan_is_the_same_commands_with_cpu_parameters(tmp_path):
    gpu, tiny = by_name(gpu_suite.plan(False, 2, tmp_path)), by_name(gpu_suite.plan(True, 0, tmp_path))
    assert set(tiny) == set(gpu)
    for name, step in tiny.items():
        assert step.command[:3] == gpu[name].command[:3]  # same runner or benchmark: only parameters differ
        assert "local_gpu" not in step.command and "cuda" not in step.command
    bench = tiny["bench_random"].command
    # the tiny suite's benchmark arguments are single_gpu.py's documented smoke check, and its parser takes them
    doc = single_gpu.__doc__
    documented = " ".join(doc[doc.index("--device cpu") :].split("#")[0].replace("\\", " ").split())
    smoke = gpu_suite.CPU_BENCH
    assert " ".join(smoke) == documented
    args = single_gpu.parse_args(smoke)
    assert (str(args.device), args.model_size, args.batch_sizes) == ("cpu", "tiny", [8])
    assert has(bench, *smoke) and has(tiny["lab01"].command, "--target", "local_cpu")
    chosen = gpu_suite.select(list(tiny.values()), None, tiny=True, extra=[])
    assert [s.name for s in chosen] == list(gpu_suite.TINY_DEFAULT)


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("helpers.targets.local_gpu_count", lambda: 1)
    monkeypatch.setattr(gpu_suite, "run_suite", lambda *a, **k: pytest.fail("a dry run ran the suite"))
    assert gpu_suite.main(["--dry-run", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    for name in ("lab01", "lab02", "lab04", "lab04_gpu_ranks", "lab07", "bench_random", "bench_titles"):
        assert f"  {name}: " in text
    assert "not run: one GPU: NCCL needs one GPU per rank" in text and "--batch_sizes 256,64" in text
    assert not any(tmp_path.iterdir())


def test_gpu_mode_without_a_gpu_refuses_and_step_names_are_checked(tmp_path, monkeypatch):
    monkeypatch.setattr("helpers.targets.local_gpu_count", lambda: 0)
    with pytest.raises(SystemExit, match="no GPU here.*--tiny"):
        gpu_suite.main(["--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown step 'lab99': the steps are lab01"):
        gpu_suite.main(["--tiny", "--dry-run", "--steps", "lab99"])
    with pytest.raises(SystemExit, match="unknown step 'bench'"):
        gpu_suite.main(["--tiny", "--dry-run", "--step-args", "bench", "--steps 1"])
    with pytest.raises(SystemExit, match="--timeout-for lab07: not a chosen step"):
        gpu_suite.main(["--tiny", "--steps", "lab01", "--timeout-for", "lab07", "60", "--out", str(tmp_path)])


# --- failures --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_failing_step_is_recorded_and_the_suite_goes_on(tmp_path):
    py = sys.executable
    steps = [
        gpu_suite.Step("boom", "fails", [py, "-c", "raise SystemExit('boom: a bad parameter')"]),
        gpu_suite.Step("hang", "outlives its timeout", [py, "-c", "import time; time.sleep(60)"]),
        gpu_suite.Step("fine", "passes", [py, "-c", "print('fine')"]),
        gpu_suite.Step("two_gpus", "needs two GPUs", reason="one GPU here"),
    ]
    # a step's own limit (--timeout-for) wins over the suite's: the lease shares its minutes out this way
    report, code = gpu_suite.run_suite(steps, tmp_path, tiny=True, timeout_s=30, whole_suite=False, limits={"hang": 3})
    assert code == 1 and report["failed"] == ["boom", "hang"]
    rows = {s["name"]: s for s in report["steps"]}
    assert rows["boom"]["error"].startswith("exit status 1; boom: a bad parameter")
    assert rows["hang"]["error"].startswith("timed out after 3 s") and rows["hang"]["seconds"] < 30
    assert rows["fine"]["status"] == "ok" and rows["two_gpus"]["status"] == "not run"
    assert rows["two_gpus"]["error"] == "one GPU here"
    assert json.loads((tmp_path / "report.json").read_text())["failed"] == ["boom", "hang"]


@pytest.mark.slow
def test_a_step_given_a_bad_parameter_fails_with_its_message_and_a_non_zero_exit(tmp_path):
    code = gpu_suite.main(["--tiny", "--steps", "lab01", "--step-args", "lab01", "-p epochz 1", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text())
    (lab01,) = report["steps"]
    assert code == 1 and lab01["status"] == "failed" and report["failed"] == ["lab01"]
    assert "exit status 2" in lab01["error"] and "did you mean 'epochs'" in lab01["error"]
    assert has(lab01["command"].split(), "-p", "epochz", "1")


# --- a real run, tiny, on the CPU ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.labs  # it reads lab 01's one run, made in the labs' step
def test_tiny_run_measures_for_real_and_claims_no_goal_on_a_cpu(tmp_path, lab_run):
    """The benchmark steps run for real; the lab step's figures are read, as the suite reads them, from the lab
    runner's summary of lab 01's one run in this session (its tiny step runs the same runner, the same way)."""
    import torch
    import transformers
    from single_gpu import GOALS

    from course import run_labs

    benches = [name for name in gpu_suite.TINY_DEFAULT if name.startswith("bench_")]
    assert gpu_suite.main(["--tiny", "--steps", *benches, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == benches and report["failed"] == []
    assert all(s["status"] == "ok" and s["seconds"] > 0 and Path(s["log"]).is_file() for s in steps.values())
    assert report["commands"] == [s["command"] for s in steps.values()]
    (tmp_path / "lab01").mkdir()
    run_labs.write_summary([lab_run("01_single_gpu").run], tmp_path / "lab01", {"target": "local_cpu"})
    lab, error = gpu_suite.read_lab(tmp_path / "lab01" / "summary.json")  # the lab runner's key figures
    assert error == "" and 0 < lab["val_accuracy"] <= 1 and lab["samples_per_sec"] > 0
    assert lab["fast_path_speedup"] > 0
    assert steps["bench_random"]["figures"]["ours_seq_b8_samples_per_sec"] > 0
    assert steps["bench_titles"]["figures"]["ours_bucketed_b32_speedup_vs_padded"] > 0
    assert (report["torch"], report["transformers"]) == (torch.__version__, transformers.__version__)
    assert report["python"] and report["device"].startswith("cpu")
    goals = {g["goal"]: g for g in report["goals"]}
    assert {g[0] for g in GOALS} < set(goals)
    assert all(g["status"] == "not measured" for g in goals.values())  # never passed (nor failed) on a CPU
    bucketing = goals["bucketing x pad-to-128 on real titles"]
    assert bucketing["figure"] > 0 and "H100" in bucketing["note"]  # measured, but the goal is an H100's


def test_auto_compile_mode_gives_cuda_graphs_to_small_compiled_gpu_batches_only():
    """--compile_mode auto: CUDA graphs up to single_gpu.CUDA_GRAPHS_UP_TO rows on a GPU with compile on; inductor's
    default for larger batches, off a GPU or without compile; a mode given by name is kept."""
    import argparse

    import torch

    def mode(device, compile_on, batch, given="auto"):
        a = argparse.Namespace(device=torch.device(device), compile=compile_on, compile_mode=given)
        return single_gpu.compile_mode(a, argparse.Namespace(batch=batch))

    small, large = single_gpu.CUDA_GRAPHS_UP_TO, single_gpu.CUDA_GRAPHS_UP_TO + 1
    assert mode("cuda", True, small) == "reduce-overhead" and mode("cuda", True, large) == "default"
    assert mode("cuda", False, small) == "default" and mode("cpu", True, small) == "default"
    assert mode("cuda", True, large, given="reduce-overhead") == "reduce-overhead"
    assert mode("cuda", True, small, given="default") == "default"
