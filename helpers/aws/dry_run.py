"""The dry run: a job checked, priced and built against a session that records the SDK's ``CreateTrainingJob``
request instead of sending it (``sagemaker_standin.offline_account``). :class:`DryRun` shows the exact request and the
cost in the notebook and launches the same job after review."""

from __future__ import annotations

import copy
import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import sagemaker_standin
from helpers.aws import account as aws
from helpers.aws import settings, setup_errors
from helpers.aws.build import Locations, build_trainer
from helpers.aws.launch import launch as launch_job
from helpers.aws.preflight import Checked, LaunchOptions, LaunchRefused, Plan, offline_session
from helpers.checks.common_rules import secret
from helpers.job_spec import Job
from helpers.planning import cost
from helpers.results import RunResult
from helpers.targets import Target

REQUESTS_ENV = "WORKSHOP_REQUESTS_DIR"  # set by the headless lab runner: every dry run's request is saved there


def _redacted(request: dict) -> dict:
    """The request for display: values of secret-looking environment variables and hyperparameters hidden."""
    shown = copy.deepcopy(request)
    for section in ("Environment", "HyperParameters"):
        for key in list(shown.get(section) or {}):
            if secret(key):
                shown[section][key] = "***"
    return shown


def _uploads(calls: list[sagemaker_standin.ApiCall], channel_prefixes: list[str]) -> list[tuple[str, int, int]]:
    """(s3 prefix, files, bytes) per staged thing (a channel, the code, the SDK's drivers, a source tarball), from
    the recorded uploads."""
    groups: dict[str, list[int]] = {}
    for call in calls:
        if call.name != "s3.PutObject":
            continue
        key = call.params["Key"]
        prefix = next((p for p in channel_prefixes if key.startswith(p + "/")), None)
        if prefix is None:
            sdk_channel = re.match(r"^(.*/input/(?:code|sm_drivers))/", key)
            prefix = sdk_channel.group(1) if sdk_channel else key.rsplit("/", 1)[0]
        group = groups.setdefault(f"s3://{call.params['Bucket']}/{prefix}/", [0, 0])
        group[0] += 1
        group[1] += call.body_size or 0
    return [(k, v[0], v[1]) for k, v in groups.items()]


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@dataclass(repr=False)  # the repr is RunResult's; str() is the whole request
class DryRun(RunResult):
    """A job checked and built but not launched: the exact CreateTrainingJob request and what it would cost.

    ``print(dry)`` or display it in a notebook; ``dry.launch()`` launches the same job after review.
    """

    plan: Plan
    request: dict  # CreateTrainingJob parameters as botocore validated them
    estimate: cost.CostEstimate | None
    budget_usd: float | None
    uploads: list[tuple[str, int, int]]
    calls: dict[str, int]
    where: str  # "offline (placeholder account)" or the AWS context it was built for
    notes: list[str] = field(default_factory=list)
    # the options to launch it with; None when it was built with placeholders, which nothing can launch
    launch_options: LaunchOptions | None = field(default=None, repr=False)
    _shown_in: int | None = field(default=None, repr=False)  # the notebook execution that run() displayed it in
    full: bool = field(default=False, repr=False)  # displayed whole (in_full()); otherwise a line, the rest folded

    @property
    def job_name(self) -> str:
        return self.request["TrainingJobName"]

    @property
    def name(self) -> str:
        return self.job_name

    @property
    def status(self) -> str:
        return "not launched"

    @property
    def history(self) -> list[dict]:
        """Empty: nothing trained. Labs test ``result.history`` to show curves only after a real run."""
        return []

    @property
    def metrics(self) -> dict:
        return {}

    @property
    def over_budget(self) -> bool:
        return bool(self.estimate and self.budget_usd is not None and self.estimate.max_usd > self.budget_usd)

    def _repr_parts(self, figures: str) -> list[str]:
        return [self.status, f"up to ${self.estimate.max_usd:,.2f}" if self.estimate else "no price on file"]

    def _ipython_display_(self) -> None:
        from IPython import get_ipython

        # run() shows the dry run as it is built; a display(dry) in the same cell would show it a second time
        if self._shown_in is None or self._shown_in != get_ipython().execution_count:
            self._display_now()

    def _display_now(self) -> None:
        from IPython.display import display

        if self.full:
            display({"text/plain": str(self), "text/html": self._repr_html_()}, raw=True)
        else:  # a line, the rest one click away (print(dry): all of it)
            display({"text/plain": self.one_line(), "text/html": self._folded_html()}, raw=True)
        if self.launch_options is not None:  # built for a real account: one click launches it (headless: launch=True)
            display(self.launch_button())

    def launch_button(self):
        """A button that launches this job after review; disabled when the estimate is over budget."""
        import ipywidgets as widgets

        if self.launch_options is None:
            self.launch()  # raises: nothing to launch from an offline dry run
        over = self.over_budget
        tooltip = f"{self.job_name}: up to ${self.estimate.max_usd:,.2f}" if self.estimate else ""
        button = widgets.Button(
            description="Over budget" if over else "Launch this job",
            icon="rocket",
            button_style="" if over else "warning",
            disabled=over,
            tooltip=tooltip,
        )
        out = widgets.Output()

        def clicked(_):
            button.disabled = True  # one click, one job
            with out:
                job = self.launch(wait=False)
                print(f"launched {job.name}: follow it with .wait(), stop it with .stop(); {job.console_url}")
                button.job = job

        button.on_click(clicked)
        return widgets.VBox([button, out])

    def launch(self, **options):
        """Launch this job for real (same options, plus any given here)."""
        if self.launch_options is None:
            raise LaunchRefused(
                "this dry run was built offline with placeholder account details: launch from a "
                "session with AWS credentials, run_job(job, t, launch=True)."
            )
        # the instance type preflight resolved: the target this dry run was made for
        return launch_job(self.plan.job, self.plan.where.target, self.launch_options.updated(**options))

    def summary_lines(self) -> list[str]:
        p, r = self.plan, self.request
        rc = r["ResourceConfig"]
        lines = [
            f"DRY RUN - nothing launched ({self.where})",
            f"job        {self.job_name}",
            f"instances  {rc['InstanceCount']} x {rc['InstanceType']} ({p.instance.describe().split(': ', 1)[1]})",
            f"launcher   {p.launcher}: {p.processes_per_host} process(es) per host, world size {p.world_size}",
            f"image      {r['AlgorithmSpecification']['TrainingImage']}  ({p.image_note})",
        ]
        for c in r.get("InputDataConfig", []):
            src = c["DataSource"].get("S3DataSource", {}).get("S3Uri") or c["DataSource"].get(
                "FileSystemDataSource", {}
            ).get("DirectoryPath")
            lines.append(f"channel    {c['ChannelName']:<11} {c.get('InputMode', 'File'):<8} {src}")
        if r.get("EnableManagedSpotTraining"):
            sc = r["StoppingCondition"]
            lines.append(f"spot       MaxRuntime {sc['MaxRuntimeInSeconds']} s, MaxWait {sc['MaxWaitTimeInSeconds']} s")
        if r.get("CheckpointConfig"):
            lines.append(f"checkpoint {r['CheckpointConfig']['LocalPath']} <-> {r['CheckpointConfig']['S3Uri']}")
        for prefix, n, size in self.uploads:
            lines.append(f"upload     {n} file(s), {_size(size)} -> {prefix}")
        return lines

    def in_full(self) -> DryRun:
        """This dry run, displayed whole: lab 01 reads one field by field; every other is a line, the rest folded."""
        self.full = True
        return self

    def one_line(self) -> str:
        """The dry run in a line, as every one not asked for in full is shown (an over-budget one says so too)."""
        rc, p = self.request["ResourceConfig"], self.plan
        cost_part = f", up to ${self.estimate.max_usd:,.2f}" if self.estimate else ""
        over = " OVER BUDGET: a launch would be refused." if self.over_budget else ""
        notes = len(self.plan.notes + self.notes)
        return (
            f"DRY RUN {self.job_name}: {rc['InstanceCount']} x {rc['InstanceType']}, {p.launcher} world size "
            f"{p.world_size}{cost_part}; nothing launched ({notes} note(s); print(dry) shows it all).{over}"
        )

    def _folded_html(self) -> str:
        line = html.escape(self.one_line())
        return f"<details><summary><code>{line}</code></summary>{self._repr_html_()}</details>"

    def __str__(self) -> str:
        parts = ["\n".join(self.summary_lines())]
        if self.estimate:
            parts.append("cost\n" + "\n".join("  " + line for line in str(self.estimate).splitlines()))
        if self.over_budget:
            assert self.estimate is not None  # over_budget compares its max_usd
            parts.append(
                f"OVER BUDGET: up to ${self.estimate.max_usd:,.2f} > budget ${self.budget_usd:,.2f}; "
                f"a launch would be refused."
            )
        parts += [f"note: {n}" for n in self.plan.notes + self.notes]
        parts.append("CreateTrainingJob request:\n" + sagemaker_standin.to_json(_redacted(self.request)))
        parts.append("To launch: run_job(job, t, launch=True)  (or dry.launch())")
        return "\n\n".join(parts)

    def _repr_html_(self) -> str:
        summary = html.escape("\n".join(self.summary_lines()))
        out = [f"<pre>{summary}</pre>"]
        if self.estimate:
            out.append(f"<b>Cost</b>{self.estimate._repr_html_()}")
        if self.over_budget:
            assert self.estimate is not None  # over_budget compares its max_usd
            out.append(
                f"<p><b>Over budget</b>: up to ${self.estimate.max_usd:,.2f} &gt; ${self.budget_usd:,.2f}; "
                f"a launch would be refused.</p>"
            )
        for n in self.plan.notes + self.notes:
            out.append(f"<p><i>note:</i> {html.escape(n)}</p>")
        request = html.escape(sagemaker_standin.to_json(_redacted(self.request)))
        out.append(f"<details><summary>CreateTrainingJob request</summary><pre>{request}</pre></details>")
        out.append("<p>To launch: <code>run_job(job, t, launch=True)</code></p>")
        return "\n".join(out)


