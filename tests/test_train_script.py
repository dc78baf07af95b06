"""The container-side training script, run by hand as a user would (no runner, no SM_* variables)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from conftest import REPO, TINY, run_script

from helpers.job_spec import METRIC_DEFINITIONS, parse_metric_line
from sagemaker_standin.ports import free_port

import options  # noqa: E402  (the container's options: str2bool and its spellings)
import ranks  # noqa: E402  (the container's rank, device and precision)
import train  # noqa: E402  (the container's script, imported for its argument parsing)

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

CATALOG = REPO / "data" / "catalog"  # the repository's own: no catalogue to build for a few steps


def tiny_run(out, *extra: str) -> list[str]:
    """train.py on 64 rows of the catalogue (2 steps an epoch): seconds, most of them importing torch."""
    paths = {"train": CATALOG / "train", "validation": CATALOG / "validation"}
    paths.update(model_dir=out / "model", output_data_dir=out / "data")
    settings = {**TINY, **paths, "subset": 64, "eval_subset": 32}
    return ["train.py", *[x for k, v in settings.items() for x in (f"--{k}", str(v))], *extra]


@pytest.mark.parametrize(
    "text,value", [("False", False), ("false", False), ("0", False), ("True", True), ("true", True), ("1", True)]
)
def test_booleans_from_sagemaker_strings(text, value):
    assert options.str2bool(text) is value


def test_the_notebook_side_check_accepts_the_booleans_this_script_does():
    """The check reads the spellings options.py publishes (its --schema): the ones str2bool reads, and only those."""
    from helpers import hyperparameters
    from helpers.job_spec import SOURCE_DIR

    true, false = hyperparameters.booleans(SOURCE_DIR / "train.py")
    assert (true, false) == (options.TRUE, options.FALSE) and not set(true) & set(false)
    for text in true + false:
        assert options.str2bool(text) is (text in true)
        assert options.str2bool(text.upper()) is (text in true)
    assert hyperparameters.booleans(SOURCE_DIR / "train_lm.py") == (true, false)  # one place, for every script


@pytest.mark.parametrize("capability, auto", [((7, 0), "fp32"), ((7, 5), "fp32"), ((8, 0), "bf16"), ((9, 0), "bf16")])
def test_auto_precision_is_bf16_only_where_tensor_cores_do_it(monkeypatch, capability, auto):
    monkeypatch.setattr(ranks.torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(ranks.torch.cuda, "get_device_name", lambda device=None: "a GPU")
    gpu = ranks.torch.device("cuda", 0)
    assert ranks.pick_precision("auto", gpu) == auto
    if auto == "fp32":  # a V100 or T4 would emulate bf16, slower than fp32: their mixed precision is fp16
        assert ranks.pick_precision("bf16", gpu) == "fp16"
        assert ranks.pick_precision("bf16", gpu, without_bf16="fp32") == "fp32"
    else:
        assert ranks.pick_precision("bf16", gpu) == "bf16"


def test_bad_boolean_is_an_error():
    with pytest.raises(Exception, match="expected a boolean"):
        options.str2bool("maybe")


def test_unknown_hyperparameters_are_ignored_not_fatal():
    args = train.parse_args(["--epochs", "2", "--sagemaker_program", "train.py", "--mystery", "1"])
    assert args.epochs == 2 and args.unknown == ["--sagemaker_program", "train.py", "--mystery", "1"]


def test_paths_come_from_the_contract(monkeypatch):
    monkeypatch.setenv("SM_CHANNEL_TRAIN", "/x/train")
    monkeypatch.setenv("SM_MODEL_DIR", "/x/model")
    args = train.parse_args([])
    assert args.train == "/x/train" and args.model_dir == "/x/model"
    assert args.checkpoint_dir == "/opt/ml/checkpoints"


@pytest.fixture(scope="module")
def trained(small_catalog, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    args = [
        "train.py",
        "--train",
        str(small_catalog / "train"),
        "--validation",
        str(small_catalog / "validation"),
        "--model_dir",
        str(out / "model"),
        "--output_data_dir",
        str(out / "data"),
        "--subset",
        "3000",
        "--epochs",
        "2",
        *[x for k, v in TINY.items() for x in (f"--{k}", str(v))],
        "--log_every",
        "20",
    ]
    done = run_script(args, env={"SM_OUTPUT_DIR": str(out / "output")})
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_runs_by_hand_and_learns(trained):
    out, log = trained
    metrics = json.loads((out / "data" / "metrics.json").read_text())
    summary = metrics["summary"]
    final = [h for h in metrics["history"] if h["kind"] == "final"][0]
    assert final["val_accuracy"] > 0.3  # 44 classes: chance is 2%, the largest class 9%
    assert summary["samples_per_sec"] > 0 and summary["precision"] == "fp32" and summary["world_size"] == 1
    assert "mfu" not in summary  # MFU only where a GPU gives it a meaning


def test_metric_lines_are_scrapeable_by_sagemaker_definitions(trained):
    _, log = trained
    for definition in METRIC_DEFINITIONS[:4]:
        values = re.findall(definition["Regex"], log)
        assert values and all(float(v) == float(v) for v in values), definition["Name"]
    parsed = [parse_metric_line(l) for l in log.splitlines()]
    assert {p["kind"] for p in parsed if p} >= {"train", "eval", "final"}


def test_saved_model_loads_for_inference(trained):
    import torch
    from transformers import DistilBertForSequenceClassification, PreTrainedTokenizerFast

    model_dir = trained[0] / "model"
    model = DistilBertForSequenceClassification.from_pretrained(model_dir, local_files_only=True).eval()
    tok = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"), pad_token="[PAD]")
    labels = json.loads((model_dir / "labels.json").read_text())
    with torch.no_grad():
        logits = model(
            **tok(["[무료배송] 블랙 롱원피스", "stainless frying pan 28cm"], return_tensors="pt", padding=True)
        ).logits
    assert logits.shape == (2, len(labels))


def test_fp16_on_cpu_is_refused_with_a_clear_message(small_catalog, tmp_path):
    done = run_script(
        [
            "train.py",
            "--train",
            str(small_catalog / "train"),
            "--validation",
            str(small_catalog / "validation"),
            "--precision",
            "fp16",
        ],
        env={"SM_OUTPUT_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode != 0 and "fp16 needs a GPU" in done.stderr
    assert "fp16 needs a GPU" in (tmp_path / "failure").read_text()


def test_a_bad_hyperparameter_value_is_the_failure_reason_not_an_exit_code(tmp_path):
    done = run_script(["train.py", "--precision", "bf32"], env={"SM_OUTPUT_DIR": str(tmp_path)})
    assert done.returncode != 0 and "usage:" in done.stderr
    assert "argument --precision: invalid choice: 'bf32'" in (tmp_path / "failure").read_text()


def test_a_rank_with_no_validation_rows_does_not_hang_the_others(small_catalog, tmp_path):
    # one validation row for two ranks: rank 1 evaluates nothing and must still meet rank 0 in every collective
    done = run_script(
        [
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            "train.py",
            "--train",
            str(small_catalog / "train"),
            "--validation",
            str(small_catalog / "validation"),
            "--model_dir",
            str(tmp_path / "model"),
            "--output_data_dir",
            str(tmp_path / "out"),
            *[x for k, v in TINY.items() for x in (f"--{k}", str(v))],
            "--subset",
            "64",
            "--eval_subset",
            "1",
            "--max_steps",
            "2",
        ],
        env={"SM_OUTPUT_DIR": str(tmp_path), "GLOO_SOCKET_IFNAME": "lo"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[final]" in done.stdout and "val_accuracy=" in done.stdout


def test_global_batch_must_split_across_ranks(small_catalog, tmp_path):
    done = run_script(
        [
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            "train.py",
            "--train",
            str(small_catalog / "train"),
            "--validation",
            str(small_catalog / "validation"),
            "--batch_size",
            "33",
        ],
        env={"SM_OUTPUT_DIR": str(tmp_path), "GLOO_SOCKET_IFNAME": "lo"},
    )
    assert done.returncode != 0 and "must divide by the 2 ranks" in done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--lr", "inf"], "argument --lr: 'inf' is out of range: it must be a finite float > 0"),  # a NaN model
        (["--lr", "0"], "argument --lr: '0' is out of range: it must be a finite float > 0"),
        (["--epochs", "0"], "argument --epochs: '0' is out of range: it must be a finite float > 0"),  # 0 steps
        (["--max_steps", "-1"], "argument --max_steps: '-1' is out of range: it must be an int >= 0"),
        (["--batch_size", "-4"], "argument --batch_size: '-4' is out of range: it must be an int >= 1"),
        (["--log_every", "0"], "argument --log_every: '0' is out of range: it must be an int >= 1"),  # x % 0
    ],
)
def test_a_value_that_cannot_train_fails_before_it_starts_with_the_range(argv, says):
    """The parse's SystemExit is what container.run writes as the FailureReason."""
    with pytest.raises(SystemExit, match=re.escape(says)):
        train.parse_args(argv)


