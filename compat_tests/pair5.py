"""An rmqd and an Apache RocketMQ 5.3.3 (name server + broker each) for the 5.x admin comparisons
(test_topic_config5.py, test_admin5_mqadmin.py): one start of each for a whole module, both
stopped after it (rmqd's exit code checked), the module skipped with what to run when the 5.3.3
jars or Java are missing."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from apache5_rocketmq import ApacheRocketMQ5, apache5_problem
from compat_harness import RmqdServer, missing


@contextmanager
def rmqd_and_apache5(base: Path, broker_conf: dict[str, str] | None = None) -> Iterator[dict[str, tuple[str, str]]]:
    """side ("rmqd", "apache") -> (name server, broker Remoting address); ``broker_conf`` is given
    to both (rmqd's broker.conf, Apache's broker.conf keys)."""
    problem = apache5_problem()
    if problem:
        missing(problem)
    conf = None
    if broker_conf:
        conf = base / "rmqd-broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in broker_conf.items()))
    rmqd = RmqdServer(store=base / "rmqd" / "store", log_path=base / "rmqd.log", conf=conf).start()
    apache = ApacheRocketMQ5(base / "apache5", broker_conf=dict(broker_conf or {}))
    try:
        apache.start()
        yield {"rmqd": (rmqd.namesrv, f"127.0.0.1:{rmqd.broker_port}"),
               "apache": (apache.namesrv_addr, apache.broker_addr)}
    finally:
        apache.stop()
        assert rmqd.stop() == 0


__all__ = ["rmqd_and_apache5"]
