"""train_lm.py: every strategy trains the same model to the same losses, shards what it claims, and its sharded
checkpoints load back into one plain process. One 2-rank gloo launch runs all six strategies (pipeline parallel on
the GPipe schedule); a second runs the 1F1B schedule."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_script

from helpers.planning import memory
from sagemaker_standin.ports import free_port

import sharded_checkpoint  # noqa: E402  (the container's checkpoint loader)
import tensor_parallel  # noqa: E402
import train_lm  # noqa: E402  (the container's script, imported for its argument parsing)

STRATEGIES = ["single", "ddp", "zero", "fsdp", "tp", "pp"]


def launch(catalog, out, *extra, ranks=2):
    args = [
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={ranks}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "train_lm.py",
        "--train",
        str(catalog / "train"),
        "--validation",
        str(catalog / "validation"),
        "--model_dir",
        str(out / "model"),
        "--output_data_dir",
        str(out / "data"),
        "--subset",
        "1500",
        "--max_steps",
        "4",
        "--log_every",
        "2",
        "--eval_blocks",
        "16",
        "--generate_tokens",
        "4",
        *extra,
    ]
    done = run_script(args, env={"SM_OUTPUT_DIR": str(out / "output"), "GLOO_SOCKET_IFNAME": "lo"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "data" / "metrics.json").read_text()), done.stdout


@pytest.fixture(scope="module")
def five(small_catalog, tmp_path_factory):
    out = tmp_path_factory.mktemp("lm")
    metrics, log = launch(small_catalog, out, "--strategy", ",".join(STRATEGIES), "--precision", "fp32")
    return out, {r["strategy"]: r for r in metrics["strategies"]}, metrics, log


def test_strategy_names_are_checked_before_anything_runs():
    with pytest.raises(SystemExit, match="choose one or several"):
        train_lm.parse_args(["--strategy", "ddp,zero3"])
    with pytest.raises(SystemExit, match="pick a divisor of --batch_size"):
        train_lm.parse_args(["--strategy", "pp", "--batch_size", "16", "--microbatches", "3"])
    with pytest.raises(SystemExit, match="use --strategy fsdp"):
        train_lm.parse_args(["--strategy", "ddp", "--mp_parameters", '{"tensor_parallel_degree": 2}'])
    assert train_lm.parse_args(["--strategy", "ddp, fsdp", "--sagemaker_x", "1"]).strategies == ["ddp", "fsdp"]


@pytest.mark.slow
def test_every_strategy_matches_the_single_process_losses(five):
    _, runs, _, log = five
    assert "[memory] strategy=fsdp rank=1" in log  # per-rank metric lines for the scrapers
    assert "collective_timeout_s=1800" in log  # options.LM_DIST_TIMEOUT_S (--dist_timeout_s), not the backend's default
    single = runs["single"]["losses"]
    assert len(single) == 4 and single[-1] < single[0]
    for name in STRATEGIES[1:]:
        assert runs[name]["losses"] == pytest.approx(single, rel=2e-4), name


@pytest.mark.slow
def test_each_strategy_shards_what_it_claims(five):
    _, runs, _, _ = five
    one = runs["single"]["ranks"][0]
    for name in STRATEGIES[1:]:
        assert len(runs[name]["ranks"]) == 2
    ddp, zero, fsdp, tp = (runs[n]["ranks"][0] for n in ("ddp", "zero", "fsdp", "tp"))
    assert ddp["param_bytes"] == zero["param_bytes"] == one["param_bytes"]
    assert ddp["optimizer_bytes"] == one["optimizer_bytes"]
    assert zero["optimizer_bytes"] == pytest.approx(one["optimizer_bytes"] / 2, rel=0.01)  # ZeRO-1: optimizer only
    assert zero["grad_bytes"] == one["grad_bytes"]
    for key in ("param_bytes", "grad_bytes", "optimizer_bytes"):  # FSDP: all three halve
        assert fsdp[key] == pytest.approx(one[key] / 2, rel=0.01), key
        assert one[key] / 2 < tp[key] < one[key], key  # TP splits the blocks' matrices, keeps embeddings whole
    assert ddp["activation_bytes"] == pytest.approx(one["activation_bytes"] / 2, rel=0.01)  # half the batch each
    assert fsdp["activation_bytes"] == ddp["activation_bytes"]  # gathered weights are not activations
    for row in runs["pp"]["ranks"]:  # each stage: half the layers, and the embeddings or the LM head (equal sizes)
        for key in ("param_bytes", "grad_bytes", "optimizer_bytes"):
            assert row[key] == pytest.approx(one[key] / 2, rel=0.01), (row["rank"], key)


@pytest.mark.slow
def test_pipeline_1f1b_matches_the_single_process_losses(five, small_catalog, tmp_path):
    _, runs, _, _ = five
    metrics, _ = launch(
        small_catalog,
        tmp_path,
        "--strategy",
        "pp",
        "--pp_schedule",
        "1f1b",
        "--microbatches",
        "8",
        "--precision",
        "fp32",
    )
    pp = metrics["strategies"][0]
    # micro-batch mean losses, averaged, are the batch's mean loss: only summation order differs from one process
    assert pp["losses"] == pytest.approx(runs["single"]["losses"], rel=2e-4)
    assert pp["reloaded_val_loss"] == pytest.approx(pp["val_loss"], abs=1e-5)


@pytest.mark.slow
def test_planner_predicts_the_measured_bytes(five):
    out, _, metrics, _ = five
    rows = memory.compare(metrics, out / "model" / "config.json")
    assert {r["strategy"] for r in rows} == set(STRATEGIES) - {"pp"}  # the planner has no pipeline model
    for r in rows:
        assert r["ratio"] == pytest.approx(1.0, abs=0.01), r


@pytest.mark.slow
def test_sharded_checkpoints_load_into_one_plain_process(five):
    out, runs, metrics, _ = five
    args = train_lm.parse_args(["--model_size", "tiny", "--block_size", "64"])
    weights = {}
    for name in STRATEGIES:
        r = runs[name]
        assert r["reloaded_val_loss"] == pytest.approx(r["val_loss"], abs=1e-5), name  # rank 0 checked in-job
        assert len(r["checkpoint_files"]) == (1 if name == "single" else 2)  # one shard file per writing rank
        model = sharded_checkpoint.load_sharded(str(out / "model" / "sharded" / name), args)  # here: no process group
        assert not any(hasattr(p, "to_local") for p in model.parameters())
        weights[name] = model.state_dict()
    for name in STRATEGIES[1:]:  # the same training, however sharded, gives the same weights (up to summation order)
        for key, value in weights["single"].items():
            drift = (weights[name][key] - value).norm() / value.norm()
            assert drift < 1e-3, (name, key, drift.item())
    from transformers import LlamaForCausalLM

    consolidated = LlamaForCausalLM.from_pretrained(out / "model", local_files_only=True)
    prompt = torch.tensor([[2, 5, 6, 7]])
    generated = consolidated.generate(prompt, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert 4 < generated.shape[1] <= 7 and metrics["sample"]["generated"]


@pytest.mark.slow
def test_tp_refuses_heads_that_do_not_split():
    from types import SimpleNamespace

    args = train_lm.parse_args(["--model_size", "tiny", "--strategy", "tp"])
    model = train_lm.build_model(args, vocab_size=100)  # 4 heads
    with pytest.raises(SystemExit, match="must divide evenly"):
        tensor_parallel.apply_tp(model, SimpleNamespace(world=3, device=torch.device("cpu")), args)


@pytest.mark.slow
def test_two_hosts_keep_their_shards_and_skip_the_single_process_reload(small_catalog, runner):
    from helpers import jobs, targets

    job = jobs.Job(
        "lm-2hosts",
        {"strategy": "fsdp", "subset": 600, "max_steps": 2, "log_every": 1, "eval_blocks": 4, "precision": "fp32"},
        jobs.catalog_channels(small_catalog),
        entry_point="train_lm.py",
        processes_per_host=1,
        instance_count=2,
    )
    result = runner.run(job, targets.resolve("local_cpu"))
    assert result.status == "Completed"
    assert any("reload skipped: the shards are spread over 2 hosts" in line for line in result.log_tail)
    for host in ("algo-1", "algo-2"):  # each host wrote its own rank's shard
        assert list((result.run_dir / host / "model" / "sharded" / "fsdp").glob("*.distcp"))
