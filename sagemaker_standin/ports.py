"""Free TCP ports on loopback, for torchrun's rendezvous and the object store."""

from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (held open together, so none is handed out twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]
