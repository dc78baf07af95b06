"""File, FastFile and FSx channels from the loopback object store: what each presents, fetches and keeps."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import random
import textwrap
from pathlib import Path

import pytest
from conftest import TINY

from catalog_generator import catalog
from helpers import jobs
from helpers.aws import mode_comparison
from helpers.aws.mode_comparison import fsx_preflight, sagemaker_jobs_per_mode
from helpers.checks import findings
from helpers.checks.findings import ChannelError
from helpers.errors import JobCheckError
from helpers.input_mode import MODES
from helpers.job_spec import Job
from helpers.jobs import on_sagemaker
from helpers.local.containers import LocalJob
from helpers.targets import Target, resolve
from sagemaker_standin import fastfile, objectstore, ports, s3_inputs, streamed_open

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

CPU = Target("local_cpu", "local_cpu", 0, 2)
BUCKET = "modes-data"

# reads the train channel as a training script would (plain files, no idea of the mode) and reports what it saw
PROBE = textwrap.dedent("""
    import hashlib, json, os, socket, sys
    root = os.environ["SM_CHANNEL_TRAIN"]
    names = sorted(os.listdir(root))
    sizes = {n: os.path.getsize(os.path.join(root, n)) for n in names}
    # bytes on disk when the script starts: a FastFile placeholder holds none (a sparse file)
    holding = [n for n in names if os.stat(os.path.join(root, n)).st_blocks > 0]
    which = sys.argv[sys.argv.index("--read") + 1]
    wanted = names if which == "all" else [n for n in names if n.endswith(".csv")][:1]
    digests = {}
    for n in wanted:
        with open(os.path.join(root, n), "rb") as f:
            digests[n] = hashlib.sha256(f.read()).hexdigest()
    guard = ""
    if "--probe_network" in sys.argv:
        try:
            socket.getaddrinfo("example.invalid", 80)
        except PermissionError as err:
            guard = str(err)
        except OSError:
            guard = "not blocked"
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "probe.json"), "w") as f:
        json.dump({"sizes": sizes, "holding": holding, "digests": digests, "guard": guard,
                   "channel_is_link": os.path.islink(root)}, f)
    print("[final] probe=1")
""")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A three-shard catalogue, uploaded to a store that lives for this module."""
    root = tmp_path_factory.mktemp("modes")
    shards = catalog.shards(root / "catalog", rows=3000, n_shards=3, vocab_size=600, tokenizer_rows=3000)
    with objectstore.ObjectStore(root / "store") as store:
        store.create_bucket(BUCKET)
        for split in ("train", "validation"):
            store.upload_dir(shards / split, f"s3://{BUCKET}/shards/{split}/")
        yield store, shards


def probe_job(
    store, mode: str, probe_dir: Path, read: str = "all", uri: str = f"s3://{BUCKET}/shards/train/", **kw
) -> Job:
    return Job(
        f"probe-{mode.lower()}",
        {"read": read},
        {"train": uri},
        input_mode=mode,
        s3_endpoint=store.endpoint,
        entry_point="probe.py",
        source_dir=probe_dir,
        **kw,
    )


def seen(result) -> dict:
    return json.loads((result.model_dir / "probe.json").read_text())


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_presents_the_same_files_and_bytes(data, runner, probe_dir, mode):
    store, shards = data
    result = runner.run(probe_job(store, mode, probe_dir), CPU)
    saw = seen(result)
    local = {p.name: p for p in (shards / "train").iterdir()}
    assert saw["sizes"] == {n: p.stat().st_size for n, p in local.items()}
    assert saw["digests"] == {n: sha(p) for n, p in local.items()}  # identical bytes, whatever the mode
    io = s3_inputs.job_io(result)
    total = sum(p.stat().st_size for p in local.values())
    assert io["bytes_in_channels"] == total and io["bytes_from_store"] == total
    if mode == "FastFile":  # nothing before the start; everything on the script's opens
        assert io["bytes_before_start"] == 0 and io["bytes_during_job"] == total and not saw["holding"]
    else:  # File and a cold FSx fetch everything before the script starts
        assert io["bytes_before_start"] == total and sorted(saw["holding"]) == sorted(local)
    assert saw["channel_is_link"] == (mode == "FSx")


