"""CloudWatch training-job metrics, offline: recorded answers through OfflineAWS, requests validated by botocore."""

from __future__ import annotations

import datetime as dt
import math
import re

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers.aws import cloudwatch
from sagemaker_standin import offline_account as aws_offline  # noqa: E402
from sagemaker_standin import sandbox

JOB = "alice-lab07-fixed-20261122120000"  # <attendee>-<lab job name>-<YYYYmmddHHMMSS>, as ModelTrainer names it
NOW = dt.datetime.now(dt.timezone.utc)
# two hours ago, 30 s past a minute: recent enough for 1-minute values, whenever the tests run
T0 = (NOW - dt.timedelta(hours=2)).replace(second=30, microsecond=0)
MINUTES = [T0.replace(second=0) + dt.timedelta(minutes=i) for i in range(1, 5)]
# a recorded answer for 2 x ml.g5.12xlarge (48 vCPUs, 4 GPUs): algo-1's CPUs saturated while its GPUs idle (the
# starved pattern); algo-2 healthy. CPU and GPU values are sums over the units, as CloudWatch reports them.
RECORDED = {
    ("algo-1", "CPUUtilization"): [4700.0, 4752.0, 4608.0, 4700.0],
    ("algo-1", "GPUUtilization"): [120.0, 100.0, 140.0, 120.0],
    ("algo-1", "MemoryUtilization"): [31.0, 32.0, 32.5, 33.0],
    ("algo-2", "CPUUtilization"): [960.0, 1008.0, 912.0],  # one minute not yet published
    ("algo-2", "GPUUtilization"): [380.0, 392.0, 376.0, 388.0],
    ("algo-2", "MemoryUtilization"): [20.0, 20.0, 21.0, 21.0],
}


def describe(params, start: dt.datetime = T0):
    return {
        "TrainingJobName": params["TrainingJobName"],
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{params['TrainingJobName']}",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "CreationTime": start - dt.timedelta(minutes=3),
        "TrainingStartTime": start,
        "TrainingEndTime": start + dt.timedelta(minutes=4),
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m.tar.gz"},
        "RoleArn": sandbox.ROLE_ARN,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
    }


def list_metrics(params):
    host = params["Dimensions"][0]["Value"]
    names = sorted({m for (h, m) in RECORDED if f"{JOB}/{h}" == host})
    return {
        "Metrics": [
            {"Namespace": params["Namespace"], "MetricName": n, "Dimensions": params["Dimensions"]} for n in names
        ]
    }


def get_metric_data(params, page_size: int = 0):
    """Answer each query from RECORDED, newest first unless ScanBy says otherwise; ``page_size`` splits the answer
    into pages as CloudWatch does for long windows."""
    results = []
    for q in params["MetricDataQueries"]:
        stat = q["MetricStat"]
        host = stat["Metric"]["Dimensions"][0]["Value"].split("/")[-1]
        values = RECORDED.get((host, stat["Metric"]["MetricName"]), [])
        results.append(
            {
                "Id": q["Id"],
                "Label": q["Label"],
                "Timestamps": MINUTES[: len(values)],
                "Values": list(values),
                "StatusCode": "Complete",
            }
        )
    if not page_size:
        return {"MetricDataResults": results}
    token = int(params.get("NextToken") or 0)
    page = [
        {
            **r,
            "Timestamps": r["Timestamps"][token : token + page_size],
            "Values": r["Values"][token : token + page_size],
        }
        for r in results
    ]
    more = any(len(r["Values"]) > token + page_size for r in results)
    return {"MetricDataResults": page, **({"NextToken": str(token + page_size)} if more else {})}


@pytest.fixture
def recorded():
    aws = aws_offline.OfflineAWS()
    aws.respond("DescribeTrainingJob", describe)
    aws.respond("ListMetrics", list_metrics)
    aws.respond("GetMetricData", get_metric_data)
    return aws


