"""Binding a listener, and the error that says which listener could not bind.

The OS's bind error says only "Address already in use"; with five listeners (name server,
broker, fast port, HA port, gRPC, metrics) and 8081 often taken by something else, the user
needs the listener, the address and the key that moves it. :func:`bind_tcp` adds the address
to the error (:class:`ListenError`); whoever knows which listener it was (the CLI, which knows
the settings, or the listener's own module) adds its name and key with :meth:`ListenError.named`.
"""

from __future__ import annotations

import trio


def format_host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets (``[::]:8081``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ListenError(OSError):
    """A listener that could not be bound: the OS's errno and reason, the address, and (once
    known) which listener it is and the config key that sets it. An OSError still, so callers
    that treat any bind failure alike (a default gRPC port taken) need not know this type."""

    def __init__(self, errno: int | None, reason: str, host: str, port: int, listener: str = "",
                 key: str = "") -> None:
        super().__init__(errno, reason)
        self.host = host
        self.port = port
        self.listener = listener
        self.key = key

    @classmethod
    def of(cls, cause: OSError, host: str, port: int) -> "ListenError":
        return cls(cause.errno, cause.strerror or str(cause), host, port)

    def named(self, listener: str, key: str) -> "ListenError":
        """This error naming ``listener`` and ``key`` (unless a name was given already: the
        listener's own module knows best)."""
        if self.listener:
            return self
        return ListenError(self.errno, self.strerror or "", self.host, self.port, listener, key)

    def __str__(self) -> str:
        """``cannot listen: address already in use: the broker on 0.0.0.0:10911 (listenPort)``."""
        reason = self.strerror or "error"
        reason = reason[:1].lower() + reason[1:]
        what = self.listener or "a listener"
        where = format_host_port(self.host or "0.0.0.0", self.port)
        key = f" ({self.key})" if self.key else ""
        return f"cannot listen: {reason}: {what} on {where}{key}"


async def bind_tcp(host: str, port: int) -> list[trio.SocketListener]:
    """trio.open_tcp_listeners(port, host) (every address when ``host`` is empty); a failure
    is a :class:`ListenError` naming the address."""
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise ListenError.of(exc, host, port) from None


__all__ = ["ListenError", "bind_tcp", "format_host_port"]