def test_fastfile_starts_before_the_bytes_and_fetches_only_what_is_opened(data, runner, probe_dir):
    store, shards = data
    result = runner.run(probe_job(store, "FastFile", probe_dir, read="one"), CPU)
    saw = seen(result)
    first = sorted((shards / "train").glob("*.csv"))[0]
    assert saw["holding"] == [] and len(saw["sizes"]) == 5  # every object listed at its size, no bytes yet
    assert saw["digests"] == {first.name: sha(first)}
    record = json.loads((result.run_dir / "inputs.json").read_text())
    # the one file it read, in one ranged GET (read() asks for the rest of the file): no other file read ahead
    assert [(f["key"], f["range"]) for f in record["fetches"]] == [
        (f"shards/train/{first.name}", [0, first.stat().st_size])
    ]
    io = s3_inputs.job_io(result)
    assert io["bytes_from_store"] == first.stat().st_size and io["objects_from_store"] == 1
    untouched = result.run_dir / "algo-1" / "input" / "data" / "train" / "tokenizer.json"
    assert untouched.stat().st_blocks == 0 and set(untouched.read_bytes()) == {0}  # still a placeholder


def test_fastfile_streams_ranges_reads_ahead_in_order_and_starts_again_after_a_jump(data, tmp_path):
    """Mountpoint's prefetcher: a first request of FIRST_REQUEST_BYTES, each read in order fetching 8 times further
    ahead, in parts that end on PART_BYTES boundaries; a jump starts again at the first size. Every byte read is the
    object's."""
    store, _ = data
    blob = random.Random(3).randbytes(20 << 20)
    store.client().put_object(Bucket=BUCKET, Key="stream/big.bin", Body=blob)
    objects = store.list(f"s3://{BUCKET}/stream/")
    server = fastfile.FastFileServer(store.endpoint)
    try:
        server.present("train", BUCKET, [("big.bin", objects[0])], tmp_path / "ch", tmp_path / "scratch")
        path = str((tmp_path / "ch" / "big.bin").resolve())
        reader = streamed_open.ReadThrough(server.address, [str(tmp_path / "ch")])
        with io.BufferedReader(streamed_open.StreamedFile(path, reader), 1 << 20) as f:
            assert f.read(1 << 20) == blob[: 1 << 20]
            assert f.read(1 << 20) == blob[1 << 20 : 2 << 20]  # in order: 8 times further ahead
            f.seek(15 << 20)  # a jump: the window starts again at the first size
            assert f.read(1 << 20) == blob[15 << 20 : 16 << 20]
            assert f.read(1 << 20) == blob[16 << 20 : 17 << 20]  # in order again: 8 times further, to the end
            f.seek(3 << 20)  # back, into bytes already here: nothing more fetched
            assert f.read(1 << 20) == blob[3 << 20 : 4 << 20]
    finally:
        server.close()
    first, part, mib = fastfile.FIRST_REQUEST_BYTES, fastfile.PART_BYTES, 1 << 20
    assert sorted(tuple(g["range"]) for g in server.fetches) == [
        (0, first),
        (first, part),  # parts end on PART_BYTES boundaries, as Mountpoint's do
        (part, mib + fastfile.PREFETCH_MULTIPLIER * first),
        (15 * mib, 2 * part),  # the first size again, split where a part ends
        (2 * part, 15 * mib + first),
        (15 * mib + first, 20 * mib),
    ]  # 10-15 MiB was never read nor read ahead: never fetched
    stats = server.stats()["train"]
    demanded = 4 * mib - 2 * fastfile.BLOCK_BYTES  # each read's own bytes not already asked for ahead of it
    assert stats["bytes"] == 15 * mib and stats["read_ahead_bytes"] == 15 * mib - demanded


