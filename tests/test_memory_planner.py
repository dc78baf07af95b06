"""The memory planner: its arithmetic against published numbers, its estimates against train_lm.py's measured
bytes (bf16 FSDP policy with activation checkpointing), the shapes train_lm.py builds and the FSDP sharding it picks
for the planner's SMP degrees, and SMP v2 degrees that cannot run refused before launch."""

from __future__ import annotations

import pytest

from helpers import jobs
from helpers.checks import findings
from helpers.jobs import on_sagemaker
from helpers.planning import memory
from helpers.targets import resolve

import smp  # noqa: E402  (the container's SMP v2 path: the FSDP sharding it picks)
import train_lm  # noqa: E402  (the container's script: the shapes it builds)

GIB = memory.GIB


def test_parameter_counts_match_the_published_models():
    assert memory.KNOWN["llama-7b"].params == 6_738_415_616  # Llama-2-7B, as its checkpoint reports
    assert memory.KNOWN["llama-13b"].params == 13_015_864_320
    assert memory.KNOWN["llama-1b"].params == 1_235_814_400  # Llama-3.2-1B (embedding tied to the LM head)


def test_model_state_is_16_bytes_per_parameter_divided_as_each_strategy_says():
    m = memory.KNOWN["llama-7b"]
    ddp = memory.estimate(m, "ddp", world=8)
    assert ddp.params + ddp.grads + ddp.optimizer == 16 * m.params  # fp32 master weights, grads, Adam's two moments
    zero = memory.estimate(m, "zero", world=8)
    assert zero.optimizer == 8 * m.params // 8 and zero.params == 4 * m.params
    fsdp = memory.estimate(m, "fsdp", world=8)
    assert fsdp.params + fsdp.grads + fsdp.optimizer == pytest.approx(16 * m.params / 8, rel=1e-6)
    hybrid = memory.estimate(m, "fsdp", world=16, shard=8)  # two instances, sharded inside each
    assert hybrid.optimizer == fsdp.optimizer and hybrid.label == "fsdp+hybrid8"


def test_activations_follow_the_saved_tensors_of_a_llama_block():
    m = memory.ModelShape("toy", hidden=128, layers=2, heads=4, kv_heads=4, ffn=344, vocab=2074)
    tokens = 1024
    # fp32, per block: 10 x hidden + 4 x ffn + heads + 2 floats per token; the head: 3 x hidden + 1 + vocab floats
    # and 16 bytes of int64 inputs and targets
    per_token = 2 * (10 * 128 + 4 * 344 + 4 + 2) * 4 + (3 * 128 + 1 + 2074) * 4 + 16
    assert memory.activation_bytes(m, tokens, "fp32")[0] == tokens * per_token
    saved, recompute = memory.activation_bytes(m, tokens, "fp32", checkpointing=True)
    assert saved == tokens * (2 * 128 * 4 + (3 * 128 + 1 + 2074) * 4 + 16) and recompute > 0
    halved = memory.activation_bytes(m, tokens, "fp32", tp=2)[0]
    assert saved < halved < memory.activation_bytes(m, tokens, "fp32")[0]


@pytest.mark.slow
def test_the_planner_describes_the_model_train_lm_builds(small_catalog):
    from catalog_data import load_tokenizer

    vocab = memory.catalog_vocab(small_catalog)
    assert vocab == len(load_tokenizer(str(small_catalog / "train" / "tokenizer.json")))  # what train_lm.py uses
    args = train_lm.parse_args(["--model_size", "tiny"])
    model = train_lm.build_model(args, vocab)
    shape = memory.train_lm_shape("tiny", vocab)
    assert shape == memory.ModelShape.from_config(model.config, name=shape.name)
    assert shape.params == sum(p.numel() for p in model.parameters())
    big = memory.train_lm_shape("1b", vocab)  # not Llama-3.2-1B: 32 KV heads, untied, the catalogue's vocabulary
    assert (big.kv_heads, big.tied, big.vocab) == (32, False, vocab) and memory.KNOWN["llama-1b"].kv_heads == 8
    with pytest.raises(memory.PlanError, match="no --model_size"):
        memory.train_lm_shape("70b", vocab)


def test_train_lm_shards_as_the_planner_plans_under_smp():
    one = memory.recommend("llama-13b", "ml.p4d.24xlarge").chosen  # one instance: one group of all 8 GPUs
    assert smp.smp_sharding(one.smp(), one.world) == "FULL_SHARD"
    two = memory.estimate("llama-7b", "fsdp", world=16, shard=8)  # two instances, sharded inside each
    assert smp.smp_sharding(two.smp(), two.world) == "HYBRID_SHARD"
    tp8 = memory.estimate("llama-7b", "fsdp", world=8, tp=8)  # one data-parallel rank: nothing to replicate
    assert smp.smp_sharding(tp8.smp(), tp8.world) == "FULL_SHARD"
    assert smp.smp_sharding({}, 8) == "FULL_SHARD"  # SMP's default degree 0: shard across every rank
    assert smp.smp_sharding({"hybrid_shard_degree": 1}, 8) == "NO_SHARD"
    with pytest.raises(SystemExit, match="hybrid_shard_degree"):
        smp.smp_sharding({"hybrid_shard_degree": 3}, 8)


