"""The S3 profile: the proxy in front of the loopback store gives requests S3's first-byte latency and connections
S3's bandwidth, passes the bytes through intact, and its figures are the ones its sources state."""

from __future__ import annotations

import concurrent.futures
import os
import time

import pytest

from sagemaker_standin import s3_inputs, store_client
from sagemaker_standin.objectstore import ObjectStore
from sagemaker_standin.s3_profile import AWS_S3, S3Profile

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

# steep on purpose: a throttle that did nothing would be far below these bounds on loopback (a few ms)
STEEP = S3Profile(first_byte_ms=150, connection_mb_per_s=20)
BIG = 2_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    (src / "big.bin").write_bytes(os.urandom(BIG))
    for i in range(4):
        (src / f"small{i}.txt").write_text(f"row {i}\n")
    with ObjectStore(tmp_path_factory.mktemp("store"), profile=STEEP) as s:
        s.create_bucket("profiled")
        s.upload_dir(src, "s3://profiled/d/")
        yield s, src


def _get(endpoint: str, key: str) -> tuple[bytes, float]:
    t0 = time.perf_counter()
    body = store_client.s3_client(endpoint).get_object(Bucket="profiled", Key=key)["Body"].read()
    return body, time.perf_counter() - t0


def test_jobs_read_through_the_profile_and_setting_up_does_not(store):
    s, _ = store
    assert s.endpoint != s.direct_endpoint and s.endpoint.startswith("http://127.0.0.1:")
    assert s.client().meta.endpoint_url == s.direct_endpoint  # uploads, listings: setting up, not measured


def test_a_request_waits_for_its_first_byte_and_a_connection_carries_its_bandwidth(store):
    s, src = store
    _get(s.endpoint, "d/small0.txt")  # the connection is open: what follows is per request, not per connect
    smalls = [_get(s.endpoint, f"d/small{i}.txt") for i in range(4)]
    assert [b for b, _ in smalls] == [f"row {i}\n".encode() for i in range(4)]
    assert all(sec >= 0.95 * STEEP.first_byte_ms / 1e3 for _, sec in smalls), smalls
    body, throttled = _get(s.endpoint, "d/big.bin")
    assert body == (src / "big.bin").read_bytes()
    assert throttled >= 0.95 * STEEP.seconds(BIG), (throttled, STEEP.seconds(BIG))  # 0.25 s
    direct_body, direct = _get(s.direct_endpoint, "d/big.bin")
    assert direct_body == body and direct < throttled


def test_the_bandwidth_is_per_connection_so_parallel_reads_add_up(store):
    """What File mode's two connections and FastFile's read-ahead rely on: two GETs at once each get the full rate,
    so they take far less than twice one GET (a single shared limit would take twice as long)."""
    s, _ = store
    _, one = _get(s.endpoint, "d/big.bin")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda _: _get(s.endpoint, "d/big.bin"), range(2)))
        both = time.perf_counter() - t0
    assert both < 1.6 * one, (one, both)


def test_stop_ends_the_proxy_too(tmp_path):
    s = ObjectStore(tmp_path / "store", profile=STEEP).start()
    proxy, endpoint = s.throttle.proc, s.endpoint
    assert store_client.reachable(endpoint) is None
    s.stop()
    assert proxy.poll() is not None and store_client.reachable(endpoint) is not None
    assert s.throttle is None


def test_the_profile_reproduces_the_figures_it_cites():
    """SageMaker's guide: File mode copies a 50 GB data set of 100 MB shards in about 5 minutes. With the profile's
    per-connection rate and first-byte wait, File mode's connections give that time (lab 05 prints it)."""
    minutes = AWS_S3.seconds(50e9, requests=500) / s3_inputs.FILE_MODE_CONNECTIONS / 60
    assert 4.5 <= minutes <= 5.5, minutes
    assert 85 <= AWS_S3.connection_mb_per_s <= 90 and 10 <= AWS_S3.first_byte_ms < 100
    assert "85-90 MB/s" in AWS_S3.source and "tens of milliseconds" in AWS_S3.source