def test_fastfile_keeps_no_copy_between_opens_as_mountpoint_without_its_cache(data, tmp_path):
    """A file opened again (the next epoch) is fetched again, from the first request's size: Mountpoint keeps no data
    between opens unless given --cache. One reader's seek back stays within what it fetched."""
    store, _ = data
    blob = random.Random(5).randbytes(3 << 20)
    store.client().put_object(Bucket=BUCKET, Key="again/small.bin", Body=blob)
    server = fastfile.FastFileServer(store.endpoint)
    try:
        server.present(
            "train", BUCKET, [("small.bin", store.list(f"s3://{BUCKET}/again/")[0])], tmp_path / "ch", tmp_path
        )
        path = str((tmp_path / "ch" / "small.bin").resolve())
        reader = streamed_open.ReadThrough(server.address, [str(tmp_path / "ch")])
        for _ in range(2):  # two epochs, each opening the file anew
            with io.BufferedReader(streamed_open.StreamedFile(path, reader), 1 << 20) as f:
                assert f.read() == blob
        with io.BufferedReader(streamed_open.StreamedFile(path, reader), 1 << 20) as f:
            assert f.read(1 << 20) == blob[: 1 << 20]
            f.seek(0)  # the same reader, back over bytes it fetched: nothing more
            assert f.read(1 << 20) == blob[: 1 << 20]
    finally:
        server.close()  # waits for the GETs' records
    # every byte of the two whole reads fetched twice, one fetch per open; the third open's first request again
    assert (
        sorted(tuple(g["range"]) for g in server.fetches) == [(0, fastfile.FIRST_REQUEST_BYTES)] + [(0, len(blob))] * 2
    )
    assert server.stats()["train"]["bytes"] == 2 * len(blob) + fastfile.FIRST_REQUEST_BYTES


def test_a_get_still_finishing_never_settles_blocks_a_new_reader_asked_for(data, tmp_path):
    """The race behind a missing fetch record: the first open's GET delivered its last bytes (its reader went on) but
    had not yet recorded itself when the next open asked for the file again. Settling "fetching" blocks it no longer
    owns would let the second reader read bytes no GET of its own fetched."""
    store, _ = data
    blob = random.Random(6).randbytes(3 << 20)
    store.client().put_object(Bucket=BUCKET, Key="race/small.bin", Body=blob)
    server = fastfile.FastFileServer(store.endpoint)
    submitted: list[tuple] = []

    class HeldPool:  # the GETs are run by the test, one at a time, in the order it chooses
        def submit(self, fn, *args):
            submitted.append((fn, args))

        def shutdown(self, **_):
            pass

    server._pool = HeldPool()
    try:
        server.present(
            "train", BUCKET, [("small.bin", store.list(f"s3://{BUCKET}/race/")[0])], tmp_path / "ch", tmp_path
        )
        path = str((tmp_path / "ch" / "small.bin").resolve())
        lazy = server.files[path]
        everything = range(lazy.n_blocks)
        arrived = server._arrived

        def next_open_asks_again(lazy_, blocks, first, got, *get):
            arrived(lazy_, blocks, first, got, *get)
            if first + got == lazy_.size and len(submitted) == 1:  # the first reader has all it asked for
                server.opened(path)
                with server._changed:
                    server._schedule(lazy_, everything, set(everything))

        server._arrived = next_open_asks_again
        with server._changed:
            server._schedule(lazy, everything, set(everything))
        first_get, args = submitted[0]
        first_get(*args)  # delivers, lets the next open schedule its own GET, then settles its blocks
        assert len(submitted) == 2, "the second open never asked for the file"
        assert set(lazy.blocks.values()) == {"fetching"}, "the first GET settled blocks the second one is fetching"
        second_get, args = submitted[1]
        second_get(*args)
        assert set(lazy.blocks.values()) == {"ready"}
        assert [tuple(f["range"]) for f in server.fetches] == [(0, len(blob))] * 2
    finally:
        server.close()


def test_fsx_outlives_jobs_and_follows_the_store(data, runner, probe_dir):
    store, shards = data
    uri = f"s3://{BUCKET}/fsx-case/"
    store.upload_dir(shards / "train", uri)
    first = runner.run(probe_job(store, "FSx", probe_dir, uri=uri), CPU)
    second = runner.run(probe_job(store, "FSx", probe_dir, uri=uri), CPU)
    total = s3_inputs.job_io(first)["bytes_in_channels"]
    assert s3_inputs.job_io(first)["bytes_before_start"] == total
    assert s3_inputs.job_io(second)["bytes_from_store"] == 0  # warm: starts at once
    assert seen(second)["digests"] == seen(first)["digests"]
    shared = runner.runs_dir.parent / "fsx" / BUCKET / "fsx-case"
    assert (second.run_dir / "algo-1" / "input" / "data" / "train").resolve() == shared.resolve()
    # the store changes between jobs: one object rewritten, one removed
    client = store.client()
    client.put_object(Bucket=BUCKET, Key="fsx-case/labels.json", Body=b'["only"]')
    client.delete_object(Bucket=BUCKET, Key="fsx-case/tokenizer.json")
    third = runner.run(probe_job(store, "FSx", probe_dir, uri=uri), CPU)
    io = s3_inputs.job_io(third)
    assert io["objects_from_store"] == 1 and io["bytes_from_store"] == len(b'["only"]')
    assert "tokenizer.json" not in seen(third)["sizes"]
    assert seen(third)["digests"]["labels.json"] == hashlib.sha256(b'["only"]').hexdigest()


