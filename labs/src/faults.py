"""Lab 08's fault switch: one rank made to fail in a chosen way at a chosen step, for the drills. Off by default.

    --fault stop             --fault_rank R --fault_step S    rank R stops itself (SIGSTOP) before step S's all-reduce:
                                                              a process that no longer runs (a hung host, a debugger)
    --fault skip_collective  --fault_rank R --fault_step S    rank R leaves the loop at step S without its all-reduce
                                                              and waits in the next collective it reaches, the
                                                              end-of-training barrier (a rank whose data ran out a
                                                              batch early: the uneven-inputs hang)
    --fault slow             --fault_rank R --fault_step S --fault_delay_s X
                                                              rank R computes X seconds longer at every step from S on
                                                              (a straggler: a throttled or shared host)
    --fault crash            --fault_rank R --fault_step S    rank R fails at step S, in the first attempt only (the
                                                              launcher's restart count is 0): a restart gets past it

A fault that names a rank the job does not have, no step, a delay without ``slow`` (or ``slow`` without one) is
refused with the reason before training starts. The options are declared in ``options.py``; standard library only.
"""

from __future__ import annotations

import os
import signal
import time

RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"  # torchrun's: how many times it has restarted its workers


def problem(args, world: int) -> str | None:
    """What is wrong with the fault asked for on a job of ``world`` ranks, with what to do; None if nothing."""
    if args.fault == "none":
        if args.fault_delay_s or args.fault_step is not None:
            return "--fault_step and --fault_delay_s need a --fault (stop, skip_collective, slow or crash)"
        return None
    if not 0 <= args.fault_rank < world:
        return f"--fault_rank {args.fault_rank}: the job has {world} rank(s), 0 to {world - 1}"
    if args.fault_step is None:
        return f"--fault {args.fault} needs --fault_step: the step at which it hits (from 1)"
    if args.fault == "slow" and not args.fault_delay_s > 0:
        return "--fault slow needs --fault_delay_s > 0: the extra seconds of compute per step"
    if args.fault != "slow" and args.fault_delay_s:
        return f"--fault_delay_s is for --fault slow only, not --fault {args.fault}"
    if args.fault == "skip_collective" and world < 2:
        return "--fault skip_collective needs at least 2 ranks: one rank alone has no collective to skip"
    return None


class Fault:
    """The fault of this rank (a no-op on every other rank, and everywhere with ``--fault none``)."""

    def __init__(self, args, rank: int):
        self.kind = args.fault if args.fault != "none" and rank == args.fault_rank else "none"
        self.step, self.delay_s = args.fault_step or 0, args.fault_delay_s

    def slow_down(self, step: int) -> None:
        """In the compute phase of every step from the fault's step on: the straggler's extra seconds."""
        if self.kind == "slow" and step >= self.step:
            time.sleep(self.delay_s)

    def before_collective(self, step: int) -> bool:
        """Just before a step's all-reduce: stop, crash, or say to skip it (True)."""
        if step != self.step:
            return False
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # from here this process no longer runs: no log line, no error
        elif self.kind == "crash" and os.environ.get(RESTART_COUNT, "0") == "0":
            raise SystemExit(f"--fault crash: rank {os.environ.get('RANK', 0)} failed at step {step} on purpose")
        return self.kind == "skip_collective"
