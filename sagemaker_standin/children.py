"""Helper processes (the object store, its S3-profile proxy) that die with the Python process that started them."""

from __future__ import annotations

import ctypes
import signal
import sys

try:  # resolved here, not in the forked child (which may only make async-signal-safe calls)
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """Runs in the child before exec: Linux kills it if the Python process that started it dies without cleaning
    up (a kernel killed outright). Tied to the starting thread: start helpers from the main thread."""
    assert _PRCTL is not None  # DIE_WITH_PARENT is this function only where prctl was found
    _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# Popen(preexec_fn=DIE_WITH_PARENT); None where the platform has no such thing
DIE_WITH_PARENT = _die_with_parent if _PRCTL else None