def test_recommendations_for_real_cases():
    rows = {
        (name, it): memory.recommend(name, it)
        for name in ("llama-1b", "llama-7b", "llama-13b")
        for it in ("ml.p4d.24xlarge", "ml.p5.48xlarge")
    }
    assert rows["llama-1b", "ml.p4d.24xlarge"].chosen.label == "ddp"  # 1B: plain data parallel fits in 40 GB
    assert rows["llama-7b", "ml.p4d.24xlarge"].chosen.label == "fsdp"  # 7B: 108 GB of state must be sharded
    assert rows["llama-13b", "ml.p4d.24xlarge"].chosen.label == "fsdp+ckpt"  # 13B on 40 GB: and checkpointing
    assert rows["llama-13b", "ml.p5.48xlarge"].chosen.label == "fsdp"  # 80 GB H100s need no recomputation
    for r in rows.values():
        assert r.chosen.fits and r.chosen.total <= r.chosen.gpu_bytes
        assert all(not e.fits for e in r.tried[:-1])  # the first that fits, simplest first
    assert rows["llama-13b", "ml.p4d.24xlarge"].chosen.smp() == {"hybrid_shard_degree": 8, "tensor_parallel_degree": 1}


def test_a_model_too_big_for_one_instance_needs_more():
    huge = memory.ModelShape("70b-ish", hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, vocab=128256)
    assert memory.recommend(huge, "ml.p4d.24xlarge").chosen is None
    assert memory.recommend(huge, "ml.p4d.24xlarge", instance_count=8).chosen is not None


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(strategy="pp"), "choose one of"),
        (dict(strategy="fsdp", world=8, tp=3), "must divide the 8 GPUs"),
        (dict(strategy="ddp", world=8, tp=2), "combine tensor parallel with 'fsdp'"),
        (dict(strategy="fsdp", world=8, shard=3), "sharding group 3"),
        (dict(strategy="fsdp", precision="fp8"), "precision"),
    ],
)
def test_impossible_plans_say_why(kwargs, match):
    with pytest.raises(memory.PlanError, match=match):
        memory.estimate("llama-7b", **kwargs)


def test_a_gpu_plan_needs_a_gpu_instance():
    with pytest.raises(memory.PlanError, match="no GPUs"):
        memory.recommend("llama-1b", "ml.m5.xlarge")


@pytest.mark.slow
def test_estimate_matches_the_measured_bf16_fsdp_run_with_checkpointing(small_catalog, tmp_path):
    from test_model_parallel import launch

    metrics, _ = launch(
        small_catalog, tmp_path, "--strategy", "fsdp", "--precision", "bf16", "--activation_checkpointing", "true"
    )
    rows = memory.compare(metrics, tmp_path / "model" / "config.json")
    assert [r["component"] for r in rows] == ["params", "grads", "optimizer", "activations"]
    for r in rows:
        assert r["ratio"] == pytest.approx(1.0, abs=0.01), r


def smp_job(**smp):
    return jobs.Job(
        name="lab04-smp",
        entry_point="train_lm.py",
        channels=jobs.catalog_channels(),
        hyperparameters={"strategy": "fsdp"},
        distribution="smp",
        smp=smp,
    )


@pytest.mark.parametrize(
    "smp,target,error,match",
    [
        ({"tensor_parallel_degree": 3}, "ml.p4d.24xlarge", findings.ProcessCountError, "must divide the 8"),
        ({"tensor_parallel_degree": 16}, "ml.p5.48xlarge", findings.ProcessCountError, "must divide the 8"),
        ({"hybrid_shard_degree": 3}, "ml.p4d.24xlarge", findings.ProcessCountError, "hybrid_shard_degree=3"),
        ({"pipeline_parallel_degree": 2}, "ml.p4d.24xlarge", findings.ProcessCountError, "unknown SMP"),
        ({"hybrid_shard_degree": 8}, "ml.g5.48xlarge", findings.UnsupportedFeature, "SMP v2 does not run"),
    ],
)
def test_smp_degrees_that_cannot_run_are_refused_before_launch(smp, target, error, match):
    with pytest.raises(error, match=match):
        jobs.preflight(smp_job(**smp), resolve(target))


@pytest.mark.slow
def test_smp_dry_run_carries_the_degrees_and_the_smp_image():
    import json

    plan = memory.recommend("llama-13b", "ml.p4d.24xlarge").chosen
    dry = on_sagemaker(smp_job(**plan.smp()), resolve("ml.p4d.24xlarge"), echo=False)
    assert "smdistributed-modelparallel" in dry.request["AlgorithmSpecification"]["TrainingImage"]
    assert json.loads(dry.request["HyperParameters"]["mp_parameters"]) == plan.smp()
    assert dry.request["HyperParameters"]["strategy"] == "fsdp"