def test_an_object_gone_after_presenting_fails_the_job_naming_it(data, runner, probe_dir):
    store, shards = data
    uri = f"s3://{BUCKET}/vanishing/"
    store.upload_dir(shards / "train", uri)
    job = probe_job(store, "FastFile", probe_dir, uri=uri)
    prepared = runner.prepare(job, CPU)
    gone = sorted(o.key for o in store.list(uri))[0]
    store.client().delete_object(Bucket=BUCKET, Key=gone)
    result = LocalJob(job, CPU, prepared).wait()
    assert result.status == "Failed"
    log = "\n".join(result.log_tail)
    assert f"s3://{BUCKET}/{gone}" in log and "no longer has it" in log


@pytest.mark.slow
def test_the_training_script_runs_unchanged_on_fastfile(data, runner):
    """train.py reads labels, tokenizer (from Rust) and the first shard; the rest is never fetched."""
    store, _ = data
    channels = {s: f"s3://{BUCKET}/shards/{s}/" for s in ("train", "validation")}
    job = Job(
        "fastfile-train",
        {**TINY, "subset": 400, "eval_subset": 100, "max_steps": 4},
        channels,
        input_mode="FastFile",
        s3_endpoint=store.endpoint,
    )
    result = runner.run(job, CPU)
    assert result.status == "Completed" and result.metrics["val_accuracy"] >= 0
    io = s3_inputs.job_io(result)
    assert io["bytes_before_start"] == 0 and 0 < io["bytes_from_store"] < io["bytes_in_channels"]
    assert (result.model_dir / "tokenizer.json").read_bytes() == store.client().get_object(
        Bucket=BUCKET, Key="shards/train/tokenizer.json"
    )["Body"].read()


def test_fastfile_job_stays_on_loopback_under_the_network_guard(data, runner, probe_dir, tmp_path):
    """The read-through loads before any other sitecustomize and still runs it (here: the network guard)."""
    from test_network import GUARD

    store, _ = data
    site = tmp_path / "guard"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network.log"
    job = probe_job(store, "FastFile", probe_dir, environment={"PYTHONPATH": str(site), "NETWORK_GUARD_LOG": str(log)})
    job.hyperparameters["probe_network"] = "1"
    saw = seen(runner.run(job, CPU))
    assert "network guard" in saw["guard"]  # the guard ran in the job...
    attempts = [json.loads(line)["host"] for line in log.read_text().splitlines()]
    assert attempts == ["example.invalid"]  # ...and saw nothing but the probe's own lookup
    assert saw["digests"]  # while every file came through the loopback read-through


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "uri, match",
    [
        ("s3://no-such-bucket/x/", "bucket 'no-such-bucket' does not exist"),
        (f"s3://{BUCKET}/shards/tarin/", r"no objects under s3://modes-data/shards/tarin/.*shards/train/"),
        (f"s3://{BUCKET}/shards/train/missing.csv", "no object s3://modes-data/shards/train/missing.csv"),
    ],
)
def test_missing_bucket_prefix_or_object_is_named_before_anything_is_written(data, runner, probe_dir, uri, match):
    store, _ = data
    with pytest.raises(ChannelError, match=match):
        runner.prepare(probe_job(store, "File", probe_dir, uri=uri), CPU)
    assert not runner.runs_dir.exists()


def test_an_empty_channel_is_refused(data, runner, probe_dir):
    store, _ = data
    store.client().put_object(Bucket=BUCKET, Key="empty/zero.csv", Body=b"")
    with pytest.raises(ChannelError, match="only empty objects"):
        runner.prepare(probe_job(store, "FastFile", probe_dir, uri=f"s3://{BUCKET}/empty/"), CPU)


