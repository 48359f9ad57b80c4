"""Whether a service can listen where it is asked to, said before it starts (a server that
fails to bind after minutes of start-up says less)."""

from __future__ import annotations

import socket

from core.errors import InvalidArgumentError


def require_free_port(host: str, port: int, hint: str) -> None:
    """Return when ``host:port`` can be bound now; port 0 (the service picks one) passes.

    Raises:
        InvalidArgumentError: the port is taken or the address is not this machine's,
            with the system's reason and ``hint`` (what the user can do).
    """
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            raise InvalidArgumentError(
                f"cannot listen on {host}:{port} ({err.strerror}): {hint}"
            ) from None