def _capture(
    plan: Plan,
    recorder: sagemaker_standin.OfflineAWS,
    role: str,
    bucket: str,
    attendee: str,
    checkpoint_s3_uri: str | None,
) -> dict:
    """Build the trainer on a recording session and let the SDK 'create' the job: returns the request."""
    with sagemaker_standin.config_validated_once():
        trainer = build_trainer(plan, recorder.sagemaker_session(), role, bucket, attendee, checkpoint_s3_uri)
        trainer.train(wait=False, logs=False)
    return recorder.request("CreateTrainingJob")


def dry_run(job: Job, target: Target, options: LaunchOptions | None = None) -> DryRun:
    """Check, price and build ``job`` for a SageMaker instance type, sending nothing: the exact request and its cost.

    With AWS credentials the request is built for the account and :meth:`DryRun.launch` launches it; in an offline
    session, or where the account is not ready, with placeholders (and a note saying what a launch needs).
    """
    checked = Checked(job, target, options or LaunchOptions())
    o = checked.options
    offline = offline_session(o.session)
    notes: list[str] = []
    launchable = False
    if offline is not None:
        recorder, where = offline, "offline: placeholder account, role and bucket"
        plan = checked.plan_in(o.region or offline.region)
        role_arn, bucket_name = o.role or offline.role_arn, o.bucket or offline.bucket
        who = settings.resolve_attendee(o.attendee, {})
    else:
        plan = checked.plan
        try:
            ctx = aws.discover(o.role, o.bucket, o.region, o.attendee, boto_session=o.session)
        except setup_errors.AwsSetupError as err:
            # a dry run still shows the request, with placeholders, and says what a launch will need
            notes.append(f"{err} Placeholders are shown instead.")
            ctx, why = (
                None,
                (
                    "no AWS credentials"
                    if isinstance(err, setup_errors.NoCredentials)
                    else f"the account is not ready to launch ({type(err).__name__})"
                ),
            )
        if ctx is None:
            recorder, where = sagemaker_standin.OfflineAWS(), f"offline: {why}, placeholder account"
            role_arn, bucket_name = o.role or recorder.role_arn, o.bucket or recorder.bucket
            who = settings.resolve_attendee(o.attendee, {})
        else:
            recorder = sagemaker_standin.OfflineAWS(
                region=ctx.region, bucket=ctx.bucket, role_arn=ctx.role_arn, account=ctx.account
            )
            plan = checked.plan_in(ctx.region)
            where, role_arn, bucket_name, who = f"built for {ctx!r}", ctx.role_arn, ctx.bucket, ctx.attendee
            launchable = True
    if who.shared:
        notes.append(
            f"job names would start with the shared login name {who.name!r}: set {settings.ATTENDEE_ENV} "
            f"(or attendee=) before launching."
        )
    start = len(recorder.calls)
    with sagemaker_standin.network_guard():
        request = _capture(plan, recorder, role_arn, bucket_name, who.name, o.checkpoint_s3_uri)
    made = recorder.calls[start:]
    where_inputs = Locations(bucket_name, who.name, job)
    uploads = _uploads(made, [where_inputs.channel_prefix(c.source) for c in plan.channels if c.uploaded])
    dry = DryRun(
        plan,
        request,
        checked.estimate,
        checked.budget_usd,
        uploads,
        sagemaker_standin.summarize(made),
        where,
        notes,
        o if launchable else None,
    )
    save_request(dry, target)
    if o.echo:
        _show(dry)
    return dry