def test_one_object_can_be_a_channel_but_not_an_fsx_one(data, runner, probe_dir):
    store, shards = data
    result = runner.run(probe_job(store, "FastFile", probe_dir, uri=f"s3://{BUCKET}/shards/train/labels.json"), CPU)
    assert seen(result)["digests"] == {"labels.json": sha(shards / "train" / "labels.json")}
    with pytest.raises(ChannelError, match="an FSx channel is a directory"):
        runner.prepare(probe_job(store, "FSx", probe_dir, uri=f"s3://{BUCKET}/shards/train/labels.json"), CPU)


def test_unreachable_or_unset_endpoint_is_refused(data, runner, probe_dir):
    store, _ = data
    dead = f"http://127.0.0.1:{ports.free_ports(1)[0]}"
    with pytest.raises(ChannelError, match=f"cannot reach the object store at {dead}"):
        runner.prepare(
            Job(
                "x",
                {},
                {"train": f"s3://{BUCKET}/shards/train/"},
                s3_endpoint=dead,
                entry_point="probe.py",
                source_dir=probe_dir,
            ),
            CPU,
        )
    with pytest.raises(ChannelError, match="Job.s3_endpoint is not set"):
        runner.prepare(
            Job("x", {}, {"train": f"s3://{BUCKET}/shards/train/"}, entry_point="probe.py", source_dir=probe_dir), CPU
        )
    with pytest.raises(ChannelError, match="not a local object store endpoint"):
        runner.prepare(
            Job(
                "x",
                {},
                {"train": f"s3://{BUCKET}/shards/train/"},
                s3_endpoint="https://s3.amazonaws.com",
                entry_point="probe.py",
                source_dir=probe_dir,
            ),
            CPU,
        )
    assert not runner.runs_dir.exists()


def test_modes_other_than_the_three_and_local_directories_in_lazy_modes_are_refused(data, runner, probe_dir):
    store, shards = data
    with pytest.raises(JobCheckError, match="Pipe mode is legacy"):  # the rule table's, before the store is asked
        runner.prepare(probe_job(store, "Pipe", probe_dir), CPU)
    with pytest.raises(JobCheckError, match="needs an s3:// channel"):
        runner.prepare(
            Job(
                "x",
                {},
                {"train": shards / "train"},
                input_mode="FastFile",
                entry_point="probe.py",
                source_dir=probe_dir,
            ),
            CPU,
        )


# ---------------------------------------------------------------------------------------------- SageMaker
def _transitions(*phases: tuple[str, int, str]) -> list[dict]:
    t = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone.utc)
    out = []
    for status, seconds, message in phases:
        out.append(
            {"Status": status, "StartTime": t, "EndTime": t + dt.timedelta(seconds=seconds), "StatusMessage": message}
        )
        t += dt.timedelta(seconds=seconds)
    return out


# DescribeTrainingJob responses in the service's shape (300 GB in File mode, then the same job on FSx)
FILE_JOB = {
    "TrainingJobName": "seg-file",
    "TrainingJobStatus": "Completed",
    "BillableTimeInSeconds": 9300,
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "InputMode": "File",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/seg/train/"}},
        }
    ],
    "SecondaryStatusTransitions": _transitions(
        ("Starting", 95, "Preparing the instances for training"),
        ("Downloading", 3540, "Downloading input data"),
        ("Training", 5580, "Training image download completed. Training in progress."),
        ("Uploading", 60, "Uploading generated training model"),
        ("Completed", 0, "Training job completed"),
    ),
}
FSX_JOB = {
    "TrainingJobName": "seg-fsx",
    "TrainingJobStatus": "Completed",
    "BillableTimeInSeconds": 5760,
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": "fs-0123456789abcdef0",
                    "FileSystemType": "FSxLustre",
                    "DirectoryPath": "/abcdef12/seg/train",
                    "FileSystemAccessMode": "ro",
                }
            },
        }
    ],
    "SecondaryStatusTransitions": _transitions(
        ("Starting", 110, "Preparing the instances for training"),
        ("Downloading", 12, "Downloading input data"),
        ("Training", 5580, "Training in progress."),
        ("Uploading", 58, "Uploading generated training model"),
        ("Completed", 0, "Training job completed"),
    ),
}


