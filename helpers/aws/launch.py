"""Launching a job on SageMaker and following it: :func:`launch`, the job while it runs (:class:`LaunchedJob`) and
once it has ended (:class:`SageMakerJobResult`). What a launch shares with a dry run (the options, the checks and the
price before any AWS call) is :mod:`helpers.aws.preflight`'s."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from helpers.aws import account as aws
from helpers.aws import settings, setup_errors
from helpers.aws.build import build_trainer
from helpers.aws.preflight import Checked, LaunchOptions, LaunchRefused, offline_session
from helpers.checks.findings import GuardrailError
from helpers.checks.target_rules import launch_guardrail
from helpers.errors import WorkshopError
from helpers.job_spec import Job, parse_metric_line
from helpers.planning import cost
from helpers.results import RunResult
from helpers.targets import Target

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # mpirun --tag-output prefixes every line of an SMDDP job


class TrainingJobFailed(WorkshopError, RuntimeError):
    """The SageMaker job ended Failed or Stopped; ``.result`` holds its status, reason and last log lines."""

    def __init__(self, message: str, result: SageMakerJobResult):
        super().__init__(message)
        self.result = result


def launch(job: Job, target: Target, options: LaunchOptions | None = None) -> SageMakerJobResult | LaunchedJob:
    """Launch ``job`` on a SageMaker instance type after the checks, the budget and the quota; follow it to its
    :class:`SageMakerJobResult` (``wait=False``: the :class:`LaunchedJob`)."""
    checked = Checked(job, target, options or LaunchOptions())
    o, estimate, budget_usd = checked.options, checked.estimate, checked.budget_usd
    if problem := launch_guardrail(job, target.name):  # an event account: AWS would answer AccessDenied
        raise GuardrailError(f"not launched: {problem}.")
    if offline_session(o.session) is not None:
        raise LaunchRefused(
            "launch=True inside an offline session: nothing can be launched offline. Leave the "
            "sagemaker_standin.offline() block (and unset WORKSHOP_AWS_OFFLINE) to launch."
        )
    if estimate is None and budget_usd is not None:
        raise cost.BudgetExceeded(
            f"no price on file for {checked.plan.instance.name}, so the budget of "
            f"${budget_usd:,.2f} cannot be checked: pass budget_usd=None to launch without a "
            f"budget."
        )
    if estimate is not None:
        cost.check_budget(estimate, budget_usd)
    ctx = aws.discover(o.role, o.bucket, o.region, o.attendee, boto_session=o.session)
    plan = checked.plan_in(ctx.region)
    if ctx.attendee.shared:
        raise setup_errors.AwsSetupError(
            f"the job-name prefix would be the shared login name {ctx.attendee.name!r}: "
            f"pass attendee='yourname' or set {settings.ATTENDEE_ENV} so your jobs are yours."
        )
    if o.quota_check:
        aws.check_quota(ctx.boto_session, plan.instance.name, job.instance_count, job.spot, ctx.region)
    trainer = build_trainer(
        plan, ctx.sagemaker_session(), ctx.role_arn, ctx.bucket, ctx.attendee.name, o.checkpoint_s3_uri
    )
    trainer.train(wait=False, logs=False)
    # the SDK keeps the created job on a private attribute only (train(wait=False) returns None)
    name = trainer._latest_training_job.training_job_name
    launched = LaunchedJob(
        name, ctx.boto_session, ctx.region, plan.instance.name, job.instance_count, echo=o.echo, poll_s=o.poll_s
    )
    if o.echo:
        print(f"launched {name} ({job.instance_count} x {plan.instance.name}); {launched.console_url}", flush=True)
    return launched.wait(check=o.check) if o.wait else launched


@dataclass(repr=False)  # the repr is RunResult's
class SageMakerJobResult(RunResult):
    """A finished SageMaker job, shaped like the local runner's ``JobResult`` where they overlap
    (``name``, ``status``, ``metrics``, ``history``, ``failure_reason``, ``log_tail``, ``curve``)."""

    name: str
    status: str  # Completed | Failed | Stopped
    metrics: dict
    history: list[dict]
    cost: cost.JobCost
    console_url: str
    model_artifacts: str | None
    failure_reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds in each secondary status (Downloading...)

    @property
    def billable_seconds(self) -> int:
        return self.cost.billable_seconds

    @property
    def training_seconds(self) -> int:
        return self.cost.training_seconds

    def _repr_parts(self, figures: str) -> list[str]:
        return [self.status, str(self.cost), figures, self.console_url]


def _phases(transitions: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in transitions or []:
        start, end = t.get("StartTime"), t.get("EndTime")
        if start and end:
            out[t["Status"]] = out.get(t["Status"], 0.0) + (end - start).total_seconds()
    return out


class LaunchedJob:
    """A training job running on SageMaker: follow it, wait for it, or stop it."""

    def __init__(
        self,
        name: str,
        boto_session,
        region: str,
        instance_type: str,
        instance_count: int,
        echo: bool = True,
        poll_s: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.name, self.region = name, region
        self.instance_type, self.instance_count = instance_type, instance_count
        self.echo, self.poll_s, self._sleep = echo, poll_s, sleep
        self._sm = boto_session.client("sagemaker", region_name=region)
        self._logs = boto_session.client("logs", region_name=region)
        self._tokens: dict[str, str | None] = {}
        self.history: list[dict] = []
        self.tail: list[str] = []
        self.total_steps: int | None = None

    @property
    def console_url(self) -> str:
        return aws.console_url(self.region, self.name)

    def describe(self) -> dict:
        return self._sm.describe_training_job(TrainingJobName=self.name)

    def stop(self) -> None:
        self._sm.stop_training_job(TrainingJobName=self.name)

    def _say(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def _poll_logs(self) -> None:
        from botocore.exceptions import ClientError

        try:
            streams = self._logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.name}/")
        except ClientError:  # the log group appears with the first job's first line
            return
        names = [s["logStreamName"] for s in streams.get("logStreams", [])]
        for stream in names:
            while True:
                kwargs = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
                if self._tokens.get(stream):
                    kwargs["nextToken"] = self._tokens[stream]
                page = self._logs.get_log_events(**kwargs)
                for event in page.get("events", []):
                    self._take(stream.split("/")[1].rsplit("-", 1)[0], event["message"], len(names) > 1)
                if page.get("nextForwardToken") == self._tokens.get(stream) or not page.get("events"):
                    self._tokens[stream] = page.get("nextForwardToken")
                    break
                self._tokens[stream] = page.get("nextForwardToken")

    def _take(self, host: str, line: str, multi: bool) -> None:
        text = f"[{host}] {line}" if multi else line
        self.tail = (self.tail + [text])[-60:]
        parsed = parse_metric_line(_MPI_TAG.sub("", line))
        if parsed:
            parsed["host"] = host
            self.history.append(parsed)
            if parsed["kind"] == "setup" and isinstance(parsed.get("steps"), int):
                self.total_steps = parsed["steps"]
            if parsed["kind"] == "train" and self.total_steps:
                text += f"   <- step {parsed['step']}/{self.total_steps} ({parsed['step'] / self.total_steps:.0%})"
        self._say(text)

    def wait(self, check: bool = True) -> SageMakerJobResult:
        """Follow status and logs until the job ends; ``check`` raises :class:`TrainingJobFailed` unless Completed.

        Interrupting the notebook stops following, not the job: stop it with ``.stop()`` or
        ``helpers.aws.leftovers.cleanup()``.
        """
        self._say(f"following {self.name}: {self.console_url}")
        last = None
        try:
            while True:
                desc = self.describe()
                state = (desc["TrainingJobStatus"], desc.get("SecondaryStatus"))
                if state != last:
                    self._say(f"--- {state[0]} / {state[1]}")
                    last = state
                self._poll_logs()
                if desc["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
                    break
                self._sleep(self.poll_s)
        except KeyboardInterrupt:
            self._say(
                f"stopped following; {self.name} is still running. Stop it with job.stop() or "
                f"helpers.aws.leftovers.cleanup()."
            )
            raise
        return self._result(desc, check)

    def _result(self, desc: dict, check: bool) -> SageMakerJobResult:
        finals = [h for h in self.history if h["kind"] == "final"]
        metrics = (
            {k: v for k, v in finals[-1].items() if k not in ("kind", "host")}
            if finals
            else {m["MetricName"]: m["Value"] for m in desc.get("FinalMetricDataList", [])}
        )
        bill = cost.job_cost(
            self.instance_type,
            self.instance_count,
            desc.get("TrainingTimeInSeconds", 0),
            desc.get("BillableTimeInSeconds", 0),
        )
        result = SageMakerJobResult(
            self.name,
            desc["TrainingJobStatus"],
            metrics,
            self.history,
            bill,
            self.console_url,
            desc.get("ModelArtifacts", {}).get("S3ModelArtifacts"),
            desc.get("FailureReason", ""),
            self.tail,
            _phases(desc.get("SecondaryStatusTransitions", [])),
        )
        self._say(f"{result.status}: {bill}")
        if check and result.status != "Completed":
            raise TrainingJobFailed(f"{result.failure_message()}\n{self.console_url}", result)
        return result
