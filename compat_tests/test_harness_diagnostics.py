"""The harness's failure report: a Java driver's own client-log warnings reach it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from compat_harness import DriverProc


def test_diagnostics_quote_this_processs_client_log_warnings(tmp_path: Path) -> None:
    d = DriverProc("java5", {}, tmp_path, "03-java5-push")
    d.stderr_path = tmp_path / "03-java5-push.stderr"
    d.stderr_path.write_text("")
    d.proc = SimpleNamespace(pid=8219, returncode=None)  # type: ignore[assignment]
    log = tmp_path / "logs" / "rocketmqlogs"
    log.mkdir(parents=True)
    (log / "rocketmq_client.log").write_text(
        "2026-11-29 17:27:55.759 WARN  [8219] [RebalanceService] - lock heartBeat, but failed.\n"
        "2026-11-29 17:27:55.760 INFO  [8219] [RebalanceService] - messageQueueChanged\n"
        "2026-11-29 17:27:56.266 WARN  [8188] [NettyClientPublicExecutor_2] - another process\n"
        "2026-11-29 17:27:56.267 WARN  [8219] [NettyClientPublicExecutor_1] - the subscription is not latest\n")
    text = d.diagnostics()
    assert "lock heartBeat, but failed" in text and "the subscription is not latest" in text
    assert "another process" not in text and "messageQueueChanged" not in text


def test_diagnostics_without_a_client_log(tmp_path: Path) -> None:
    d = DriverProc("go", {}, tmp_path, "02-go-push")
    d.stderr_path = tmp_path / "02-go-push.stderr"
    d.stderr_path.write_text("boom\n")
    d.proc = SimpleNamespace(pid=1, returncode=3)  # type: ignore[assignment]
    assert d.diagnostics().endswith("--- stderr tail ---\nboom")