def test_recorded_responses_have_the_service_shape():
    import botocore.session

    shape = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .operation_model("DescribeTrainingJob")
        .output_shape
    )
    transition = shape.members["SecondaryStatusTransitions"].member
    for response in (FILE_JOB, FSX_JOB):
        assert set(response) <= set(shape.members)
        for t in response["SecondaryStatusTransitions"]:
            assert set(t) <= set(transition.members) and t["Status"] in transition.members["Status"].enum


def test_startup_cost_reads_the_secondary_status_transitions():
    rows = mode_comparison.startup_cost(FILE_JOB)
    assert [r["phase"] for r in rows] == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert rows[1]["seconds"] == 3540 and rows[1]["share"] == pytest.approx(3540 / 9275)
    file_share, fsx_share = mode_comparison.download_share(FILE_JOB), mode_comparison.download_share(FSX_JOB)
    assert file_share["downloading_s"] == 3540 and file_share["training_s"] == 5580
    assert file_share["download_share"] == pytest.approx(3540 / 9120)
    assert fsx_share["downloading_s"] == 12 and fsx_share["input_mode"] == "train=FSx"
    assert file_share["input_mode"] == "train=File"
    running = {
        "SecondaryStatusTransitions": [
            {"Status": "Downloading", "StartTime": FILE_JOB["SecondaryStatusTransitions"][1]["StartTime"]}
        ]
    }
    assert math.isnan(mode_comparison.startup_cost(running)[0]["seconds"])  # still running: no end time yet


FSX = {
    "file_system_id": "fs-0123456789abcdef0",
    "mount_name": "abcdef12",
    "subnets": ["subnet-0a1b2c3d"],
    "security_group_ids": ["sg-0a1b2c3d"],
}


def test_real_channel_definitions_per_mode_in_the_dry_run(small_catalog):

    base = Job("lab05", {"epochs": 1})
    data = {"train": "s3://my-bucket/lab05/shards/train/", "validation": "s3://my-bucket/lab05/shards/validation/"}
    jobs = sagemaker_jobs_per_mode(base, data, {**FSX, "import_path": "s3://my-bucket"})
    requests = {m: on_sagemaker(j, resolve("ml.g5.2xlarge"), echo=False).request for m, j in jobs.items()}
    rows = {m: mode_comparison.channel_definitions(r) for m, r in requests.items()}
    assert {r["InputMode"] for r in rows["File"]} == {"File"}
    assert [r["InputMode"] for r in rows["FastFile"]] == ["FastFile", "FastFile"]  # explicit on every channel
    assert rows["FastFile"][0]["source"] == data["train"]
    fsx_sources = [
        c["DataSource"]["FileSystemDataSource"]
        for c in requests["FSx"]["InputDataConfig"]
        if "FileSystemDataSource" in c["DataSource"]
    ]
    assert [s["DirectoryPath"] for s in fsx_sources] == [
        "/abcdef12/lab05/shards/train",
        "/abcdef12/lab05/shards/validation",
    ]
    assert all(s["FileSystemType"] == "FSxLustre" and s["FileSystemAccessMode"] == "ro" for s in fsx_sources)
    assert requests["FSx"]["VpcConfig"] == {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}
    assert "VpcConfig" not in requests["FastFile"]


def _channel_sources(request: dict) -> dict[str, str]:
    out = {}
    for c in request["InputDataConfig"]:
        s3, fs = c["DataSource"].get("S3DataSource"), c["DataSource"].get("FileSystemDataSource")
        out[c["ChannelName"]] = s3["S3Uri"] if s3 else fs["DirectoryPath"]
    return out


