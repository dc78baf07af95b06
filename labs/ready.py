"""Imported first by every lab: this kernel can import the workshop's helpers, or the lab stops and says what to do.

Standard library only (it runs where the helpers are missing). Two cases: nothing installed for this Python (run
``make studio`` in Studio, ``make`` on a laptop), or installed into the user site after this kernel started: Python
adds the user site to ``sys.path`` only if it exists when the interpreter starts, so the kernel must be restarted.

A kernel finds this file when it runs in ``labs/`` (JupyterLab, ``jupyter nbconvert --execute``, papermill run from
``labs/``, ``make``). Each lab's first lines fall back to importing the helpers themselves where it does not (papermill
run from the repository's root or anywhere else: the kernel's folder is the caller's):

    try:
        import ready
    except ModuleNotFoundError:
        import helpers

so what this raises is an ``ImportError`` but not a ``ModuleNotFoundError``: the fallback must not swallow it.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys


def problem() -> str:
    """What keeps this kernel from the helpers, or '' when nothing does."""
    if importlib.util.find_spec("helpers") is not None:
        return ""
    user_site = site.getusersitepackages()
    if site.ENABLE_USER_SITE and os.path.isdir(user_site) and user_site not in sys.path:
        return (
            f"the workshop's helpers were installed into {user_site} after this kernel started, and a running "
            "Python does not look there: restart the kernel (Kernel > Restart Kernel), then run the lab again."
        )
    return (
        f"this kernel's Python ({sys.executable}) does not have the workshop's helpers. In SageMaker Studio, run "
        "`make studio` in a terminal at the repository's root, then restart this kernel (Kernel > Restart Kernel); "
        "on a laptop, run `make` and choose the .venv's kernel (README, 'The two commands')."
    )


if found := problem():
    raise ImportError(found, name="helpers")  # not ModuleNotFoundError, which each lab's fallback catches
