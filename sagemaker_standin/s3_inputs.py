"""SageMaker's three input modes for ``s3://`` channels on the local runner, against the loopback object store.

Each presents the channel at ``input/data/<channel>``, where the script reads plain files: **File** downloads every
object before the script starts (every job, every host); **FastFile** presents every object at once and streams its
bytes as they are read (:mod:`sagemaker_standin.fastfile`); **FSx** mounts a persistent directory the first job warms
and later jobs reuse. Every channel is checked (loopback endpoint, bucket, data) before anything is written. What
each job moved goes to ``<run_dir>/inputs.json``; :func:`job_io` turns it into the lab's figures.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from sagemaker_standin import streamed_open
from sagemaker_standin.errors import StandInError
from sagemaker_standin.fastfile import FastFileServer
from sagemaker_standin.store_client import (
    ObjectStoreError,
    S3Object,
    S3Uri,
    Transfer,
    describe_failure,
    fetch_object,
    list_objects,
    reachable,
    require_loopback,
    s3_client,
)

# File mode's copy: two objects at a time. SageMaker's guide ("Best practices for choosing data sources") puts a
# 50 GB data set in 100 MB shards at about 5 minutes, 170 MB/s: two S3 connections' worth (s3_profile.AWS_S3).
# FSx's first read (Lustre importing from its linked bucket) copies as many as the file servers take; 8 here.
FILE_MODE_CONNECTIONS = 2
FILE_SYSTEMS = {"FSx"}  # the modes whose channel is a directory of a file system, not S3 objects
FSX_IMPORT_CONNECTIONS = 8


class InputModeError(StandInError, ValueError):
    """An s3:// channel that cannot be presented: store unreachable, bucket/prefix/object missing, channel empty."""


# ---------------------------------------------------------------------------------------------- checks
@dataclass
class ChannelSource:
    """One s3:// channel, checked: where it lives and what it holds."""

    name: str
    mode: str
    uri: S3Uri
    objects: list[S3Object]
    single: bool = False  # the URI named one object, not a prefix

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.objects)

    def relative(self, obj: S3Object) -> str:
        return obj.key.rsplit("/", 1)[-1] if self.single else obj.relative_to(self.uri.prefix)

    def files(self) -> list[tuple[str, S3Object]]:
        """(path in the channel's directory, object) for every object, in listing order."""
        return [(self.relative(o), o) for o in self.objects]


def s3_channels(job) -> dict[str, str]:
    return {name: str(src) for name, src in job.channels.items() if str(src).startswith("s3://")}


def check_channels(job) -> tuple[str | None, dict[str, ChannelSource]]:
    """(endpoint, checked channels) for the job's s3:// channels; raises :class:`InputModeError` naming the fix."""
    wanted = s3_channels(job)
    if not wanted:
        return None, {}
    names = ", ".join(repr(n) for n in wanted)
    if not getattr(job, "s3_endpoint", None):
        raise InputModeError(
            f"channel(s) {names} read s3:// URIs, but Job.s3_endpoint is not set. Locally they come "
            f"from the object store sagemaker_standin.objectstore runs: "
            f"`with ObjectStore(root) as store:` "
            f"and Job(..., s3_endpoint=store.endpoint). On SageMaker (an ml.* target) they are S3."
        )
    try:
        endpoint = require_loopback(job.s3_endpoint)
    except ObjectStoreError as err:
        raise InputModeError(str(err)) from None
    why = reachable(endpoint)
    if why:
        raise InputModeError(
            f"cannot reach the object store at {endpoint} ({why}) for channel(s) {names}. Is it "
            f"running? Start it with `with ObjectStore(root) as store:` and pass store.endpoint; a "
            f"store from an earlier kernel stops with that kernel."
        )
    try:
        return endpoint, _check_each(job, wanted, endpoint)
    except InputModeError:
        raise
    except Exception as err:  # noqa: BLE001 - the store answered its port but not the request: it is failing
        raise InputModeError(
            f"cannot read channel(s) {names} from the object store at {endpoint}: "
            f"{describe_failure(err, 'its listing', endpoint)}. Restart it (a new `ObjectStore`) and upload the "
            f"data again."
        ) from err


