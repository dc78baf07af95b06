"""What S3 feels like from one training instance, put between the jobs and the loopback store.

The loopback store answers in under a millisecond at hundreds of MB/s, so every input mode would look alike; S3
waits for a first byte and limits each connection's bandwidth. ``S3Profile`` holds those two figures and their
source; ``Throttle``, a loopback TCP proxy, imposes them on every connection through it::

    with ObjectStore(root, profile=AWS_S3) as store:   # store.endpoint is the throttled one
        ...

Run alone, it is the proxy process: ``python -m sagemaker_standin.s3_profile --port P --upstream Q ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from sagemaker_standin.children import DIE_WITH_PARENT
from sagemaker_standin.errors import StandInError
from sagemaker_standin.ports import free_port

_CHUNK = 256 << 10  # bytes forwarded at a time: 3 ms of one connection at 85 MB/s


@dataclass(frozen=True)
class S3Profile:
    """First-byte latency of a request and bandwidth of one connection."""

    first_byte_ms: float
    connection_mb_per_s: float
    source: str = ""

    def describe(self) -> str:
        per_request, per_connection = f"{self.first_byte_ms:g} ms", f"{self.connection_mb_per_s:g} MB/s"
        return f"{per_request} to the first byte of each request, {per_connection} per connection"

    def seconds(self, size_bytes: float, requests: int = 1) -> float:
        """What one connection spends on ``requests`` GETs of ``size_bytes`` in all, by this profile."""
        return requests * self.first_byte_ms / 1e3 + size_bytes / (self.connection_mb_per_s * 1e6)


AWS_S3 = S3Profile(
    first_byte_ms=30,
    connection_mb_per_s=85,
    source=(
        "AWS whitepaper 'Best Practices Design Patterns: Optimizing Amazon S3 Performance': 'Make one concurrent "
        "request for each 85-90 MB/s of desired network throughput' (Horizontal Scaling and Request "
        "Parallelization), and small requests' 'median latencies are often in the tens of milliseconds range' "
        "(Timeouts and Retries for Latency-Sensitive Applications)"
    ),
)


class S3ProfileError(StandInError, RuntimeError):
    """The throttling proxy cannot start or stopped; the message says what to do."""


class Throttle:
    """The proxy process: listens on a free loopback port and forwards to ``upstream_port`` under ``profile``."""

    def __init__(self, upstream_port: int, profile: S3Profile, log_path: str | os.PathLike | None = None):
        self.upstream_port, self.profile = upstream_port, profile
        self.port = free_port()
        log = open(log_path or os.devnull, "w", encoding="utf-8")
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sagemaker_standin.s3_profile",
                    f"--port={self.port}",
                    f"--upstream={upstream_port}",
                    f"--first-byte-ms={profile.first_byte_ms}",
                    f"--mb-per-s={profile.connection_mb_per_s}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=DIE_WITH_PARENT,  # a kernel killed outright takes its proxy along
            )
        finally:
            log.close()
        self._wait_ready()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise S3ProfileError(
                    f"the S3-profile proxy exited at start (code {self.proc.returncode}); run "
                    f"`python -m sagemaker_standin.s3_profile --port 0 --upstream {self.upstream_port}` to see why."
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise S3ProfileError(f"the S3-profile proxy did not listen on 127.0.0.1:{self.port} within {timeout_s:g} s.")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------------------------- the proxy process
async def _pump(reader, writer, rate_bytes_per_s: float, before) -> None:
    """Forward one direction at no more than ``rate``: each chunk is sent, then the pump waits until the connection's
    schedule allows the next (an absolute schedule, so sleeps that overrun by a timer tick do not add up)."""
    loop = asyncio.get_running_loop()
    due = loop.time()
    try:
        while data := await reader.read(_CHUNK):
            await before()
            due = max(due, loop.time()) + len(data) / rate_bytes_per_s
            writer.write(data)
            await writer.drain()
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _connection(client_r, client_w, upstream: int, first_byte_s: float, rate: float) -> None:
    """One client connection: requests (HTTP/1.1, one at a time, as boto3 sends them) wait ``first_byte_s`` for the
    first byte of their response, counted from the request's first byte; both directions are paced at ``rate``."""
    loop = asyncio.get_running_loop()
    try:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        client_w.close()
        return
    asked: list[float] = []  # when the request in flight began; empty between requests

    async def request_sent() -> None:  # before its bytes go upstream: the response cannot come first
        if not asked:
            asked.append(loop.time())

    async def response_arrives() -> None:
        if asked:
            wait = asked.pop() + first_byte_s - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)

    await asyncio.gather(
        _pump(client_r, up_w, rate, before=request_sent),
        _pump(up_r, client_w, rate, before=response_arrives),
    )


async def _serve(port: int, upstream: int, first_byte_ms: float, mb_per_s: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _connection(r, w, upstream, first_byte_ms / 1e3, mb_per_s * 1e6), "127.0.0.1", port
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Throttle a loopback S3 endpoint to an S3Profile.")
    p.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    p.add_argument("--upstream", type=int, required=True, help="loopback port of the store's S3 gateway")
    p.add_argument("--first-byte-ms", type=float, default=AWS_S3.first_byte_ms)
    p.add_argument("--mb-per-s", type=float, default=AWS_S3.connection_mb_per_s)
    a = p.parse_args(argv)
    asyncio.run(_serve(a.port, a.upstream, a.first_byte_ms, a.mb_per_s))


if __name__ == "__main__":
    main()
