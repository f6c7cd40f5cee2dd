"""Route not found: with autoCreateTopicEnable=false a send to an unknown topic must fail in the
client with its own "no route" error (the name server answers GET_ROUTEINFO_BY_TOPIC with
TOPIC_NOT_EXIST and TBW102 is not there to fall back on), and nothing may be stored."""

from __future__ import annotations

from typing import Iterator

import pytest

from compat_harness import RmqdServer, msg_spec
from compat_session import ExternalServer, Session, module_server

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    yield from module_server(tmp_path_factory, "rmqd-noauto", "autoCreateTopicEnable=false\n")


@pytest.mark.compat_case("route not found (autoCreateTopicEnable=false)")
def test_route_not_found(session: Session) -> None:
    s = session
    topic = s.name("t")
    d = s.produce(topic, [msg_spec(b"nowhere", tags="TagNo")], expect_ok=False, retries=0, send_timeout_ms=3000)
    errors = d.of("send_error") + d.of("driver_error")
    assert not [e for e in d.of("sent") if e.get("status") == "SEND_OK"], d.of("sent")
    assert errors, f"the send to a topic without a route did not fail\n{d.diagnostics()}"
    text = " ".join(e["error"] for e in errors).lower()
    assert "route" in text or "topic" in text or "not exist" in text, errors
