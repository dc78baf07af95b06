"""SageMaker's three input modes for ``s3://`` channels on the local runner, against the loopback object store.

Each mode presents the channel at ``input/data/<channel>`` as SageMaker does, and the training script reads plain
files in all three:

* **File** downloads every object of the channel (in parallel) before the script starts: the job waits for the
  whole data set, every job, on every host.
* **FastFile** presents every object at once, at its real size, as a placeholder, and fetches an object's bytes the
  first time the job opens it (:mod:`helpers.local.fastfile_shim` blocks the open until then), with one file of
  sequential read-ahead. The script starts at once and reads only what it opens. Locally an object is fetched whole
  on its first open; SageMaker's FastFile streams byte ranges as they are read.
* **FSx** mounts a persistent directory (``<fsx_root>/<bucket>/<prefix>``) that outlives jobs, as an FSx for Lustre
  file system linked to the bucket does: the first job warms it from the store, later jobs find it warm and start
  at once (objects changed in the store are fetched again; removed ones disappear).

Every channel is checked before anything is written or launched: the endpoint (loopback only) answers, the bucket
exists, the prefix (or object) holds data. What each job moved is written to ``<run_dir>/inputs.json``;
:func:`job_io` turns it and the job's timings into the figures the lab compares.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import socketserver
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from helpers import checks
from helpers.errors import JobSetupError, WorkshopError
from helpers.local import fastfile_shim, objectstore
from helpers.local.objectstore import S3Object, S3Uri
from helpers.targets import Target

MODES = ("File", "FastFile", "FSx")
READ_AHEAD = 1  # FastFile: files fetched ahead of a sequential reader
# File mode's copy: two objects at a time. SageMaker's guide ("Best practices for choosing data sources") puts a
# 50 GB data set in 100 MB shards at about 5 minutes, 170 MB/s: two S3 connections' worth (s3_profile.AWS_S3).
# FSx's first read (Lustre importing from its linked bucket) copies as many as the file servers take; 8 here.
FILE_MODE_CONNECTIONS = 2
FSX_IMPORT_CONNECTIONS = 8
_CHUNK = 1 << 20


class InputModeError(JobSetupError):
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
            f"from the object store helpers.local.objectstore runs: "
            f"`with ObjectStore(root) as store:` "
            f"and Job(..., s3_endpoint=store.endpoint). On SageMaker (an ml.* target) they are S3."
        )
    try:
        endpoint = objectstore.require_loopback(job.s3_endpoint)
    except objectstore.ObjectStoreError as err:
        raise InputModeError(str(err)) from None
    why = objectstore.reachable(endpoint)
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
            f"{_describe_failure(err, 'its listing', endpoint)}. Restart it (a new `ObjectStore`) and upload the "
            f"data again."
        ) from err


def _check_each(job, wanted: dict[str, str], endpoint: str) -> dict[str, ChannelSource]:
    client = objectstore.s3_client(endpoint)
    buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    checked = {}
    for name, uri in wanted.items():
        mode = job.mode_of(name)
        if mode not in MODES:
            hint = " Pipe mode is legacy: FastFile streams the same way with plain files." if mode == "Pipe" else ""
            raise InputModeError(f"channel {name!r}: input mode {mode!r} is not one of {', '.join(MODES)}.{hint}")
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
        exact = [o for o in objectstore.list_objects(client, where) if o.key == where.prefix]
        if exact and mode == "FSx":
            raise InputModeError(
                f"channel {name!r}: an FSx channel is a directory of the file system; give the "
                f"prefix that holds {where} (s3://{where.bucket}/{where.prefix.rpartition('/')[0]}/)."
            )
        if exact:
            return ChannelSource(name, mode, where, exact, single=True)
        where = S3Uri(where.bucket, where.prefix + "/")
    objects = objectstore.list_objects(client, where)
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


# ---------------------------------------------------------------------------------------------- transfers
def _fetch(client, bucket: str, key: str, dest: Path, modified: float, scratch: Path, size: int) -> int:
    """Stream one object into ``dest`` (written beside, then renamed into place: a reader never sees half).

    The object must arrive whole: ``size`` bytes, as listed when the channel was presented. A connection that ends
    early (the store died mid-object) raises, and ``dest`` keeps what it had; nothing short is ever renamed in."""
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = scratch / f"{uuid.uuid4().hex}.part"
    got = 0
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        with open(tmp, "wb") as f:
            for chunk in body.iter_chunks(_CHUNK):
                f.write(chunk)
                got += len(chunk)
        if got != size:
            raise ShortRead(f"received {got} of its {size} bytes")
        os.utime(tmp, (modified, modified))
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return got


class ShortRead(WorkshopError, OSError):
    """An object arrived with fewer (or more) bytes than the store listed for it."""


_LOST_STORE = (
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ResponseStreamingError",
    "IncompleteReadError",
    "ProtocolError",
    "ConnectionError",
    "ShortRead",
)


def _describe_failure(err: BaseException, uri: str, endpoint: str) -> str:
    """Why fetching ``uri`` failed, in the job's terms. Never raises: botocore's connection errors carry no
    ``response`` (or ``None``), and an error while describing an error must not hide the first one."""
    try:
        response = getattr(err, "response", None)
        code = str(((response or {}).get("Error") or {}).get("Code", "")) if isinstance(response, dict) else ""
        if code in ("NoSuchKey", "404", "NotFound"):
            return (
                f"{uri} was listed when the channel was presented, but the store no longer has it (deleted or "
                f"renamed since)"
            )
        if code == "NoSuchBucket":
            return f"the bucket of {uri} is gone from the store"
        if type(err).__name__ in _LOST_STORE or isinstance(err, ConnectionError):
            return f"lost the object store at {endpoint} while fetching {uri} ({type(err).__name__}: {err})"
        return f"fetching {uri} failed: {type(err).__name__}: {err}"
    except Exception:  # noqa: BLE001 - the plainest description is still a description
        return f"fetching {uri} failed: {type(err).__name__}"


def download(
    client,
    source: ChannelSource,
    dest: Path,
    scratch: Path,
    workers: int,
    keep: dict[str, tuple[int, str]] | None = None,
) -> objectstore.Transfer:
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
            return _fetch(client, source.uri.bucket, o.key, dest / source.relative(o), o.modified, scratch, o.size)
        except Exception as err:  # noqa: BLE001 - said in the job's terms
            why = _describe_failure(err, f"s3://{source.uri.bucket}/{o.key}", endpoint)
            raise InputModeError(f"channel {source.name!r}: {why}") from err

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        moved = sum(pool.map(one, todo))
    return objectstore.Transfer(len(todo), moved, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------- FastFile
@dataclass
class _Lazy:
    """One presented object: a placeholder until its first open."""

    path: str
    channel: str
    bucket: str
    key: str
    size: int
    modified: float
    scratch: Path
    next: str | None = None  # the next file in listing order (read-ahead)
    state: str = "placeholder"  # placeholder | fetching | ready | failed
    error: str = ""
    done: threading.Event = field(default_factory=threading.Event)


class FastFileServer:
    """Fetches presented objects on demand for the jobs' read-through (loopback TCP, one line per request)."""

    def __init__(self, endpoint: str, read_ahead: int = READ_AHEAD):
        self.endpoint, self.read_ahead = endpoint, read_ahead
        self.client = objectstore.s3_client(endpoint)
        self.files: dict[str, _Lazy] = {}
        self.fetches: list[dict] = []  # one per object fetched: channel, key, bytes, reason, start, seconds
        self.requests = 0
        self.blocked_s = 0.0  # how long the job's opens waited for bytes, all together
        self._lock = threading.Lock()
        self._closed = False
        self._ahead = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="fastfile-read-ahead")
        self.t0 = time.perf_counter()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                path = self.rfile.readline().decode("utf-8", "surrogateescape").rstrip("\n")
                try:
                    error = server.ensure(path)
                except Exception as err:  # noqa: BLE001 - the reader gets an error, never a silent "OK"
                    error = f"the FastFile server failed on {path}: {type(err).__name__}: {err}"
                self.wfile.write(b"OK\n" if error is None else f"ERR {error}\n".encode("utf-8", "replace"))

        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        threading.Thread(target=self.tcp.serve_forever, name="fastfile-server", daemon=True).start()

    @property
    def address(self) -> str:
        host, port = self.tcp.server_address[:2]
        return f"{host}:{port}"

    def present(self, source: ChannelSource, dest: Path, scratch: Path) -> objectstore.Transfer:
        """Every object as a placeholder of its real size and time stamp: listed at once, no bytes fetched."""
        t0 = time.perf_counter()
        dest.mkdir(parents=True, exist_ok=True)
        previous = None
        for o in source.objects:
            path = dest / source.relative(o)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(o.size)  # sparse: no disk used until the bytes arrive
            os.utime(path, (o.modified, o.modified))
            lazy = _Lazy(str(path.resolve()), source.name, source.uri.bucket, o.key, o.size, o.modified, scratch)
            self.files[lazy.path] = lazy
            if previous is not None:
                previous.next = lazy.path
            previous = lazy
        return objectstore.Transfer(0, 0, time.perf_counter() - t0)

    def ensure(self, path: str, reason: str = "open") -> str | None:
        """Make ``path`` hold its bytes; None when it does (or is not a presented object), else why not.

        Only a file whose fetch completed is ever reported ready: a failed fetch, whatever failed, is an error for
        every reader that opens it, then and later."""
        lazy = self.files.get(os.path.realpath(path)) or self.files.get(path)
        if lazy is None:
            return None
        asked = time.perf_counter()
        with self._lock:
            self.requests += reason == "open"
            mine = lazy.state == "placeholder"
            if mine:
                lazy.state = "fetching"
        if mine:
            self._fill(lazy, reason)
        else:
            lazy.done.wait()
        if reason == "open":
            with self._lock:
                self.blocked_s += time.perf_counter() - asked
            if lazy.state == "ready":
                self._read_ahead(lazy)
        if lazy.state == "ready":
            return None
        return lazy.error or f"s3://{lazy.bucket}/{lazy.key} could not be fetched"

    def _fill(self, lazy: _Lazy, reason: str) -> None:
        start = time.perf_counter()
        got = 0
        try:
            got = _fetch(self.client, lazy.bucket, lazy.key, Path(lazy.path), lazy.modified, lazy.scratch, lazy.size)
            lazy.state = "ready"
        except BaseException as err:  # anything (even an interrupt) leaves the file failed, never "ready"
            lazy.error = _describe_failure(err, f"s3://{lazy.bucket}/{lazy.key}", self.endpoint)
            if not isinstance(err, Exception):
                raise
        finally:
            if lazy.state != "ready":
                lazy.state = "failed"
                lazy.error = lazy.error or f"fetching s3://{lazy.bucket}/{lazy.key} was interrupted"
            with self._lock:
                self.fetches.append(
                    {
                        "channel": lazy.channel,
                        "key": lazy.key,
                        "bytes": got,
                        "reason": reason,
                        "start": round(start - self.t0, 4),
                        "seconds": round(time.perf_counter() - start, 4),
                        "error": lazy.error,
                    }
                )
            lazy.done.set()

    def errors(self) -> list[str]:
        """Why each failed fetch failed, in order (the job's failure reason names them)."""
        with self._lock:
            return [f["error"] for f in self.fetches if f["error"]]

    def _read_ahead(self, lazy: _Lazy) -> None:
        nxt = lazy
        for _ in range(self.read_ahead):
            nxt = self.files.get(nxt.next) if nxt.next else None
            if nxt is None:
                return
            if nxt.state == "placeholder":
                self._ahead.submit(self.ensure, nxt.path, "read-ahead")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.tcp.shutdown()
        self.tcp.server_close()
        self._ahead.shutdown(wait=True, cancel_futures=True)

    def stats(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for f in self.fetches:
            s = out.setdefault(
                f["channel"], {"objects": 0, "bytes": 0, "read_ahead_bytes": 0, "fetch_seconds": 0.0, "errors": []}
            )
            s["objects"] += 1
            s["bytes"] += f["bytes"]
            s["read_ahead_bytes"] += f["bytes"] if f["reason"] == "read-ahead" else 0
            s["fetch_seconds"] += f["seconds"]
            if f["error"]:
                s["errors"].append(f["error"])
        return out


# ---------------------------------------------------------------------------------------------- FSx
def fsx_directory(fsx_root: Path, source: ChannelSource) -> Path:
    """Where the persistent file system keeps a channel: ``<fsx_root>/<bucket>/<prefix>``."""
    return Path(fsx_root) / source.uri.bucket / source.uri.prefix


def warm_fsx(client, source: ChannelSource, fsx_root: Path) -> objectstore.Transfer:
    """Bring the persistent directory in line with the store: fetch new or changed objects, drop removed ones.
    A lock keeps two jobs (or hosts) from warming the same directory at once."""
    root = fsx_directory(fsx_root, source)
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
        self._client = objectstore.s3_client(self.endpoint) if self.sources else None

    def serves(self, channel: str) -> bool:
        return channel in self.sources

    def stage(self, channel: str, dest: Path, host: str) -> None:
        """Present ``channel`` at ``dest`` (``<host>/input/data/<channel>``) in its mode."""
        source = self.sources[channel]
        scratch = dest.parent.parent / "staging" / channel
        if source.mode == "File":
            moved = download(self._client, source, dest, scratch, workers=FILE_MODE_CONNECTIONS)
        elif source.mode == "FastFile":
            if self.server is None:
                self.server = FastFileServer(self.endpoint)
            moved = self.server.present(source, dest, scratch)
            dirs = self.lazy_dirs.setdefault(host, [])
            dirs += [d for d in dict.fromkeys((str(dest.absolute()), str(dest.resolve()))) if d not in dirs]
        else:  # FSx: the shared directory, mounted (linked) where the channel goes
            moved = warm_fsx(self._client, source, self.fsx_root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(fsx_directory(self.fsx_root, source).resolve(), target_is_directory=True)
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
        shutil.copy(fastfile_shim.__file__, shim / "sitecustomize.py")
        path = os.pathsep.join([str(shim), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        return {
            "PYTHONPATH": path,
            fastfile_shim.SERVER_ENV: self.server.address,
            fastfile_shim.DIRS_ENV: os.pathsep.join(dirs),
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


# ---------------------------------------------------------------------------------------------- figures
def job_io(result) -> dict:
    """A finished local job's input figures (first host): staging, time to first step and in total, bytes moved.

    ``to_first_step_s`` and ``total_s`` count from the job's submission, staging included, as SageMaker's clock
    does (a File-mode job is billed while it downloads). ``input_wait_s``: how long the job waited for its input,
    staging plus the time its opens blocked on FastFile fetches.
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


def startup_cost(describe: dict) -> list[dict]:
    """Where a finished SageMaker job's time went, from DescribeTrainingJob's ``SecondaryStatusTransitions``:
    one row per phase (Starting, Downloading, Training, Uploading...) with its seconds and share, in order.
    In File mode "Downloading" is the input copy; FastFile and FSx jobs spend seconds there instead of minutes."""
    rows = []
    for t in describe.get("SecondaryStatusTransitions") or []:
        start, end = t.get("StartTime"), t.get("EndTime")
        if start is None:
            continue
        seconds = (end - start).total_seconds() if end is not None else float("nan")
        rows.append({"phase": t["Status"], "seconds": seconds, "message": t.get("StatusMessage", "")})
    known = sum(r["seconds"] for r in rows if r["seconds"] == r["seconds"])
    for r in rows:
        r["share"] = r["seconds"] / known if known and r["seconds"] == r["seconds"] else float("nan")
    return rows


def download_share(describe: dict) -> dict:
    """Seconds spent downloading input vs training, and what the download cost as a share of both."""
    phases: dict[str, float] = {}
    for r in startup_cost(describe):
        if r["seconds"] == r["seconds"]:
            phases[r["phase"]] = phases.get(r["phase"], 0.0) + r["seconds"]
    download_s, training_s = phases.get("Downloading", 0.0), phases.get("Training", 0.0)
    return {
        "starting_s": phases.get("Starting", 0.0),
        "downloading_s": download_s,
        "training_s": training_s,
        "download_share": download_s / (download_s + training_s) if download_s + training_s else float("nan"),
        "billable_s": describe.get("BillableTimeInSeconds"),
        "input_mode": _input_modes(describe),
    }


def _input_modes(describe: dict) -> str:
    modes = []
    for c in describe.get("InputDataConfig") or []:
        kind = "FSx" if "FileSystemDataSource" in c.get("DataSource", {}) else c.get("InputMode", "File")
        modes.append(f"{c['ChannelName']}={kind}")
    return ", ".join(modes)


# ---------------------------------------------------------------------------------------------- SageMaker
_MOUNT_NAME = re.compile(r"^[a-z0-9]{3,8}$")


def fsx_channel_path(mount_name: str, *parts: str) -> str:
    """An FSx for Lustre channel's directory path: ``/<MountName>/<path in the file system>``.

    SageMaker mounts the file system and hands the job that directory; the path must start with the file system's
    mount name (FSx console > file system > Attach; ``fsx`` for SCRATCH_1), not with ``/fsx`` out of habit.
    """
    if not _MOUNT_NAME.match(mount_name or ""):
        raise InputModeError(
            f"FSx mount name {mount_name!r} does not look like one (3-8 lower-case letters and "
            f"digits, e.g. 'abcdef12'; 'fsx' for SCRATCH_1): copy it from the FSx console "
            f"(file system > Attach) or `aws fsx describe-file-systems` (LustreConfiguration."
            f"MountName)."
        )
    return "/" + "/".join([mount_name, *(p.strip("/") for p in parts if p.strip("/"))])


def sagemaker_jobs_per_mode(base, data: dict[str, str], fsx: dict | None = None) -> dict[str, object]:
    """``base`` (a :class:`~helpers.job.Job`) once per input mode, for SageMaker.

    ``data``: channel -> S3 URI or local directory (the latter is uploaded at launch). File and FastFile name the
    mode per channel explicitly (the SDK would otherwise send File). ``fsx`` (``file_system_id``, ``mount_name``,
    ``path``, ``subnets``, ``security_group_ids``) adds the FSx job: its channels are the same names under
    ``/<mount_name>/<path>/``, and its networking puts the job in the file system's VPC. There the job reaches S3
    only through an S3 VPC endpoint or a NAT gateway, and it needs S3 for more than data: its code channels (``code``,
    the source, and ``sm_drivers``, the SDK's drivers) come from there, as do any S3 channels, and its model, output
    and checkpoints go there; pip needs NAT (or a mirror) for requirements.txt. ``sagemaker_jobs.preflight`` notes it.
    """
    names = list(data)
    jobs = {
        "File": replace(
            base,
            name=f"{base.name}-file",
            channels=dict(data),
            s3_endpoint=None,
            channel_modes={n: "File" for n in names},
        ),
        "FastFile": replace(
            base,
            name=f"{base.name}-fastfile",
            channels=dict(data),
            s3_endpoint=None,
            channel_modes={n: "FastFile" for n in names},
        ),
    }
    if fsx is not None:
        channels = {n: fsx_channel_path(fsx.get("mount_name", ""), fsx.get("path", ""), n) for n in names}
        jobs["FSx"] = replace(
            base,
            name=f"{base.name}-fsx",
            channels=channels,
            s3_endpoint=None,
            channel_modes={n: "FSx" for n in names},
            fsx={k: fsx[k] for k in ("file_system_id", "subnets", "security_group_ids", "access_mode") if fsx.get(k)},
        )
    return jobs


def fsx_preflight(job) -> None:
    """The FSx checks of ``sagemaker_jobs.preflight`` alone (file system id, subnets, security groups, directory
    paths), without choosing an image: fast enough to run in every lab, offline. Raises ``FSxConfigError``."""

    where = checks.Where(Target("fsx", "fsx", 0, 1), None, 1, "script")  # the FSx rule reads neither
    checks.check(job, where, [checks.fsx])


def channel_definitions(request: dict) -> list[dict]:
    """The input channels of a CreateTrainingJob request, one row each (the SDK's code channels left out)."""
    rows = []
    vpc = request.get("VpcConfig") or {}
    for c in request.get("InputDataConfig", []):
        if c["ChannelName"] in ("code", "sm_drivers"):
            continue
        s3, fs = c["DataSource"].get("S3DataSource"), c["DataSource"].get("FileSystemDataSource")
        rows.append(
            {
                "channel": c["ChannelName"],
                "InputMode": c.get("InputMode", "File"),
                "source": s3["S3Uri"]
                if s3
                else f"{fs['FileSystemType']} {fs['FileSystemId']}:"
                f"{fs['DirectoryPath']} ({fs['FileSystemAccessMode']})",
                "VpcConfig": f"{','.join(vpc.get('Subnets', []))} / {','.join(vpc.get('SecurityGroupIds', []))}"
                if fs
                else "",
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------- the lab's views
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


_COLOURS = {"File": "#4C72B0", "FastFile": "#DD8452", "FSx": "#55A868"}


def plot_timeline(rows: list[dict], title: str = "One job per input mode"):
    """Stacked bars per mode: input staging, start to first training step, the rest; bytes fetched beside."""
    import matplotlib.pyplot as plt

    fig, (ax, ax_bytes) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [2.2, 1]})
    labels = [r["label"] for r in rows]
    staging = [r["staging_s"] for r in rows]
    start = [r["to_first_step_s"] - r["staging_s"] for r in rows]
    rest = [r["total_s"] - r["to_first_step_s"] for r in rows]
    ax.barh(labels, staging, color="#C44E52", label="input staged before the script starts")
    ax.barh(labels, start, left=staging, color="#8172B2", label="script start to first training step")
    ax.barh(labels, rest, left=[a + b for a, b in zip(staging, start)], color="#CCB974", label="training to the end")
    ax.invert_yaxis()
    ax.set(xlabel="seconds since the job was submitted", title=title)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    mb = [r["bytes_from_store"] / 1e6 for r in rows]
    ax_bytes.barh(labels, mb, color=[_COLOURS.get(r["mode"], "grey") for r in rows])
    for y, v in enumerate(mb):
        ax_bytes.annotate(f"{v:.1f}", (v, y), va="center", fontsize=8)
    ax_bytes.invert_yaxis()
    ax_bytes.set(xlabel="MB read from the object store", title="Bytes fetched")
    ax_bytes.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_sequence(runs: dict[str, list[float]], title: str = "A sequence of jobs on the same data"):
    """Cumulative seconds after each job of a sequence, one line per mode."""
    import itertools

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for mode, seconds in runs.items():
        ax.plot(
            range(1, len(seconds) + 1), list(itertools.accumulate(seconds)), "o-", label=mode, color=_COLOURS.get(mode)
        )
    ax.set(xlabel="job", ylabel="seconds, all jobs so far", title=title)
    ax.set_xticks(range(1, max(len(s) for s in runs.values()) + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_access(rows: list[dict], title: str = "Access pattern x input mode"):
    """Read throughput the script saw, and bytes fetched, per (pattern, mode)."""
    import matplotlib.pyplot as plt
    import numpy as np

    patterns = list(dict.fromkeys(r["pattern"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, (ax, ax_bytes) = plt.subplots(1, 2, figsize=(11, 3.4))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        got = {r["pattern"]: r for r in rows if r["mode"] == mode}
        x = np.arange(len(patterns)) + i * width
        ax.bar(x, [got[p]["read_mb_per_s"] for p in patterns], width, label=mode, color=_COLOURS.get(mode))
        ax_bytes.bar(
            x, [got[p]["bytes_from_store"] / 1e6 for p in patterns], width, label=mode, color=_COLOURS.get(mode)
        )
    for a in (ax, ax_bytes):
        a.set_xticks(np.arange(len(patterns)) + width * (len(modes) - 1) / 2, patterns, fontsize=8)
        a.grid(axis="y", alpha=0.3)
        a.legend(fontsize=8)
    ax.set(ylabel="MB/s the script read", title=title, yscale="log")
    ax_bytes.set(ylabel="MB fetched from the store", title="Bytes fetched (read-ahead included)")
    fig.tight_layout()
    return fig
