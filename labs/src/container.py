"""The container's plumbing, shared by every entry script: why a job failed, and how a process leaves.

- :class:`ArgumentParser`: a bad hyperparameter becomes the job's failure reason, not a bare exit code 2;
- :func:`run`: an entry script's ``main``, with the reason it failed written to ``$SM_OUTPUT_DIR/failure``, which
  SageMaker shows as the job's FailureReason (the local runner does the same);
- :func:`leave`: the clean exit after training, past a gloo teardown that can abort at interpreter exit;
- ``kill -USR1 <pid>`` makes a live rank print every thread's Python stack to stderr (the job log): where it hangs.

Standard library only (torch.distributed is imported by :func:`leave` alone, and only where a process group
exists), so ``options.py``, which builds its parsers from this module, runs without torch.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import traceback


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose error is the job's failure reason: a message, where plain argparse leaves only exit code 2."""

    def error(self, message):
        self.print_usage(sys.stderr)
        raise SystemExit(f"{self.prog}: error: {message}")


def run(main, parse_args) -> None:
    """An entry script's main, with why it failed recorded (SageMaker's FailureReason) before it leaves."""
    if hasattr(signal, "SIGUSR1"):  # not on Windows
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        main(parse_args())
    except SystemExit as e:
        if e.code not in (0, None):
            fail(e)
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - record why, then fail (DCP's CheckpointException is a BaseException)
        fail(e)


def fail(exc: BaseException) -> None:
    """Record why the job failed, then leave at once: a rank that unwinds normally with a live process group can
    hang in its teardown while the other ranks wait in a collective. torchrun sees the exit code and stops them."""
    if isinstance(exc, SystemExit):
        message = str(exc.code)
        print(message, file=sys.stderr)
    else:
        message = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    write_failure(message)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def write_failure(message: str) -> None:
    """SageMaker shows /opt/ml/output/failure as the job's FailureReason; the local runner does the same."""
    out = os.environ.get("SM_OUTPUT_DIR", "/opt/ml/output")
    try:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "failure"), "a", encoding="utf-8") as f:
            f.write(message.strip()[-1000:] + "\n")
    except OSError:
        pass


def leave(code: int = 0, process_group: bool = False) -> None:
    """Leave cleanly: a gloo process group torn down at interpreter exit can abort (SIGABRT) after training.

    Barrier so no rank leaves while another still talks, destroy the group, flush, then skip the interpreter's
    finalisation, where gloo's background thread dies badly. Artefacts are written before this.
    """
    if process_group:
        import torch.distributed as dist  # here only: the rest of this module runs without torch

        if code == 0:
            dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
