"""The Jupyter path itself: JupyterLab serves lab 01, headless Chromium runs every cell as an attendee would, no
cell errors, and the dry run's view (cost and the collapsible CreateTrainingJob request) renders.

Needs JupyterLab and Playwright (the ``lab`` extra) and Debian's ``chromium``: ``make browser-test`` installs them
and runs this test (WORKSHOP_BROWSER_TEST=1). ``make test`` skips it, saying so: a fresh machine has no browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import REPO

from sagemaker_standin.ports import free_ports

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "workshop-browser-test"
HOW = "run `make browser-test` (installs Debian's chromium, JupyterLab and Playwright, then runs this test)"

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("WORKSHOP_BROWSER_TEST") != "1",
        reason=f"a browser run (about 30 s, plus chromium's install) is opt-in: {HOW}",
    ),
    pytest.mark.skipif(not CHROMIUM, reason=f"no chromium on this machine: {HOW}"),
    pytest.mark.skipif(sync_playwright is None, reason=f"playwright is not installed: {HOW}"),
    pytest.mark.skipif(
        shutil.which("jupyter-lab", path=os.path.dirname(sys.executable)) is None,
        reason=f"JupyterLab is not installed: {HOW}",
    ),
]


def _lab01_for(target: str, folder):
    nb = json.loads((REPO / "labs" / "01_single_gpu.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    src = "".join(cell["source"]).replace('target = "local"', f'target = "{target}"', 1)
    assert f'target = "{target}"' in src
    cell["source"] = src
    folder.mkdir()
    (folder / "01_single_gpu.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    shutil.copy(REPO / "labs" / "ready.py", folder)  # the lab's first import, beside it as in labs/


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on loopback serving a copy of lab 01 whose target is a real instance type (offline)."""
    _lab01_for("ml.g5.xlarge", tmp_path / "labs")
    port = free_ports(1)[0]
    settings = tmp_path / "settings"  # no news pop-up over the notebook
    for plugin, value in (("apputils-extension/notification", {"fetchNews": "false"}),):
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "WORKSHOP_AWS_OFFLINE": "1",  # a dry run against placeholders: nothing is sent
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",  # no look-ups on PyPI from the extension manager
            *(["--allow-root"] if os.geteuid() == 0 else []),  # CI and containers run as root
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.5)
    yield url
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def _kernel_idle(url: str, deadline: float) -> None:
    """Wait until the server has a kernel for the notebook and it is idle."""
    while True:
        with urllib.request.urlopen(f"{url}/api/kernels?token={TOKEN}", timeout=5) as answer:
            kernels = json.loads(answer.read())
        if any(k.get("execution_state") == "idle" for k in kernels):
            return
        assert time.monotonic() < deadline, f"no kernel became idle: {kernels}"
        time.sleep(0.5)


def _saved(page, path) -> dict:
    """The notebook as the browser's JupyterLab has it: saved (Ctrl+S), then read from disk."""
    page.keyboard.press("Control+s")
    time.sleep(1)
    return json.loads(path.read_text(encoding="utf-8"))


def test_lab01_runs_in_jupyterlab_in_a_real_browser(jupyterlab, tmp_path):
    notebook = tmp_path / "labs" / "01_single_gpu.ipynb"
    deadline = time.monotonic() + float(os.environ.get("WORKSHOP_BROWSER_TIMEOUT_S", "240"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{jupyterlab}/lab/tree/labs/01_single_gpu.ipynb?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # the kernel ready on both sides: the server's kernel idle, and the page connected to it (its status bar
        # names it). The toolbar's indicator alone reads idle before the kernel is there, and Run All then runs none
        _kernel_idle(jupyterlab, deadline=time.monotonic() + 60)
        page.wait_for_selector(".jp-StatusBar-TextItem:has-text('ipykernel) | Idle')", timeout=60_000)
        page.click("div.lm-MenuBar-itemLabel:text-is('Run')")
        page.click("div.lm-Menu-itemLabel:text-is('Run All Cells')")
        while True:  # until every code cell has run, or one failed (Run All stops there)
            code = [c for c in _saved(page, notebook)["cells"] if c["cell_type"] == "code"]
            failed = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
            if failed or all(c.get("execution_count") for c in code):
                break
            if time.monotonic() > deadline:
                shot = tmp_path / "jupyterlab.png"
                page.screenshot(path=str(shot))
                raise AssertionError(f"the notebook did not finish running; the browser showed {shot}")
            time.sleep(2)
        assert not failed, f"{failed[0]['ename']}: {failed[0]['evalue']}"
        shown = [
            "".join(o.get("data", {}).get("text/html", ""))
            for c in code
            for o in c.get("outputs", [])
            if o["output_type"] == "display_data"
        ]
        assert any("CreateTrainingJob request" in h for h in shown), "the dry run's view was not shown"
        # with an ml.* target the dry run is a line whose fold holds its view: open the fold, then the request in it,
        # as an attendee would
        fold = page.locator("details > summary", has_text="DRY RUN").first
        fold.scroll_into_view_if_needed()
        fold.click()
        summary = page.locator("details[open] details > summary", has_text="CreateTrainingJob request").first
        summary.scroll_into_view_if_needed()
        summary.click()
        request = page.locator("details[open] details[open] pre").first.inner_text()  # the request itself, opened
        assert '"InstanceType": "ml.g5.xlarge"' in request
        browser.close()
