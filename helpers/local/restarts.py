"""Lab 08's restart drill: a rank that fails once, restarted in place by torchrun (``--max-restarts``, or
``PET_MAX_RESTARTS`` in the job's environment), read from the job's own log: the crash, the restart, the resume from
the newest checkpoint, the steps trained twice, the end. The training script crashes on purpose
(``labs/src/faults.py --fault crash``); this module only launches, watches and measures."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from helpers.job_spec import Job, parse_metric_line
from helpers.local.drill_verdict import DrillFailed
from helpers.local.runner import LocalRunner
from helpers.results import JobResult
from helpers.targets import Target, given

RESTARTING = "will restart worker group"  # torchrun's agent, at INFO, when a worker failed and restarts are left


@dataclass
class RestartDrill:
    """A job whose rank failed once and that torchrun (``--max-restarts``, ``PET_MAX_RESTARTS``) restarted in place:
    what its log shows, in its own figures."""

    result: JobResult
    crash_line: str  # the failed rank's own words
    crash_step: int  # the step it failed at
    checkpoint_step: int  # the newest checkpoint written before the crash
    restarts: int  # torchrun's "will restart worker group" lines
    resume_step: int  # the step the restarted group resumed from (its [resume] line)
    redone: list[int]  # steps trained before the crash and again after the restart
    redone_same_loss: bool  # each redone step's loss, as logged, the same in both attempts
    last_step: int
    restart_s: float  # from the crash line to the restarted group's first step
    processes_left: int
    restart_lines: list[str] = field(default_factory=list)  # the log around the restart, as the job printed it

    def figures(self) -> dict:
        return {
            "crash step": self.crash_step,
            "checkpoint step": self.checkpoint_step,
            "torchrun restarts": self.restarts,
            "resumed from step": self.resume_step,
            "steps redone": len(self.redone),
            "redone losses identical": self.redone_same_loss,
            "last step": self.last_step,
            "crash to next step, s": round(self.restart_s, 1),
        }


def restart_drill(job: Job, target: Target) -> RestartDrill:
    """Run ``job`` (``train_elastic.py --fault crash`` with ``PET_MAX_RESTARTS`` in its environment) and read what
    happened from its log: the crash, torchrun restarting the group, the resume from the newest checkpoint, the steps
    trained twice, the end. Fails loudly if the crash did not land after a checkpoint and before the end, if no restart
    happened, if the group did not resume at the checkpoint's step, or if any process outlived the job."""
    lines: list[tuple[float, str, str]] = []
    runner = LocalRunner(echo=False, check=False, on_line=lambda h, l: lines.append((time.monotonic(), h, l)))
    live = runner.start(job, given(target))
    try:
        result = live.wait()
    finally:
        live.kill()
    left = len(live.processes())
    crash = [(t, l) for t, _, l in lines if l.startswith("--fault crash:")]
    restarts = [l for _, _, l in lines if RESTARTING in l]
    metric = [(t, m) for t, _, l in lines if (m := parse_metric_line(l))]
    # The attempts are told apart by the training script's own lines, in the order it wrote them: the restarted
    # group's first is its [resume]. Not by arrival time against torchrun's restart line: that one comes on stderr,
    # read by another thread, and under load it can arrive before the first attempt's last step line.
    split = next((i for i, (_, m) in enumerate(metric) if m["kind"] == "resume"), len(metric))
    checkpoints = [int(m["step"]) for _, m in metric[:split] if m["kind"] == "checkpoint"]
    resumed = [int(m["step"]) for _, m in metric[split:] if m["kind"] == "resume"]
    trained = [(i, t, int(m["step"]), m["train_loss"]) for i, (t, m) in enumerate(metric) if m["kind"] == "train"]
    crash_t = crash[0][0] if crash else float("inf")
    before = {s: loss for i, _, s, loss in trained if i < split}
    after = [(t, s, loss) for i, t, s, loss in trained if i > split]
    redone = sorted(s for _, s, _ in after if s in before)
    step = re.search(r"at step (\d+)", crash[0][1]) if crash else None
    d = RestartDrill(
        result,
        crash[0][1] if crash else "",
        int(step[1]) if step else 0,
        max(checkpoints, default=0),
        len(restarts),
        resumed[0] if resumed else -1,
        redone,
        bool(redone) and all(before[s] == loss for _, s, loss in after if s in before),
        max((s for _, _, s, _ in trained), default=0),
        (after[0][0] - crash_t) if after else float("nan"),
        left,
        [l for _, _, l in lines if l.startswith(("--fault crash:", "[resume]", "[checkpoint]")) or RESTARTING in l],
    )
    problems = []
    if not 0 < d.checkpoint_step < d.crash_step < int(job.hyperparameters.get("steps", 0)):
        problems.append(
            f"the crash (step {d.crash_step}) did not land after a checkpoint ({d.checkpoint_step}) mid-run"
        )
    if d.restarts != 1:
        problems.append(f"torchrun restarted the group {d.restarts} time(s), not once")
    if d.resume_step != d.checkpoint_step:
        problems.append(
            f"the restarted group resumed from step {d.resume_step}, not the checkpoint's {d.checkpoint_step}"
        )
    if result.status != "Completed" or d.last_step != int(job.hyperparameters.get("steps", 0)):
        problems.append(f"the job ended {result.status} at step {d.last_step}: {result.failure_reason}")
    if d.redone != list(range(d.checkpoint_step + 1, d.crash_step)):
        problems.append(f"the steps trained twice were {d.redone}, not those between the checkpoint and the crash")
    if left:
        problems.append(f"{left} process(es) of the job outlived it")
    if problems:
        raise DrillFailed("the restart drill did not do what it claims: " + "; ".join(problems))
    return d
