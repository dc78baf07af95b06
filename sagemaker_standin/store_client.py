"""The client side of the loopback object store: S3 URIs and listings, a boto3 client that talks to this machine only,
and one object fetched whole (or not at all), a failure said in a job's terms.

:mod:`sagemaker_standin.objectstore` runs the store; :mod:`sagemaker_standin.s3_inputs` and
:mod:`sagemaker_standin.fastfile` read channels from it through these.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from sagemaker_standin.errors import StandInError

ACCESS_KEY, SECRET_KEY = "workshop", "workshop-local-store"  # the store accepts any key pair; boto3 needs one
STORE_REGION = "us-east-1"
_CHUNK = 1 << 20


class ObjectStoreError(StandInError, RuntimeError):
    """The store cannot start, stopped, or cannot be reached; the message says what to do."""


@dataclass(frozen=True)
class S3Uri:
    """``s3://bucket/prefix/`` split in two; a channel prefix always ends with ``/`` (a directory of objects)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str, directory: bool = True) -> S3Uri:
        parsed = urlparse(str(uri))
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"{uri!r} is not an S3 URI (s3://bucket/prefix/).")
        prefix = parsed.path.lstrip("/")
        if directory and prefix and not prefix.endswith("/"):
            prefix += "/"
        return cls(parsed.netloc, prefix)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int
    etag: str
    modified: float  # POSIX time

    def relative_to(self, prefix: str) -> str:
        return self.key[len(prefix) :]


@dataclass
class Transfer:
    """What an upload or download moved: objects, bytes, seconds."""

    objects: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds else float("nan")


def require_loopback(endpoint: str) -> str:
    """``endpoint`` if it is an http URL on this machine; the local runner never reads a store elsewhere."""
    parsed = urlparse(str(endpoint))
    if parsed.scheme != "http" or parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        raise ObjectStoreError(
            f"{endpoint!r} is not a local object store endpoint (http://127.0.0.1:PORT): local "
            f"jobs read s3:// channels only from the store sagemaker_standin.objectstore runs on this "
            f"machine. Use store.endpoint, or an ml.* target for real S3."
        )
    return f"http://{parsed.hostname}:{parsed.port}"


_CLIENTS: dict[tuple[str, int], object] = {}
_CLIENTS_LOCK = threading.Lock()


def s3_client(endpoint: str, max_pool_connections: int = 16):
    """A boto3 S3 client for a local store: loopback only, no proxies, no credential or region lookups, fast fails.

    One per endpoint, shared (boto3 clients are thread-safe; making one costs a few hundred milliseconds)."""
    key = (require_loopback(endpoint), max_pool_connections)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = new_client(*key)
        return _CLIENTS[key]


def new_client(endpoint: str, max_pool_connections: int, timeout_s: float = 60, attempts: int = 3):
    """A client of its own (:func:`s3_client` shares one per endpoint): the store's readiness probe wants short
    timeouts and a single attempt."""
    import boto3
    from botocore.config import Config

    config = Config(
        region_name=STORE_REGION,
        proxies={},
        retries={"total_max_attempts": attempts, "mode": "standard"},
        connect_timeout=min(2, timeout_s),
        read_timeout=timeout_s,
        max_pool_connections=max_pool_connections,
        s3={"addressing_style": "path"},
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, config=config, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY
    )


def reachable(endpoint: str, timeout: float = 2.0) -> str | None:
    """None if something accepts connections at ``endpoint``, else why not."""
    import socket

    parsed = urlparse(require_loopback(endpoint))
    assert parsed.port is not None  # require_loopback refuses an endpoint without one
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout):
            return None
    except OSError as err:
        return err.strerror or str(err)


def list_objects(client, uri: str | S3Uri) -> list[S3Object]:
    """Every object under a prefix (directory markers skipped), in key order."""
    where = uri if isinstance(uri, S3Uri) else S3Uri.parse(uri)
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.prefix):
        for o in page.get("Contents", []):
            if not o["Key"].endswith("/"):
                found.append(S3Object(o["Key"], o["Size"], o.get("ETag", "").strip('"'), o["LastModified"].timestamp()))
    return sorted(found, key=lambda o: o.key)


# ---------------------------------------------------------------------------------------------- one object
def fetch_object(client, bucket: str, key: str, dest: Path, modified: float, scratch: Path, size: int) -> int:
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


class ShortRead(StandInError, OSError):
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


def describe_failure(err: BaseException, uri: str, endpoint: str) -> str:
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