def test_metrics_are_fetched_per_host_and_read_per_unit(recorded):
    with sandbox.network_guard() as attempts:
        m = cloudwatch.job_metrics(JOB, session=recorded)
    assert not attempts
    assert m.instance_type == "ml.g5.12xlarge" and m.hosts == ["algo-1", "algo-2"]
    assert m.metrics == ["CPUUtilization", "MemoryUtilization", "GPUUtilization"]
    times, cpu = m.series[("algo-1", "CPUUtilization")]
    assert cpu == pytest.approx([4700 / 48, 4752 / 48, 4608 / 48, 4700 / 48])  # summed over 48 vCPUs
    assert m.series[("algo-2", "GPUUtilization")][1] == pytest.approx([95.0, 98.0, 94.0, 97.0])  # over 4 GPUs
    assert m.series[("algo-1", "MemoryUtilization")][1] == [31.0, 32.0, 32.5, 33.0]  # already a percentage
    assert times == sorted(times)


def test_requests_name_each_host_and_pass_botocore_validation(recorded):
    cloudwatch.job_metrics(JOB, session=recorded, period_s=120)
    listed = [c.params["Dimensions"][0]["Value"] for c in recorded.calls_to("ListMetrics")]
    assert listed == [f"{JOB}/algo-1", f"{JOB}/algo-2"]
    request = recorded.request("GetMetricData")
    queries = request["MetricDataQueries"]
    assert len(queries) == 6  # only the series that exist: no GPU-memory or disk series in the recording
    for q in queries:
        stat = q["MetricStat"]
        assert stat["Metric"]["Namespace"] == "/aws/sagemaker/TrainingJobs"
        assert stat["Period"] == 120 and stat["Stat"] == "Average"
        assert stat["Metric"]["Dimensions"][0]["Name"] == "Host"
    assert request["StartTime"] <= T0 and request["EndTime"] >= T0 + dt.timedelta(minutes=4)


def test_pages_are_merged(recorded):
    recorded.respond("GetMetricData", lambda p: get_metric_data(p, page_size=2))
    m = cloudwatch.job_metrics(JOB, session=recorded)
    assert len(recorded.calls_to("GetMetricData")) == 2
    assert len(m.series[("algo-2", "GPUUtilization")][1]) == 4
    assert len(m.series[("algo-2", "CPUUtilization")][1]) == 3


def test_heatmap_rows_share_one_time_axis(recorded):
    m = cloudwatch.job_metrics(JOB, session=recorded)
    labels, minutes, values = m.matrix()
    assert labels == ["algo-1 cpu", "algo-1 gpu", "algo-2 cpu", "algo-2 gpu"]
    assert minutes == pytest.approx([0.5, 1.5, 2.5, 3.5])  # the job started at 12:00:30
    assert math.isnan(values[2][3]) and values[3][3] == pytest.approx(97.0)  # the missing minute stays a gap
    fig = m.heatmap()
    assert fig.axes and "algo-1 cpu" in [t.get_text() for t in fig.axes[0].get_yticklabels()]
    rows = m.rows()
    assert rows[0]["cpu mean %"] > 95 and rows[0]["gpu mean %"] == pytest.approx(30.0)
    assert rows[1]["gpu mean %"] == pytest.approx(96.0) and rows[1]["cpu max %"] == pytest.approx(21.0)


def test_a_job_without_metrics_says_why(recorded):
    recorded.respond("ListMetrics", {"Metrics": []})
    with pytest.raises(cloudwatch.MetricsUnavailable, match="appear a few minutes after"):
        cloudwatch.job_metrics(JOB, session=recorded)
    assert not recorded.calls_to("GetMetricData")