def _check_each(job, wanted: dict[str, str], endpoint: str) -> dict[str, ChannelSource]:
    client = s3_client(endpoint)
    buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    checked = {}
    for name, uri in wanted.items():
        mode = job.mode_of(name)
        if mode not in STAND_INS:
            raise InputModeError(f"channel {name!r}: no input mode {mode!r}; the modes are {', '.join(STAND_INS)}.")
        try:
            where = S3Uri.parse(uri, directory=False)
        except ValueError as err:
            raise InputModeError(f"channel {name!r}: {err}") from None
        if where.bucket not in buckets:
            have = ", ".join(sorted(buckets)) or "none"
            raise InputModeError(
                f"channel {name!r}: bucket {where.bucket!r} does not exist on the store at "
                f"{endpoint} (its buckets: {have}). Create it and upload the data first: "
                f"store.create_bucket({where.bucket!r}); store.upload_dir(local_dir, {uri!r})."
            )
        checked[name] = _locate(client, name, mode, where)
    return checked


def _locate(client, name: str, mode: str, where: S3Uri) -> ChannelSource:
    """A URI ending in ``/`` is a prefix; one without names an object if such a key exists, else a prefix."""
    if where.prefix and not where.prefix.endswith("/"):
        exact = [o for o in list_objects(client, where) if o.key == where.prefix]
        if exact and mode in FILE_SYSTEMS:
            raise InputModeError(
                f"channel {name!r}: an FSx channel is a directory of the file system; give the "
                f"prefix that holds {where} (s3://{where.bucket}/{where.prefix.rpartition('/')[0]}/)."
            )
        if exact:
            return ChannelSource(name, mode, where, exact, single=True)
        where = S3Uri(where.bucket, where.prefix + "/")
    objects = list_objects(client, where)
    if not objects:
        parent = where.prefix.rstrip("/").rpartition("/")[0]
        parent = parent + "/" if parent else ""
        listing = client.list_objects_v2(Bucket=where.bucket, Prefix=parent, Delimiter="/", MaxKeys=50)
        near = [p["Prefix"] for p in listing.get("CommonPrefixes", [])] + [
            o["Key"] for o in listing.get("Contents", [])
        ]
        shown = ", ".join(f"s3://{where.bucket}/{k}" for k in near[:8]) or "nothing"
        raise InputModeError(
            f"channel {name!r}: no object {str(where).rstrip('/')} and no objects under {where} "
            f"(missing, or not uploaded yet). s3://{where.bucket}/{parent} holds: {shown}."
        )
    if not any(o.size for o in objects):
        raise InputModeError(
            f"channel {name!r}: {where} holds only empty objects ({len(objects)}); nothing to train on."
        )
    return ChannelSource(name, mode, where, objects)


# ---------------------------------------------------------------------------------------------- File and FSx
def download(
    client,
    source: ChannelSource,
    dest: Path,
    scratch: Path,
    workers: int,
    keep: dict[str, tuple[int, str]] | None = None,
) -> Transfer:
    """Every object of ``source`` into ``dest`` in parallel, skipping those ``keep`` (key -> (size, etag)) already
    has on disk; what File mode does before the script starts, and what warms an FSx directory."""
    keep = keep or {}

    def fresh(o: S3Object) -> bool:
        p = dest / source.relative(o)
        return keep.get(o.key) == (o.size, o.etag) and p.is_file() and p.stat().st_size == o.size

    todo = [o for o in source.objects if not fresh(o)]
    endpoint = client.meta.endpoint_url
    t0 = time.perf_counter()

    def one(o: S3Object) -> int:
        try:
            return fetch_object(
                client, source.uri.bucket, o.key, dest / source.relative(o), o.modified, scratch, o.size
            )
        except Exception as err:  # noqa: BLE001 - said in the job's terms
            why = describe_failure(err, f"s3://{source.uri.bucket}/{o.key}", endpoint)
            raise InputModeError(f"channel {source.name!r}: {why}") from err

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        moved = sum(pool.map(one, todo))
    return Transfer(len(todo), moved, time.perf_counter() - t0)


def persistent_dir(fsx_root: Path, source: ChannelSource) -> Path:
    """Where the persistent file system keeps a channel: ``<fsx_root>/<bucket>/<prefix>``."""
    return Path(fsx_root) / source.uri.bucket / source.uri.prefix


