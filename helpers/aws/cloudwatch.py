"""A real training job's instance metrics from CloudWatch, drawn as the same heatmap the local monitor draws::

    m = cloudwatch.job_metrics("alice-lab07-profile-20261122120000")   # while the job runs, or after
    m.heatmap(); m.table()

A job's name is ``<attendee>-<lab job name>-<YYYYmmddHHMMSS>``, as the launch prints it. Older jobs get coarser
columns (:func:`finest_period_s`). CPU and GPU series, sums over the instance's vCPUs or GPUs, are divided by their
count so every row reads 0-100 %.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import sagemaker_standin
from helpers.errors import WorkshopError
from helpers.planning import instances
from helpers.plots import heatmap
from helpers.report import Table

NAMESPACE = "/aws/sagemaker/TrainingJobs"
METRICS = ("CPUUtilization", "MemoryUtilization", "GPUUtilization", "GPUMemoryUtilization", "DiskUtilization")
SHORT = {
    "CPUUtilization": "cpu",
    "MemoryUtilization": "mem",
    "GPUUtilization": "gpu",
    "GPUMemoryUtilization": "gpu mem",
    "DiskUtilization": "disk",
}
# metrics CloudWatch sums over the instance's units: divided by this many of them to read 0-100 %
SUMMED_OVER = {"CPUUtilization": "vcpus", "GPUUtilization": "gpus", "GPUMemoryUtilization": "gpus"}
# (kept for, period): GetMetricData returns no points for a StartTime older than a resolution's retention unless the
# period is a multiple of the next, coarser one (CloudWatch's GetMetricData reference)
RETENTION = ((dt.timedelta(days=15), 60), (dt.timedelta(days=63), 300), (dt.timedelta(days=455), 3600))
LISTED_FOR = dt.timedelta(days=14)  # ListMetrics shows only series updated in the last two weeks


def _host_number(host: str) -> int:
    """``algo-3`` -> 3: hosts sort by number, not by name (algo-10 after algo-9)."""
    return int(host.split("-")[1])


class MetricsUnavailable(WorkshopError, LookupError):
    """CloudWatch has no instance metrics for the job (yet, or any more): the message says why and what to do."""


def _utc(t: dt.datetime) -> dt.datetime:
    """A naive time is taken as UTC, as boto3 and CloudWatch read it."""
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def finest_period_s(start: dt.datetime, now: dt.datetime | None = None) -> int:
    """The shortest period CloudWatch still keeps for data from ``start``: 60 s under 15 days old, 300 s under 63
    days, 3600 s under 455 days; older than that, :class:`MetricsUnavailable`."""
    age = (now or dt.datetime.now(dt.timezone.utc)) - _utc(start)
    for kept, period_s in RETENTION:
        if age < kept:
            return period_s
    raise MetricsUnavailable(
        f"the window starts {age.days} days ago ({_utc(start):%Y-%m-%d}): CloudWatch keeps "
        f"metrics for {RETENTION[-1][0].days} days (15 months), so none are left for it."
    )


@dataclass
class JobMetrics:
    """Per-host series of one training job, oldest first; ``values`` already read 0-100 % per unit."""

    job_name: str
    instance_type: str
    period_s: int
    start: dt.datetime
    series: dict[tuple[str, str], tuple[list[dt.datetime], list[float]]] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        return sorted({h for h, _ in self.series}, key=_host_number)

    @property
    def metrics(self) -> list[str]:
        present = {m for _, m in self.series}
        return [m for m in METRICS if m in present]

    def matrix(self, metrics: tuple[str, ...] = ("CPUUtilization", "GPUUtilization")):
        """(row labels, minutes since the start, values): one row per host and metric, on a shared time axis."""
        wanted = [m for m in metrics if m in self.metrics]
        stamps = sorted({t for (_, m), (ts, _) in self.series.items() if m in wanted for t in ts})
        index = {t: i for i, t in enumerate(stamps)}
        labels, values = [], []
        for host in self.hosts:
            for metric in wanted:
                if (host, metric) not in self.series:
                    continue
                row = [float("nan")] * len(stamps)
                for t, v in zip(*self.series[(host, metric)]):
                    row[index[t]] = v
                labels.append(f"{host} {SHORT[metric]}")
                values.append(row)
        minutes = [(t - self.start).total_seconds() / 60 for t in stamps]
        return labels, minutes, values

    def heatmap(self, metrics: tuple[str, ...] = ("CPUUtilization", "GPUUtilization"), title: str = "", ax=None):

        labels, minutes, values = self.matrix(metrics)
        return heatmap(
            labels,
            minutes,
            values,
            title=title or f"{self.job_name} ({self.instance_type})",
            ax=ax,
            xlabel="minutes since the job started",
        )

    def rows(self) -> list[dict]:
        """Mean and peak of every metric per host."""
        out = []
        for host in self.hosts:
            row: dict = {"host": host}
            for metric in self.metrics:
                _, values = self.series.get((host, metric), ([], []))
                if values:
                    row[f"{SHORT[metric]} mean %"] = sum(values) / len(values)
                    row[f"{SHORT[metric]} max %"] = max(values)
            out.append(row)
        return out

    def table(self):

        return Table(
            self.rows(),
            title=f"{self.job_name}: instance utilisation (CloudWatch, {self.period_s} s periods, % per unit)",
        )


def _boto_session(session):
    """A boto3 session: the one given, an offline recorder's, the active offline block's, or the default."""

    if session is None:
        session = sagemaker_standin.active()
    if isinstance(session, sagemaker_standin.OfflineAWS):
        return session.boto_session
    if session is None:
        import boto3

        return boto3.Session()
    return session


def host_dimension(job_name: str, host: str) -> dict:
    return {"Name": "Host", "Value": f"{job_name}/{host}"}


def list_series(job_name: str, hosts: list[str], session=None) -> dict[str, set[str]]:
    """Which of the job's hosts have which metrics in CloudWatch (``ListMetrics`` on each host's dimension)."""
    cw = _boto_session(session).client("cloudwatch")
    found: dict[str, set[str]] = {}
    for host in hosts:
        token = None
        while True:
            page = cw.list_metrics(
                Namespace=NAMESPACE,
                Dimensions=[host_dimension(job_name, host)],
                **({"NextToken": token} if token else {}),
            )
            names = {m["MetricName"] for m in page.get("Metrics", []) if m["MetricName"] in METRICS}
            if names:
                found.setdefault(host, set()).update(names)
            token = page.get("NextToken")
            if not token:
                break
    return found


def metric_queries(
    job_name: str, hosts: dict[str, set[str]] | list[str], period_s: int = 60, stat: str = "Average"
) -> list[dict]:
    """The ``GetMetricData`` queries for every host and metric (``hosts`` as :func:`list_series` returns them, or
    host names for every metric). Each query's ``Id`` encodes its host and metric."""
    wanted = hosts if isinstance(hosts, dict) else {h: set(METRICS) for h in hosts}
    queries = []
    for host in sorted(wanted, key=_host_number):
        for i, metric in enumerate(METRICS):
            if metric in wanted[host]:
                queries.append(
                    {
                        "Id": f"h{host.split('-')[1]}m{i}",
                        "Label": f"{host} {metric}",
                        "ReturnData": True,
                        "MetricStat": {
                            "Metric": {
                                "Namespace": NAMESPACE,
                                "MetricName": metric,
                                "Dimensions": [host_dimension(job_name, host)],
                            },
                            "Period": period_s,
                            "Stat": stat,
                        },
                    }
                )
    return queries


