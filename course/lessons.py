"""What each lab's prose says its own run shows, held against the figures that run recorded.

``CLAIMS[lab stem]`` maps a claim, in the prose's words, to a predicate on the run's ``<lab>.figures.json`` (what
``report.record`` / ``report.says`` wrote). The lab runner checks every local run against them and names each lesson
not borne out; ``python -m course.lessons runs/labs`` checks a finished run's folder again. Only claims that hold on
any machine belong here: a ratio of two timings on a shared machine goes in a sentence formatted from the run's own
figures instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

Claims = dict[str, Callable[[dict], bool]]
CLAIMS: dict[str, Claims] = {}


def _half(part: float, whole: float, tolerance: float = 0.01) -> bool:
    return abs(part / whole - 0.5) <= tolerance


# ---------------------------------------------------------------------------------------------- lab 01
CLAIMS["01_single_gpu"] = {
    "at every size the notebook ships, the network beats the baseline by at least 2 points of macro-F1": lambda f: (
        f["macro_f1_margin_points"] >= 2 and f["verdict"] == "beats"
    ),
    "the baseline is weakest on the titles whose modifier names a second product": lambda f: (
        f["baseline_slice_accuracy"] < f["baseline_other_accuracy"]
    ),
    "the network is right on more of those titles": lambda f: (
        f["network_slice_accuracy"] > f["baseline_slice_accuracy"]
    ),
    "the model read back from the job's model directory scores what the job measured": lambda f: (
        abs(f["saved_model_macro_f1"] - f["val_macro_f1"]) < 0.005
    ),
}

# ---------------------------------------------------------------------------------------------- lab 02
CLAIMS["02_ddp"] = {
    "the model learns: validation accuracy well above always answering the most common category": lambda f: (
        f["val_accuracy"] >= 2 * f["chance_accuracy"]
    ),
    # the smoke size's 64 steps; a longer run amplifies the last-bit differences of the summation order (the prose)
    "in the smoke size two processes train exactly like one (the loss gap reads 0)": lambda f: (
        f["steps"] > 64 or f["max_loss_gap"] < 1e-3
    ),
    "one process has no rank to wait for: its blocked time stays small": lambda f: (
        f["blocked_ms_1"] < 0.1 * f["step_ms_1"]
    ),
    "input, computing, queued and blocked make up the step": lambda f: (
        abs(f["data_wait_ms_ddp"] + f["on_core_ms_ddp"] + f["queued_ms_ddp"] + f["blocked_ms_ddp"] - f["step_ms_ddp"])
        <= 0.02 * f["step_ms_ddp"]
    ),
    "the two ran in turn, in pairs, and the tables read the first pair": lambda f: (
        f["pairs"] >= 2 and f["ddp_speedup_first"] == f["ddp_vs_1"] == f.get("ddp_speedup", f["ddp_vs_1"])
    ),
    "every pair's ratio lies in the range the sentence gives": lambda f: (
        f["ddp_speedup_low"] <= f["ddp_speedup_middle"] <= f["ddp_speedup_high"]
        and f["ddp_speedup_low"] <= f["ddp_speedup_first"] <= f["ddp_speedup_high"]
    ),
}

# ---------------------------------------------------------------------------------------------- lab 03
CLAIMS["03_smddp"] = {
    "SMDDP's last image is past its end of patch": lambda f: f["smddp_frozen"] is True,
    "the local job is two nodes of one process each": lambda f: f["local_world_size"] == 2 and f["local_hosts"] == 2,
    "the run here printed no NCCL line: its backend is gloo (its log's [setup] line)": lambda f: (
        f["local_backend"] == "gloo" and f["local_log_world"] == 2 and f["local_nccl_lines"] == 0
    ),
    "the same job on SageMaker runs a process per GPU on every instance": lambda f: (
        f["request_world_size"] == f["request_gpus"]
    ),
    "the request carries NCCL_DEBUG=INFO": lambda f: json.loads(f["request_environment"]) == {"NCCL_DEBUG": "INFO"},
    "preflight's note names the log line that shows EFA": lambda f: f["request_notes_efa_log"] is True,
    "the SDK's driver sets FI_PROVIDER=efa exactly where the catalogue says EFA": lambda f: (
        f["driver_efa_types"] == f["catalogue_efa_types"]
    ),
}

# ---------------------------------------------------------------------------------------------- lab 04
CLAIMS["04_model_parallel"] = {
    "every strategy follows the single-process loss to within floating-point summation order": lambda f: (
        f["max_loss_gap"] < 1e-4
    ),
    "FSDP halves parameters, gradients and optimizer state": lambda f: (
        _half(f["fsdp_param_mb"], f["single_param_mb"]) and _half(f["fsdp_optimizer_mb"], f["single_optimizer_mb"])
    ),
    "ZeRO-1 halves only the optimizer state": lambda f: (
        f["zero_param_mb"] == f["single_param_mb"] and _half(f["zero_optimizer_mb"], f["single_optimizer_mb"])
    ),
    "TP sits in between (embeddings and LM head stay whole)": lambda f: (
        f["single_param_mb"] / 2 < f["tp_param_mb"] < f["single_param_mb"]
    ),
    "PP halves parameters and optimizer state": lambda f: (
        _half(f["pp_param_mb"], f["single_param_mb"]) and _half(f["pp_optimizer_mb"], f["single_optimizer_mb"])
    ),
    "every data-parallel strategy halves activations": lambda f: all(
        _half(f[f"{s}_activation_mb"], f["single_activation_mb"]) for s in ("ddp", "zero", "fsdp")
    ),
    "the planner agrees with the measurement to well under 1%": lambda f: f["planner_worst_error_pct"] < 1,
    "the reloaded model scores what the sharded one scored, to within summation order (a gap below 1e-6, "
    "recorded unrounded)": lambda f: f["checkpoint_gap"] < 1e-6,
}

# ---------------------------------------------------------------------------------------------- lab 05
CLAIMS["05_input_modes"] = {
    "a job that reads a slice waits less for FastFile than for File": lambda f: (
        f["fastfile_input_wait_s"] < f["file_input_wait_s"]
    ),
    "FastFile fetches a fraction of the bytes": lambda f: f["fastfile_bytes_share"] < 0.5,
    "reading every shard with work on each batch, FastFile is no slower than File: it streams while the job works": (
        lambda f: f["fastfile_sequence_s"] <= f["file_sequence_s"]
    ),
    "a sequence of jobs costs FSx less than File": lambda f: f["fsx_sequence_s"] < f["file_sequence_s"],
    "a sequence of jobs fetches the data once for FSx, every job for FastFile": lambda f: (
        f["fsx_sequence_mb"] < f["fastfile_sequence_mb"] / 2
    ),
    "many small objects cost FastFile a request each: far slower than its shards": lambda f: (
        f["fastfile_small_mb_per_s"] < f["fastfile_shards_mb_per_s"] / 5
    ),
    "random reads of many small objects are slowest on FastFile": lambda f: (
        f["fastfile_random_mb_per_s"] < min(f["file_random_mb_per_s"], f["fsx_random_mb_per_s"])
    ),
    "FastFile reads ahead within a shard read in order, and has nothing to read ahead in a small file": lambda f: (
        f["fastfile_shards_read_ahead_share"] > 0.5 and f["fastfile_small_read_ahead_share"] < 0.05
    ),
}

# ---------------------------------------------------------------------------------------------- lab 06
CLAIMS["06_spot_checkpoints"] = {
    "the interrupted-and-resumed run is bit-identical to the reference": lambda f: (
        f["bit_identical"] is True and f["max_abs_weight_diff"] == 0
    ),
    "every planned interruption interrupted, and each restart resumed": lambda f: (
        f["interruptions"] == f["planned_interruptions"] and f["launches"] == f["interruptions"] + 1
    ),
    "the accuracy is set against always answering the most common category of the rows the job scored": lambda f: (
        0 < f["majority_accuracy"] < 1
        and f["beat_majority"]
        == ("beat that" if f["reference_accuracy"] > f["majority_accuracy"] else "did not beat that")
    ),
    "at every size the model learns: well above always answering the most common category": lambda f: (
        f["reference_accuracy"] >= 2 * f["majority_accuracy"]
    ),
}

# ---------------------------------------------------------------------------------------------- lab 07
_GAP = {  # the verdict's parts of the gap (helpers.local.bottleneck.GAP_PARTS) and the figures they are recorded as
    "waiting for data": "gap_data_wait_ms",
    "computing": "gap_on_core_ms",
    "queued for a core": "gap_queued_ms",
    "blocked": "gap_blocked_ms",
}
CLAIMS["07_profiling"] = {
    "both pipelines give exactly the same batches": lambda f: abs(f["starved_val_loss"] - f["fixed_val_loss"]) < 1e-4,
    "the starved run's workers delay its first batch": lambda f: f["starved_first_batch_s"] > f["fixed_first_batch_s"],
    "the fixed run waits less for data, per step": lambda f: f["fixed_data_wait_ms"] < f["starved_data_wait_ms"],
    "the two ran in turn, in pairs, and the figures above are the first pair's": lambda f: (
        f["pairs"] >= 2
        and f["pipeline_speedup_first"] == f["pipeline_speedup"]
        and f["pipeline_speedup_low"] <= f["pipeline_speedup_middle"] <= f["pipeline_speedup_high"]
    ),
    "the fix is faster in every pair": lambda f: f["pipeline_speedup_low"] > 1,
    "the verdict names a cause": lambda f: f["pipeline_cause"] != "" and f["pipeline_cause"] in f["pipeline_verdict"],
    "the cause is the largest part of the step's gap, and the parts make up the gap": lambda f: (
        f[_GAP[f["pipeline_cause"]]] == max(f[key] for key in _GAP.values())
        and abs(sum(f[key] for key in _GAP.values()) - f["step_gap_ms"]) <= 0.02 * abs(f["step_gap_ms"]) + 0.01
    ),
    "the starved run's worker was busy while its trainer waited: in the monitor and in the profile": lambda f: (
        f["starved_workers_cores"] > f["starved_trainer_cores"]
        and f["starved_profile_wait_ms"] > f["fixed_profile_wait_ms"]
    ),
}

# ---------------------------------------------------------------------------------------------- lab 08
CLAIMS["08_failures_at_scale"] = {
    "the stall report names the stopped rank: rank 1, stopped, the other waits in the all-reduce": lambda f: (
        f["stop_stuck_rank"] == 1 and f["stop_stuck_state"] == "stopped" and f["stop_in_collective"] == [0]
    ),
    "the rank stopped mid-run": lambda f: 0 < f["stop_last_step"] < f["steps"],
    "py-spy read every rank, the stopped one in the fault switch (or could not attach and said so)": lambda f: (
        f["py_spy_attached"] is False or f["stop_stuck_frame"].startswith("before_collective (faults.py")
    ),
    "the stall report and py-spy came before the timeout, which ended the job with its error": lambda f: (
        f["stop_report_s"] < f["stop_timeout_s"]
        and f["stop_pyspy_s"] < f["stop_timeout_s"]
        and f["stop_timeout_s"] >= f["dist_timeout_s"]
        and "Timed out" in f["stop_timeout_error"]
        and f["stop_report_before_timeout"] is True
    ),
    "no rank is stopped in the skipped collective; the skipping rank waits in the end barrier, the other in the "
    "all-reduce": lambda f: (
        f["skip_any_stopped"] is False
        and f["skip_stuck_rank"] == 1
        and f["skip_stuck_frame"].startswith("leave (")
        and f["skip_collective_frame"].startswith("average_gradients (")
    ),
    "every drill left no process behind": lambda f: f["stop_processes_left"] == 0 == f["skip_processes_left"],
    "the straggler's compute grew by the delay, and the other rank's wait by as much": lambda f: (
        f["slow_compute_added_ms"] >= 0.8 * f["delay_ms"] and f["fast_wait_added_ms"] >= 0.6 * f["delay_ms"]
    ),
    "both ranks' steps take the slow rank's pace": lambda f: (
        abs(f["fast_step_ms"] - f["slow_step_ms"]) <= 0.15 * f["slow_step_ms"]
        and f["fast_step_ms"] >= f["slow_compute_ms"]
    ),
    "a changed model and a world size that cannot keep the global batch are refused before launch": lambda f: (
        f["refused a changed model"] is True and f["refused three ranks"] is True
    ),
    "each resume started after its checkpoint's step, trained the same rows, reached the end; the one-rank "
    "checkpoint came later than the two-rank one": lambda f: (
        f["resume_first_step"] == f["resume_checkpoint_step"] + 1
        and f["regrow_first_step"] == f["regrow_checkpoint_step"] + 1
        and f["resume_checkpoint_step"] < f["regrow_checkpoint_step"] < f["steps"]
        and f["same_rows"] == "yes"
        and f["resume_last_step"] == f["steps"] == f["regrow_last_step"]
        and f["resume_steps_compared"] == f["steps"] - f["resume_checkpoint_step"]
        and f["regrow_steps_compared"] == f["steps"] - f["regrow_checkpoint_step"]
    ),
    "across world sizes each resumed curve follows the run its checkpoint came from within 1e-3 (recorded unrounded)": (
        lambda f: f["gap_2_to_1"] < 1e-3 and f["gap_1_to_2"] < 1e-3
    ),
    "a rank crashed after the checkpoint, torchrun restarted the group once, it resumed at the checkpoint's step, "
    "redid the steps in between with the same losses and completed, leaving no process": lambda f: (
        0 < f["restart_checkpoint_step"] < f["restart_crash_step"] < f["steps"]
        and f["restart_count"] == 1
        and f["restart_resume_step"] == f["restart_checkpoint_step"]
        and f["restart_redone_n"] == f["restart_crash_step"] - f["restart_checkpoint_step"] - 1
        and f["restart_same"] == "yes"
        and f["restart_last_step"] == f["steps"]
        and f["restart_status"] == "Completed"
        and f["restart_processes_left"] == 0
    ),
    "the request carries RetryStrategy, InfraCheckConfig and a warm pool": lambda f: (
        f["retry"] == {"MaximumRetryAttempts": 2} and f["infra"] == {"EnableInfraCheck": True} and f["keep"] == 1800
    ),
}


def wrong(lab: str, figures: dict) -> list[str]:
    """The claims of ``lab`` its figures do not bear out (a figure the run did not record counts as not borne out)."""
    out = []
    for claim, holds in CLAIMS.get(lab, {}).items():
        try:
            ok = holds(figures)
        except (KeyError, TypeError, ZeroDivisionError) as err:
            ok, claim = False, f"{claim} (not recorded: {err!r})"
        if not ok:
            out.append(claim)
    return out


def main(argv: list[str]) -> int:
    """Check every lab of a headless run's summary.json against its claims."""
    summary = json.loads((Path(argv[0]) / "summary.json").read_text(encoding="utf-8"))
    failed = 0
    for run in summary["labs"]:
        if run["lab"] not in CLAIMS:
            continue
        bad = wrong(run["lab"], run.get("figures", {}))
        failed += bool(bad)
        print(f"{run['lab']}: " + ("every claim holds" if not bad else "WRONG: " + "; ".join(bad)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