@pytest.mark.parametrize(
    "steps, says",
    [
        (2, "train_loss is nan at step 2"),  # checked at each log step, on the loss already reduced across ranks
        (1, "val_loss is nan at step 1"),  # the last update did it: the final evaluation sees it, before the save
    ],
)
def test_a_diverging_loss_fails_the_job_and_saves_no_model(tmp_path, steps, says):
    # a huge but finite lr passes every check before launch; the first update sends the weights past fp32's range
    done = run_script(
        tiny_run(tmp_path, "--lr", "1e30", "--max_steps", str(steps), "--log_every", "1"),
        env={"SM_OUTPUT_DIR": str(tmp_path / "output")},
    )
    failure = (tmp_path / "output" / "failure").read_text()
    assert done.returncode != 0 and f"{says.split()[0]}=nan" in done.stdout, done.stdout + done.stderr
    assert f"{says} (lr=1e+30, precision=fp32): training diverged, and no model is saved. Lower --lr" in failure
    assert "[final]" not in done.stdout and not (tmp_path / "model").exists()


def test_a_checkpoint_past_the_schedule_fails_instead_of_training_nothing(tmp_path):
    ckpt = ["--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "2", "--max_steps"]
    first = run_script(tiny_run(tmp_path / "a", *ckpt, "2"), env={"SM_OUTPUT_DIR": str(tmp_path / "a")})
    assert first.returncode == 0 and (tmp_path / "ckpt" / "step-00000002").is_dir(), first.stderr[-2000:]
    # a shorter schedule is an allowed change, but this run would train 0 steps and end "Completed"
    again = tiny_run(tmp_path / "b", *ckpt, "1", "--resume_allow_changes", "max_steps")
    done = run_script(again, env={"SM_OUTPUT_DIR": str(tmp_path / "b")})
    assert done.returncode != 0 and "[final]" not in done.stdout
    assert "is at step 2, past this run's last step 1: raise --max_steps" in (tmp_path / "b" / "failure").read_text()


def test_the_process_group_timeout_is_the_jobs_own(monkeypatch):
    """gloo's default (30 minutes) would leave a stalled rank hanging the job that long."""
    asked = []

    def no_process_group(backend, timeout=None):
        asked.append(timeout)
        raise SystemExit("stop here")

    monkeypatch.setattr(train, "Dist", no_process_group)
    for argv, seconds in [([], 600), (["--dist_timeout_s", "42"], 42)]:
        with pytest.raises(SystemExit, match="stop here"):
            train.main(train.parse_args(argv))
        assert asked.pop() == timedelta(seconds=seconds)


def test_progress_is_saved_and_restored_as_the_checkpoints_have_always_held_it():
    """The loop's counters go into every rank's checkpoint file as the dict it has always held (the same names, the
    same types, so a checkpoint written before Progress existed resumes too), and come back as they went."""
    import dataclasses

    import torch

    progress = train.Progress()
    flops_of = train.FlopCounter(train.build_model(train.parse_args(["--model_size", "tiny"]), 100, 5, 0))
    for width in (16, 32):
        progress.count(torch.zeros(4, width, dtype=torch.long), 8, flops_of)
    progress.window(timed=True)
    state = progress.state_dict()
    names = ["step", "epoch", "seen", "tokens", "flops", "timed_seconds", "timed_samples", "train_seconds"]
    assert list(state) == names
    assert [type(state[k]) for k in names] == [int, int, int, int, float, float, int, float]
    assert (state["step"], state["seen"], state["tokens"], state["timed_samples"]) == (2, 16, 4 * 48, 16)
    assert state["flops"] == 4 * (flops_of(16) + flops_of(32)) and state["train_seconds"] > 0
    again = train.Progress()
    again.load_state_dict(state)
    assert dataclasses.asdict(again) == state  # every counter back, the training time it had reached included
    again.start_clocks()  # a resumed job's training time goes on from the saved one
    assert again.seconds() >= state["train_seconds"]


def test_a_log_line_is_one_write_so_another_ranks_line_cannot_land_inside_it(monkeypatch):
    """Every rank prints into one log, unbuffered as SageMaker runs it: print()'s two writes (the text, then the
    newline) let another rank's line land between them and merge into one line the metric scrape misreads."""
    import io
    import sys

    writes = []

    class Log(io.StringIO):
        def write(self, s):
            writes.append(s)
            return len(s)

    monkeypatch.setattr(sys, "stdout", Log())
    ranks.say("[timing] step=10 rank=1 wait_ms=3.00")
    ranks.Dist.print(type("Master", (), {"master": True})(), "[train] step=10", "train_loss=0.5")
    assert writes == ["[timing] step=10 rank=1 wait_ms=3.00\n", "[train] step=10 train_loss=0.5\n"]