def warm_fsx(client, source: ChannelSource, fsx_root: Path) -> Transfer:
    """Bring the persistent directory in line with the store: fetch new or changed objects, drop removed ones.
    A lock keeps two jobs (or hosts) from warming the same directory at once."""
    root = persistent_dir(fsx_root, source)
    meta = Path(fsx_root) / ".manifests" / source.uri.bucket / (source.uri.prefix.strip("/") or "_root")
    meta.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    with open(meta / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest_path = meta / "objects.json"
        known = (
            {k: tuple(v) for k, v in json.loads(manifest_path.read_text()).items()} if manifest_path.is_file() else {}
        )
        moved = download(client, source, root, meta / "scratch", workers=FSX_IMPORT_CONNECTIONS, keep=known)
        wanted = {source.relative(o) for o in source.objects}
        for p in sorted(root.rglob("*"), reverse=True):  # objects removed from the store leave the file system
            if p.is_file() and p.relative_to(root).as_posix() not in wanted:
                p.unlink()
        manifest_path.write_text(json.dumps({o.key: [o.size, o.etag] for o in source.objects}))
    return moved


# ---------------------------------------------------------------------------------------------- one job
@dataclass
class Staged:
    """What presenting one channel on one host moved before the script started."""

    channel: str
    host: str
    mode: str
    uri: str
    objects: int
    bytes: int
    seconds: float
    fetched_objects: int
    fetched_bytes: int


class JobInputs:
    """The s3:// channels of one local job, owned by it: checked on creation (before anything is written), staged
    per host, and (FastFile) served while the job runs. :meth:`close` ends it and writes ``inputs.json`` into the
    job's run directory."""

    def __init__(self, job, fsx_root: str | os.PathLike, run_dir: str | os.PathLike):
        self.endpoint, self.sources = check_channels(job)
        self.fsx_root, self.run_dir = Path(fsx_root), Path(run_dir)
        self.staged: list[Staged] = []
        self.server: FastFileServer | None = None
        self.lazy_dirs: dict[str, list[str]] = {}  # host -> its FastFile channel directories
        self.client = s3_client(self.endpoint) if self.endpoint else None  # set exactly when there are sources

    def serves(self, channel: str) -> bool:
        return channel in self.sources

    def stage(self, channel: str, dest: Path, host: str) -> None:
        """Present ``channel`` at ``dest`` (``<host>/input/data/<channel>``) in its mode (its :data:`STAND_INS`)."""
        source = self.sources[channel]
        moved = STAND_INS[source.mode](self, source, dest, host)
        self.staged.append(
            Staged(
                channel,
                host,
                source.mode,
                str(source.uri),
                len(source.objects),
                source.bytes,
                round(moved.seconds, 4),
                moved.objects,
                moved.bytes,
            )
        )

    def environment(self, env: dict[str, str], host: str) -> dict[str, str]:
        """What a host's processes need for the FastFile read-through: the shim first on PYTHONPATH, the server."""
        dirs = self.lazy_dirs.get(host)
        if not dirs or self.server is None:
            return {}
        shim = self.run_dir / "fastfile-shim"
        shim.mkdir(exist_ok=True)
        shutil.copy(streamed_open.__file__, shim / "sitecustomize.py")
        path = os.pathsep.join([str(shim), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        return {
            "PYTHONPATH": path,
            streamed_open.SERVER_ENV: self.server.address,
            streamed_open.DIRS_ENV: os.pathsep.join(dirs),
        }

    def record(self) -> dict:
        during = self.server.stats() if self.server else {}
        return {
            "endpoint": self.endpoint,
            "fsx_root": str(self.fsx_root),
            "channels": {
                n: {"mode": s.mode, "uri": str(s.uri), "objects": len(s.objects), "bytes": s.bytes}
                for n, s in self.sources.items()
            },
            "staged": [asdict(s) for s in self.staged],
            "during_job": during,
            "fetches": self.server.fetches if self.server else [],
            "read_requests": self.server.requests if self.server else 0,
            "blocked_s": self.server.blocked_s if self.server else 0.0,
        }

    def errors(self) -> list[str]:
        """Why each object that failed to arrive during the job failed (the job's failure reason names them)."""
        return self.server.errors() if self.server is not None else []

    def write(self) -> None:
        if self.sources and self.run_dir.is_dir():
            (self.run_dir / "inputs.json").write_text(json.dumps(self.record(), indent=1))

    def close(self) -> None:
        """The job ended: stop serving its channels and write what they moved to ``inputs.json``. Idempotent."""
        if self.server is not None:
            self.server.close()
        self.write()


def _copy(inputs: JobInputs, source: ChannelSource, dest: Path, host: str) -> Transfer:
    """File: every object downloaded before the script starts."""
    scratch = dest.parent.parent / "staging" / source.name
    return download(inputs.client, source, dest, scratch, workers=FILE_MODE_CONNECTIONS)


def _present_lazily(inputs: JobInputs, source: ChannelSource, dest: Path, host: str) -> Transfer:
    """FastFile: every object presented at once, its bytes streamed as they are read (the host's read-through)."""
    if inputs.server is None:
        assert inputs.endpoint is not None  # check_channels found the store for every source
        inputs.server = FastFileServer(inputs.endpoint)
    scratch = dest.parent.parent / "staging" / source.name
    moved = inputs.server.present(source.name, source.uri.bucket, source.files(), dest, scratch)
    dirs = inputs.lazy_dirs.setdefault(host, [])
    dirs += [d for d in dict.fromkeys((str(dest.absolute()), str(dest.resolve()))) if d not in dirs]
    return moved


def _mount_persistent(inputs: JobInputs, source: ChannelSource, dest: Path, host: str) -> Transfer:
    """FSx: the shared directory, warmed from the store and mounted (linked) where the channel goes."""
    moved = warm_fsx(inputs.client, source, inputs.fsx_root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.symlink_to(persistent_dir(inputs.fsx_root, source).resolve(), target_is_directory=True)
    return moved


# each input mode's stand-in on this machine (helpers.input_mode.MODES names them)
STAND_INS: dict[str, Callable[[JobInputs, ChannelSource, Path, str], Transfer]] = {
    "File": _copy,
    "FastFile": _present_lazily,
    "FSx": _mount_persistent,
}


# ---------------------------------------------------------------------------------------------- what a job moved
def job_io(result) -> dict:
    """A finished local job's input figures (first host): staging, time to first step and in total, bytes moved.

    ``to_first_step_s`` and ``total_s`` count from the job's submission, staging included, as SageMaker's clock
    does (a File-mode job is billed while it downloads). ``input_wait_s``: how long the job waited for its input,
    staging plus the time its reads blocked on FastFile fetches. ``read_ahead_bytes``: what FastFile fetched ahead
    of the reads.
    """
    path = Path(result.run_dir) / "inputs.json"
    rec = json.loads(path.read_text()) if path.is_file() else {"staged": [], "during_job": {}, "channels": {}}
    host = "algo-1"
    staged = [s for s in rec["staged"] if s["host"] == host]
    staging = sum(s["seconds"] for s in staged)
    before = sum(s["fetched_bytes"] for s in staged)
    during = sum(c["bytes"] for c in rec["during_job"].values())
    ahead = sum(c["read_ahead_bytes"] for c in rec["during_job"].values())
    fetch_s = sum(s["seconds"] for s in staged if s["fetched_objects"]) + sum(
        c["fetch_seconds"] for c in rec["during_job"].values()
    )
    t = result.timings
    first = t.get("launch_to_first_step")
    modes = sorted({c["mode"] for c in rec["channels"].values()})
    return {
        "mode": "/".join(modes) or "local",
        "staging_s": staging,
        "input_wait_s": staging + rec.get("blocked_s", 0.0),
        "to_first_step_s": staging + first if first is not None else float("nan"),
        "total_s": staging + t.get("total", 0.0),
        "bytes_in_channels": sum(c["bytes"] for c in rec["channels"].values()),
        "bytes_from_store": before + during,
        "bytes_before_start": before,
        "bytes_during_job": during,
        "read_ahead_bytes": ahead,
        "objects_from_store": sum(s["fetched_objects"] for s in staged)
        + sum(c["objects"] for c in rec["during_job"].values()),
        "fetch_mb_per_s": (before + during) / 1e6 / fetch_s if fetch_s else float("nan"),
    }


def channel_listing(result, channel: str = "train", host: str = "algo-1") -> list[dict]:
    """A finished job's channel as the script saw it: each file's size, and how much of it is really on disk (a
    FastFile object never opened is still an empty placeholder)."""
    root = Path(result.run_dir) / host / "input" / "data" / channel
    rows = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            rows.append(
                {
                    "file": p.relative_to(root).as_posix(),
                    "bytes": st.st_size,
                    "on_disk": min(st.st_size, st.st_blocks * 512),
                }
            )
    return rows
