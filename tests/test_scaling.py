"""The scaling planner's arithmetic: ring all-reduce volume over bandwidth, overlap with backward, epochs and cost."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from helpers import plots  # noqa: E402
from helpers.planning import (
    instances,  # noqa: E402
    scaling,
)

MB = 2**20
EXACT = scaling.ClusterAssumptions(link_efficiency=1.0, intra_latency_s=0.0, inter_latency_s=0.0, overhead_s=0.0)


def test_ring_allreduce_moves_2_n_minus_1_over_n_of_the_bytes():
    # 8 ranks, 1 GB over 100 GB/s: 2 * 7/8 * 1e9 / 1e11 = 17.5 ms, plus 14 hops of latency
    assert scaling.ring_allreduce_s(1e9, 8, 100.0) == pytest.approx(0.0175)
    assert scaling.ring_allreduce_s(1e9, 8, 100.0, hop_latency_s=1e-5) == pytest.approx(0.0175 + 14e-5)
    assert scaling.ring_allreduce_s(1e9, 1, 100.0, hop_latency_s=1.0) == 0.0  # one rank talks to nobody
    # the volume per rank approaches 2x the gradient as the ring grows: the time saturates, it does not grow with N
    assert scaling.ring_allreduce_s(1e9, 1024, 100.0) < 2 * scaling.ring_allreduce_s(1e9, 2, 100.0)


def test_one_instance_uses_its_gpu_links_and_several_are_paced_by_the_network():
    intra, inter = scaling.links("ml.p4d.24xlarge")
    assert intra.gbytes_per_s == 300.0 and "NVLink" in intra.name
    assert inter.gbytes_per_s == 50.0 and inter.name == "EFA"  # 400 Gb/s from the catalogue
    grad = 100 * MB
    one = scaling.allreduce_s(grad, 8, 1, intra, inter, EXACT)
    assert one == pytest.approx(2 * 7 / 8 * grad / 300e9)
    two = scaling.allreduce_s(grad, 8, 2, intra, inter, EXACT)
    assert two == pytest.approx(2 * 15 / 16 * grad / 50e9)  # 16 ranks, the network is the bottleneck
    # link efficiency scales bandwidth; latency is paid per hop for every bucket (100 MB = 4 buckets of 25 MB)
    slow = scaling.ClusterAssumptions(link_efficiency=0.5, intra_latency_s=0.0, inter_latency_s=1e-5)
    assert scaling.allreduce_s(grad, 8, 2, intra, inter, slow) == pytest.approx(2 * two + 4 * 2 * 15 * 1e-5)


def test_the_network_is_efa_only_where_sagemaker_turns_it_on_for_nccl():
    # g5.48xlarge is on the SDK drivers' EFA list; g5.12xlarge has EFA hardware on EC2 but its NCCL uses TCP sockets
    assert scaling.links("ml.g5.48xlarge")[1].name == "EFA"
    _, inter = scaling.links("ml.g5.12xlarge")
    assert inter.name == "ENA network" and inter.gbytes_per_s == 5.0 and "no EFA" in inter.source
    assert scaling.links("ml.g6e.48xlarge")[1].name == "ENA network"


def test_gpus_without_nvlink_share_pcie():
    intra, _ = scaling.links("ml.g5.12xlarge")
    assert intra.gbytes_per_s == 32.0 and "PCIe" in intra.name
    with pytest.raises(ValueError, match="no GPUs"):
        scaling.links("ml.m5.xlarge")


def test_overlap_hides_communication_behind_backward_but_not_the_last_bucket():
    a = scaling.ClusterAssumptions(overlap=1.0, backward_share=2 / 3)
    grad = 400 * MB
    # 30 ms of compute leaves 20 ms of backward to hide 25 ms of all-reduce: 5 ms show
    assert scaling.exposed_s(0.030, 0.025, grad, a) == pytest.approx(0.005)
    # all hidden in principle, but the last of 4 buckets is reduced after backward ends: a quarter shows
    assert scaling.exposed_s(0.300, 0.020, 100 * MB, a) == pytest.approx(0.005)
    # ...and the last bucket wins over the backward budget when it is the larger
    assert scaling.exposed_s(0.030, 0.025, 100 * MB, a) == pytest.approx(0.025 / 4)
    assert scaling.exposed_s(0.030, 0.025, grad, scaling.ClusterAssumptions(overlap=0.0)) == pytest.approx(0.025)
    assert scaling.exposed_s(0.030, 0.0, grad, a) == 0.0


def test_prediction_adds_exposed_time_to_compute_and_prices_all_instances():
    work = scaling.Workload(
        samples_per_epoch=1_024_000, per_gpu_batch=64, step_compute_s=0.05, grad_bytes=200 * MB, epochs=2
    )
    a = scaling.ClusterAssumptions(link_efficiency=1.0, intra_latency_s=0.0, inter_latency_s=0.0, overhead_s=600.0)
    p = scaling.predict(work, "ml.p4d.24xlarge", 2, a)
    comm = 2 * 15 / 16 * 200 * MB / 50e9
    exposed = max(comm - 2 / 3 * 0.05, comm * 25 / 200)
    assert p.gpus == 16 and p.global_batch == 1024
    assert p.allreduce_s == pytest.approx(comm) and p.exposed_s == pytest.approx(exposed)
    assert p.step_s == pytest.approx(0.05 + exposed) and p.efficiency == pytest.approx(0.05 / (0.05 + exposed))
    steps = math.ceil(1_024_000 / 1024)
    assert p.epoch_h == pytest.approx(steps * p.step_s / 3600)
    assert p.train_h == pytest.approx((2 * steps * p.step_s + 600) / 3600)
    price = instances.lookup("ml.p4d.24xlarge").price_per_hour
    assert p.usd == pytest.approx(2 * price * p.train_h)
    assert p.speedup == pytest.approx(16 * p.efficiency)  # epochs divide evenly here


def test_single_gpu_scales_linearly_and_efficiency_falls_as_the_ring_leaves_the_instance():
    work = scaling.Workload(2_000_000, 64, scaling.estimate_step_s("A100", 64), 4 * scaling.DISTILBERT_BASE_PARAMS)
    preds = scaling.plan(work, "ml.p4d.24xlarge", counts=(1, 2, 4, 8))
    assert [p.gpus for p in preds] == [8, 16, 32, 64]
    effs = [p.efficiency for p in preds]
    assert all(0 < e <= 1 for e in effs) and effs == sorted(effs, reverse=True)
    assert effs[0] > effs[1]  # crossing the network costs more than NVLink
    one_gpu = scaling.predict(work, "ml.p4d.24xlarge", 1, gpus_per_instance=1)
    assert one_gpu.efficiency == 1.0 and one_gpu.allreduce_s == 0.0 and one_gpu.speedup == pytest.approx(1.0)


def test_slower_compute_hides_the_same_network_better():
    """The case-study lesson: a V100 step is long enough to hide an all-reduce that an H100 step cannot."""
    grad = 4 * scaling.DISTILBERT_BASE_PARAMS
    fast = scaling.predict(scaling.Workload(10**6, 64, 0.02, grad), "ml.p3.16xlarge", 2)
    slow = scaling.predict(scaling.Workload(10**6, 64, 0.8, grad), "ml.p3.16xlarge", 2)
    assert slow.efficiency > 0.9 > 0.5 > fast.efficiency


def test_reference_step_carries_over_by_peak_ratio():
    assert scaling.REFERENCE_STEP.step_s == pytest.approx(64 / 3375)
    assert scaling.estimate_step_s("H100", 64) == pytest.approx(scaling.REFERENCE_STEP.step_s)
    # like for like: the H100's datasheet peak (989), not its measured ceiling (788), against the A100's datasheet 312
    assert scaling.estimate_step_s("A100", 128) == pytest.approx(64 / 3375 * 989 / 312 * 2)
    with pytest.raises(ValueError, match="no peak"):
        scaling.estimate_step_s("MI300X", 64)


def test_a_step_carried_over_to_a_v100_is_fp16_mixed_precision_and_says_so():
    """V100 tensor cores have no bf16: its 125 TFLOP/s is the fp16 figure, so the carried-over step is an fp16 step."""
    assert scaling.estimate_step_s("V100", 64) == pytest.approx(64 / 3375 * 989 / 125)
    assert instances.V100_16.peak_precision == instances.T4.peak_precision == "fp16"
    assert instances.H100.peak_precision == instances.A100_40.peak_precision == "bf16"
    assert scaling.step_label("ml.p3.16xlarge") == "ml.p3.16xlarge (V100, fp16)"
    assert scaling.step_label("ml.p4d.24xlarge") == "ml.p4d.24xlarge (A100, bf16)"


@pytest.mark.parametrize("bad", [dict(step_compute_s=0), dict(grad_bytes=-1), dict(per_gpu_batch=0)])
def test_bad_inputs_are_refused(bad):
    args = dict(samples_per_epoch=1000, per_gpu_batch=8, step_compute_s=0.1, grad_bytes=1000) | bad
    with pytest.raises(ValueError):
        scaling.Workload(**args)
    with pytest.raises(ValueError, match="link_efficiency"):
        scaling.ClusterAssumptions(link_efficiency=1.5)
    with pytest.raises(ValueError, match="GPUs per instance"):
        scaling.predict(scaling.Workload(1000, 8, 0.1, 1000), "ml.g5.12xlarge", 1, gpus_per_instance=8)


def test_case_studies_carry_the_published_figures():
    by_name = {c.name.split(" ")[0]: c for c in scaling.CASE_STUDIES}
    assert by_name["Hyundai"].gpus == 64 and by_name["Hyundai"].efficiency == pytest.approx(0.93)
    kakao = by_name["Kakao"]
    assert kakao.gpus == 16 and kakao.speedup == pytest.approx(12.0) and kakao.lower_bound  # 15 days -> 30 h
    kt = by_name["KT"]
    assert (kt.gpus, kt.baseline_gpus) == (32, 2) and round(kt.speedup) == 29 and kt.efficiency > 1
    assert len(scaling.case_study_table()) == 3


def test_plot_draws_cost_against_time_and_the_case_studies():
    work = scaling.Workload(1_000_000, 64, 0.05, 4 * scaling.DISTILBERT_BASE_PARAMS)
    plans = {t: scaling.plan(work, t, counts=(1, 2, 4)) for t in ("ml.p4d.24xlarge", "ml.p5e.48xlarge")}
    fig = plots.scaling_plan(plans, scaling.CASE_STUDIES)
    ax_cost, ax_eff = fig.axes
    assert len(ax_cost.lines) == 1  # p5e has no price on file: it appears on the efficiency panel only
    assert list(ax_cost.lines[0].get_xdata()) == [p.usd for p in plans["ml.p4d.24xlarge"]]
    assert len(ax_eff.lines) == 3 and len(ax_eff.collections) == 3  # two types + the 1.0 line; three case studies
    assert "Kakao" in " ".join(t.get_text() for t in ax_eff.get_legend().get_texts())


ONE = dict(samples_per_sec=160.0, step_ms=400.0, data_wait_ms=4.0, on_core_ms=130.0, queued_ms=262.0, blocked_ms=4.0)


def test_a_local_speedup_held_back_by_queueing_for_a_core_says_so_with_its_figures():
    many = dict(
        samples_per_sec=200.0, step_ms=320.0, data_wait_ms=3.0, on_core_ms=66.0, queued_ms=190.0, blocked_ms=61.0
    )
    used_one, used_many = {"job": 0.4, "other work": 1.6}, {"job": 0.6, "other work": 1.4}
    template, figures = scaling.speedup_breakdown(ONE, many, 2, 2, "cpu", used_one, used_many)
    text = template.format(**figures)
    assert figures["ddp_limit"] == "cores" and figures["ddp_speedup"] == pytest.approx(1.25)
    assert figures["ddp_speedup_ceiling"] == 2 and figures["ddp_speedup_cores_allow"] == pytest.approx(1.5)
    assert figures["ddp_speedup_compute"] == pytest.approx(134 / 69)  # computing and input alone
    assert text.startswith("2 processes ran 1.25x as fast as one, where 2 cores allow 2x. What held it back here")
    assert "other work kept 1.4 of the 2 busy" in text and "190 ms queued for a core" in text and "{" not in text
    assert "computed for 66 ms, about 1/2 of one process's 130 ms, as it should" in text
    _, slow = scaling.speedup_breakdown(ONE, {**many, "on_core_ms": 90.0}, 2, 2, "cpu", used_one, used_many)
    assert not slow["computing_halved"] and slow["on_core_share_1"] == 65  # shared cores: the same work took longer


@pytest.mark.parametrize(
    "blocked, wait, on_core, limit",
    [(20.0, 3.0, 66.0, "blocked"), (2.0, 30.0, 66.0, "input"), (2.0, 3.0, 110.0, "computing")],
)
def test_on_free_cores_the_limit_is_the_largest_of_the_rest(blocked, wait, on_core, limit):
    many = dict(samples_per_sec=300.0, step_ms=100.0, data_wait_ms=wait, on_core_ms=on_core, queued_ms=1.0)
    many["blocked_ms"] = blocked
    one = {**ONE, "queued_ms": 0.0, "step_ms": 138.0}
    used = {"job": 1.0, "other work": 0.0}
    _, figures = scaling.speedup_breakdown(one, many, 2, 8, "cpu", used, {"job": 2.0, "other work": 0.0})
    assert figures["ddp_limit"] == limit and figures["ddp_speedup_ceiling"] == 2


def test_cores_used_are_the_job_s_and_everyone_else_s_while_it_trained():
    class Monitor:
        windows = {"training": (1.0, 5.0)}

        def summary(self, window=None):
            assert window == "training"
            # the machine's 2 cores at 90%; the job's own one core at 60%: the other lab's stream is not in its way
            return {"machine_cpu_pct": 90.0, "cores": 2, "own_cpu_pct": 60.0, "own_cores": 1, "job_cores": 0.5}

    assert scaling.cores_used(Monitor()) == {"job": 0.5, "other work": pytest.approx(0.1)}
