"""Reliability, round 4: a set-up no optional tool can stop, a lab runner whose streams die with it and hold its
folder, damaged sharded checkpoints refused by name, nothing left outside a run's folder, exercise checks run out
of order."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------- make setup
def _setup_lines_with(word: str) -> list[str]:
    """The venv recipe's shell lines (continuations joined, make's ``$$`` unescaped) that mention ``word``."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = text.split("$(VENV)/.ready:", 1)[1].split("\n\n", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", recipe)
    lines = [line.strip() for line in joined.splitlines()[1:] if line.startswith("\t")]
    return [line.replace("$$", "$") for line in lines if word in line and not line.startswith("#")]


def test_a_failing_npm_never_stops_make_setup(tmp_path):
    """npm behind a TLS-inspecting proxy fails every install: each of the recipe's npm lines still succeeds (make
    goes on to the labs) and says which test that costs."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "npm").write_text("#!/bin/sh\necho 'npm ERR! self-signed certificate in certificate chain' >&2\nexit 1\n")
    (fake / "npm").chmod(0o755)
    lines = _setup_lines_with("npm ci")
    assert lines, "the Makefile's setup recipe installs nothing from npm: update this test"
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    for line in lines:
        done = subprocess.run(["/bin/sh", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        assert "self-signed certificate" in done.stderr  # the fake npm really ran, and failed
        assert re.search(r"note: .*tests/test_\w+\.py", done.stdout), done.stdout  # names the test it costs
