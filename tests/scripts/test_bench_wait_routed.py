"""`scripts/bench`'s wait for a broker to become routable: it must follow addresses that move
(Apache's launcher retries on fresh ports) and report a failed start at once, not after the
whole timeout. The name server is faked; the end-to-end run is test_bench_compare.py."""
from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(60)


def test_follows_addresses_that_move(bench, monkeypatch) -> None:
    asked: list[tuple[str, str | None]] = []
    live = {"ns": "127.0.0.1:1001", "broker": "127.0.0.1:2001"}

    def route_names(namesrv: str, broker_addr: str | None) -> bool:
        asked.append((namesrv, broker_addr))
        if len(asked) == 3:  # the launcher moved to fresh ports after its first attempt
            live.update(ns="127.0.0.1:1002", broker="127.0.0.1:2002")
        return (namesrv, broker_addr) == ("127.0.0.1:1002", "127.0.0.1:2002")

    monkeypatch.setattr(bench, "route_names", route_names)
    t0 = time.perf_counter()
    took = bench.wait_routed(lambda: live["ns"], lambda: live["broker"], t0, timeout=10)
    assert 0 <= took < 10
    assert asked[0] == ("127.0.0.1:1001", "127.0.0.1:2001")
    assert asked[-1] == ("127.0.0.1:1002", "127.0.0.1:2002")


def test_a_failed_start_is_reported_at_once(bench, monkeypatch) -> None:
    monkeypatch.setattr(bench, "route_names", lambda namesrv, broker_addr: False)
    failure: list[str] = []
    t_fail = time.monotonic() + 0.3

    def gave_up() -> str | None:
        if time.monotonic() >= t_fail:
            failure.append("Apache broker exited with 1: bind failed")
        return failure[0] if failure else None

    start = time.monotonic()
    with pytest.raises(bench.BenchError, match="Apache broker exited with 1: bind failed"):
        bench.wait_routed("127.0.0.1:1", None, time.perf_counter(), timeout=30, gave_up=gave_up)
    assert time.monotonic() - start < 10


def test_plain_addresses_time_out_naming_the_name_server(bench, monkeypatch) -> None:
    monkeypatch.setattr(bench, "route_names", lambda namesrv, broker_addr: False)
    with pytest.raises(bench.BenchError, match=r"not become routable through 127\.0\.0\.1:9 within 0 s"):
        bench.wait_routed("127.0.0.1:9", None, time.perf_counter(), timeout=0.2)


def test_a_name_server_that_resets_the_connection_is_not_routable_yet(bench) -> None:
    """A name server killed while the wait polls it (Apache's launcher retrying) resets the
    connection after the request: that poll says 'not yet', it does not crash the benchmark
    (CI once ended `bench --compare` with an exception group of the reset and the lost request)."""
    import socket
    import struct
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    served: list[int] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = srv.accept()
            conn.recv(65536)  # the GET_ROUTEINFO_BY_TOPIC request
            # SO_LINGER 0: close() sends RST, as a killed process's socket does
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            served.append(1)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert bench.route_names(f"127.0.0.1:{port}", None) is False
        assert bench.route_names(f"127.0.0.1:{port}", "127.0.0.1:10911") is False
        t.join(10)
        assert served == [1, 1]
    finally:
        srv.close()
    assert bench.route_names(f"127.0.0.1:{port}", None) is False  # refused: nothing listens now