def _query_key(query_id: str) -> tuple[str, str]:
    m = re.fullmatch(r"h(\d+)m(\d+)", query_id)
    if not m:
        raise ValueError(f"unexpected GetMetricData result id {query_id!r}")
    return f"algo-{m[1]}", METRICS[int(m[2])]


def get_metric_data(cw, queries: list[dict], start: dt.datetime, end: dt.datetime) -> dict[tuple[str, str], dict]:
    """Every page of ``GetMetricData`` (at most 500 queries a call), merged: ``{(host, metric): {t: value}}``."""
    merged: dict[tuple[str, str], dict] = {}
    for first in range(0, len(queries), 500):
        token = None
        while True:
            page = cw.get_metric_data(
                MetricDataQueries=queries[first : first + 500],
                StartTime=start,
                EndTime=end,
                ScanBy="TimestampAscending",
                **({"NextToken": token} if token else {}),
            )
            for res in page.get("MetricDataResults", []):
                points = merged.setdefault(_query_key(res["Id"]), {})
                points.update(zip(res.get("Timestamps", []), res.get("Values", [])))
            token = page.get("NextToken")
            if not token:
                break
    return merged


def job_metrics(
    job_name: str,
    session=None,
    period_s: int | None = None,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> JobMetrics:
    """Fetch a training job's instance metrics: hosts, instance type and time window from ``DescribeTrainingJob``
    (a job still running is read up to now; ``start``/``end`` narrow the window). ``period_s``: seconds per value;
    by default the finest CloudWatch still keeps for the window's start (:func:`finest_period_s`)."""

    if period_s is not None and (period_s < 60 or period_s % 60):
        raise ValueError(
            f"period_s={period_s}: SageMaker publishes training metrics once a minute; use a multiple of 60 seconds."
        )
    boto = _boto_session(session)
    desc = boto.client("sagemaker").describe_training_job(TrainingJobName=job_name)
    config = desc["ResourceConfig"]
    now = dt.datetime.now(dt.timezone.utc)
    start = _utc(start or desc.get("TrainingStartTime") or desc["CreationTime"])
    end = _utc(end or desc.get("TrainingEndTime") or now)
    # CloudWatch answers on period boundaries: the window starts on a whole minute so no edge minute is lost
    first = start.replace(second=0, microsecond=0)
    finest = finest_period_s(first, now)
    if period_s is None:
        period_s = finest
    elif period_s % finest:
        raise ValueError(
            f"period_s={period_s}: {job_name!r} started {(now - first).days} days ago, and CloudWatch "
            f"keeps only {finest}-second values that far back (1-minute ones for 15 days, 5-minute ones "
            f"for 63): pass period_s={finest} (or a multiple of it), or leave period_s out."
        )
    all_hosts = [f"algo-{i + 1}" for i in range(config["InstanceCount"])]
    if now - end < LISTED_FOR:  # only then does ListMetrics know the job's series: ask for the ones that exist
        hosts: dict[str, set[str]] | list[str] = list_series(job_name, all_hosts, boto)
        if not hosts:
            raise MetricsUnavailable(
                f"CloudWatch has no {NAMESPACE} metrics for {job_name!r} yet. They appear a few minutes after the "
                f"instances start (status {desc['TrainingJobStatus']}/{desc.get('SecondaryStatus', '?')}). Check "
                f"the job name and the session's region."
            )
    else:
        hosts = all_hosts
    raw = get_metric_data(
        boto.client("cloudwatch"),
        metric_queries(job_name, hosts, period_s),
        first,
        end + dt.timedelta(seconds=period_s),
    )
    if not any(raw.values()):
        raise MetricsUnavailable(
            f"CloudWatch returned no {NAMESPACE} values for {job_name!r} from {first:%Y-%m-%d %H:%M} to "
            f"{end:%Y-%m-%d %H:%M} UTC at {period_s}-second periods. Check the job name, the session's region, "
            f"and start/end if you narrowed the window."
        )
    spec = instances.lookup(config["InstanceType"])
    units = {"vcpus": spec.vcpus, "gpus": max(1, spec.gpus)}
    series = {}
    for (host, metric), points in raw.items():
        if points:
            stamps = sorted(points)
            per = units[SUMMED_OVER[metric]] if metric in SUMMED_OVER else 1
            series[(host, metric)] = (stamps, [points[t] / per for t in stamps])
    return JobMetrics(job_name, config["InstanceType"], period_s, start, series)