def save_request(dry: DryRun, target: Target, directory: str | Path | None = None) -> Path | None:
    """Write a dry run's request and plan as JSON into ``directory`` (default: ``$WORKSHOP_REQUESTS_DIR``; nothing
    when neither is set). The headless lab runner collects them, so tests can check what each lab would launch."""
    directory = directory or os.environ.get(REQUESTS_ENV)
    if not directory:
        return None
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    p = dry.plan
    record = {
        "lab_job": p.job.name,
        "target": target.name,
        "launcher": p.launcher,
        "processes_per_host": p.processes_per_host,
        "world_size": p.world_size,
        "image_note": p.image_note,
        "max_usd": dry.estimate.max_usd if dry.estimate else None,
        "uploads": dry.uploads,
        "calls": dry.calls,
        "request": _redacted(dry.request),
    }
    path = out / f"{len(list(out.glob('*.json'))) + 1:02d}-{p.job.name}.json"
    path.write_text(sagemaker_standin.to_json(record), encoding="utf-8")
    return path


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except ImportError:
        return False


def _show(dry: DryRun) -> None:
    """Shown as it is built, like a local run's log (a lab cell usually assigns the result, which displays nothing):
    HTML in Jupyter, its text in a saved headless notebook, printed in a terminal."""
    if _in_notebook():
        from IPython import get_ipython

        dry._display_now()
        dry._shown_in = get_ipython().execution_count
    else:
        print(dry, flush=True)