@pytest.mark.parametrize(
    "age, period_s", [(dt.timedelta(hours=2), 60), (dt.timedelta(days=20), 300), (dt.timedelta(days=100), 3600)]
)
def test_the_period_follows_the_jobs_age(recorded, age, period_s):
    # CloudWatch keeps 1-minute values 15 days, 5-minute ones 63 days, 1-hour ones 15 months
    recorded.respond("DescribeTrainingJob", lambda p: describe(p, start=NOW - age))
    m = cloudwatch.job_metrics(JOB, session=recorded)
    assert m.period_s == period_s and m.hosts == ["algo-1", "algo-2"]
    queries = recorded.request("GetMetricData")["MetricDataQueries"]
    assert {q["MetricStat"]["Period"] for q in queries} == {period_s}
    if age > cloudwatch.LISTED_FOR:
        # ListMetrics forgets series not updated for two weeks: an older job's every host and metric is asked for
        assert not recorded.calls_to("ListMetrics") and len(queries) == 2 * len(cloudwatch.METRICS)
    else:
        assert len(recorded.calls_to("ListMetrics")) == 2 and len(queries) == 6


def test_a_period_finer_than_cloudwatch_still_keeps_is_refused_before_asking(recorded):
    recorded.respond("DescribeTrainingJob", lambda p: describe(p, start=NOW - dt.timedelta(days=20)))
    with pytest.raises(ValueError, match=r"20 days ago.*period_s=300"):
        cloudwatch.job_metrics(JOB, session=recorded, period_s=60)
    cloudwatch.job_metrics(JOB, session=recorded, period_s=600)  # a multiple of 5 minutes is fine
    assert len(recorded.calls_to("GetMetricData")) == 1


def test_a_job_older_than_15_months_says_so(recorded):
    recorded.respond("DescribeTrainingJob", lambda p: describe(p, start=NOW - dt.timedelta(days=500)))
    with pytest.raises(cloudwatch.MetricsUnavailable, match="500 days ago.*455 days"):
        cloudwatch.job_metrics(JOB, session=recorded)
    assert [c.operation for c in recorded.calls] == ["DescribeTrainingJob"]


def test_retention_boundaries():
    day = dt.timedelta(days=1)
    at = {days: cloudwatch.finest_period_s(NOW - days * day, NOW) for days in (0, 14.99, 15, 62.99, 63, 454.99)}
    assert at == {0: 60, 14.99: 60, 15: 300, 62.99: 300, 63: 3600, 454.99: 3600}
    with pytest.raises(cloudwatch.MetricsUnavailable):
        cloudwatch.finest_period_s(NOW - 455 * day, NOW)
    naive = (NOW - 20 * day).replace(tzinfo=None)  # read as UTC, as boto3 does
    assert cloudwatch.finest_period_s(naive, NOW) == 300


def test_listed_series_without_values_say_so(recorded):
    recorded.respond("GetMetricData", {"MetricDataResults": []})
    with pytest.raises(cloudwatch.MetricsUnavailable, match="returned no .* at 60-second periods"):
        cloudwatch.job_metrics(JOB, session=recorded)


def test_the_example_job_name_has_the_launched_jobs_format():
    from sagemaker.train.utils import _get_unique_name  # how ModelTrainer names a job from its base_job_name

    example = re.search(r'job_metrics\("([^"]+)"\)', cloudwatch.__doc__)[1]
    base, stamp = example.rsplit("-", 1)
    assert re.fullmatch(r"[a-z0-9]+-lab\d\d-[a-z0-9-]+", base)  # <attendee>-<lab job name>
    assert re.fullmatch(r"\d{14}", stamp) and dt.datetime.strptime(stamp, "%Y%m%d%H%M%S")
    assert re.fullmatch(re.escape(base) + r"-\d{14}", _get_unique_name(base))
    assert re.fullmatch(r"[a-z0-9]+-lab\d\d-[a-z0-9-]+-\d{14}", JOB)


def test_period_must_be_whole_minutes(recorded):
    with pytest.raises(ValueError, match="once a minute"):
        cloudwatch.job_metrics(JOB, session=recorded, period_s=30)
    assert not recorded.calls


def test_queries_are_valid_ids():
    queries = cloudwatch.metric_queries(JOB, ["algo-1", "algo-12"])
    assert len(queries) == 2 * len(cloudwatch.METRICS)
    assert cloudwatch._query_key(queries[-1]["Id"]) == ("algo-12", "DiskUtilization")
    assert all(q["Id"][0].islower() for q in queries)  # CloudWatch ids must start with a lower-case letter