def test_the_fsx_job_mounts_where_the_file_system_shows_what_the_file_and_fastfile_jobs_read(small_catalog):
    """Lab 05's three jobs on local data, as the lab builds them: File and FastFile read the prefix the data is
    uploaded to; the FSx job mounts /<mount name>/<that prefix's key>, which a file system linked to the bucket
    (infra/workshop-account.yaml: ImportPath s3://<bucket>) shows. The lab once mounted a fixed 'lab05/shards' that
    nothing wrote."""
    data = {split: str(small_catalog / split) for split in ("train", "validation")}
    jobs = sagemaker_jobs_per_mode(Job("lab05", {"epochs": 1}), data, FSX)
    dry = {m: on_sagemaker(j, resolve("ml.g6.xlarge"), echo=False) for m, j in jobs.items()}
    sources = {m: _channel_sources(d.request) for m, d in dry.items()}
    bucket = sources["File"]["train"].removeprefix("s3://").split("/")[0]
    for split in data:
        uploaded = sources["File"][split]
        assert uploaded == sources["FastFile"][split] and split in uploaded and uploaded.endswith("/")
        key = uploaded.removeprefix(f"s3://{bucket}/").rstrip("/")
        assert sources["FSx"][split] == f"/abcdef12/{key}", "the FSx directory is the uploaded prefix, under the mount"
        assert "/inputs/" in key  # the attendee's own prefix, as the File job's upload
    fsx_uploads = [prefix for prefix, _, _ in dry["FSx"].uploads]  # the FSx job uploads what it mounts, if not there
    assert {sources["File"][split] for split in data} <= {u.rstrip("/") + "/" for u in fsx_uploads}


def test_an_fsx_channel_outside_the_file_system_s_link_is_refused_before_anything_is_uploaded(small_catalog):
    data = {"train": "s3://other-bucket/shards/train/"}
    linked = {**FSX, "import_path": "s3://workshop-bucket"}
    with pytest.raises(findings.FSxConfigError, match="not under s3://workshop-bucket.*never show"):
        jobs.preflight(sagemaker_jobs_per_mode(Job("lab05"), data, linked)["FSx"], resolve("ml.g6.xlarge"))
    local = {"train": str(small_catalog / "train")}  # uploaded to the workshop bucket, not to other-bucket
    fsx_job = sagemaker_jobs_per_mode(Job("lab05"), local, {**FSX, "import_path": "s3://other"})
    with pytest.raises(findings.FSxConfigError, match="is not under s3://other"):
        on_sagemaker(fsx_job["FSx"], resolve("ml.g6.xlarge"), echo=False)
    with pytest.raises(findings.FSxConfigError, match="neither an s3:// prefix nor a local directory"):
        jobs.preflight(
            sagemaker_jobs_per_mode(Job("lab05"), {"train": "lab05/shards"}, FSX)["FSx"],
            resolve("ml.g6.xlarge"),
        )


def test_fsx_preflight_wants_networking_and_a_mount_name():

    no_network = {k: v for k, v in FSX.items() if k not in ("subnets", "security_group_ids")}
    job = sagemaker_jobs_per_mode(Job("lab05"), {"train": "s3://b/t/"}, no_network)["FSx"]
    with pytest.raises(findings.FSxConfigError, match="988 and 1018-1023"):
        jobs.preflight(job, resolve("ml.g5.2xlarge"))
    with pytest.raises(findings.FSxConfigError, match="988 and 1018-1023"):
        fsx_preflight(job)
    fsx_preflight(sagemaker_jobs_per_mode(Job("lab05"), {"train": "s3://b/t/"}, FSX)["FSx"])
    with pytest.raises(findings.FSxConfigError, match="mount name '/fsx'"):
        fsx_preflight(
            sagemaker_jobs_per_mode(Job("lab05"), {"train": "s3://b/t/"}, {**FSX, "mount_name": "/fsx"})["FSx"]
        )


def test_the_fsx_job_is_told_its_vpc_needs_s3_for_its_code_too():
    """In the file system's VPC, S3 is reached only through an endpoint or NAT, and the job's code channels (the
    source and the SDK's drivers) come from S3: an FSx job without that route never starts its script."""

    job = sagemaker_jobs_per_mode(Job("lab05"), {"train": "s3://b/t/"}, FSX)["FSx"]
    notes = jobs.preflight(job, resolve("ml.g5.2xlarge")).notes
    s3 = next(n for n in notes if "S3 VPC endpoint or a NAT gateway" in n)
    assert "code channels" in s3 and "sm_drivers" in s3
    assert any("PyPI" in n and "NAT gateway" in n for n in notes)  # pip: NAT, an S3 endpoint alone does not do
    assert "sm_drivers" in mode_comparison.sagemaker_jobs_per_mode.__doc__
