"""The README's quick start, exactly as printed: its Python snippet (the official C++ client's
wheel) and its Java snippet (rocketmq-client 4.9.8) each send to a fresh `rmqd serve`, and a
consumer (the Java pull consumer of drivers/java) gets both messages.

The snippets are read out of README.md, so the README cannot drift from what runs. The only
change made to them is the name-server address (the README's 127.0.0.1:9876 becomes this
module's server); the Java snippet, a method body, is put into a main() with its imports.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import compat_harness as harness
from compat_harness import RmqdServer
from compat_session import ExternalServer, Session, module_server

pytestmark = pytest.mark.timeout(300)

README = harness.REPO / "README.md"
README_NAMESRV = "127.0.0.1:9876"
JAVA_IMPORTS = """\
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
"""


def readme_snippet(language: str) -> str:
    """The README's one fenced block of ``language``."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", README.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) == 1, f"README.md should have one ```{language} block, has {len(blocks)}"
    assert README_NAMESRV in blocks[0]
    return blocks[0]


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    yield from module_server(tmp_path_factory, "readme")


@pytest.fixture(scope="module")
def sent() -> list[bytes]:
    """The bodies the snippets sent, in order, for the consumer test."""
    return []


def _topic(snippet: str) -> str:
    (topic,) = set(re.findall(r'Message\("(\w+)"', snippet))
    return topic


def _body(snippet: str) -> bytes:
    (body,) = set(re.findall(r'"(hello rmqd)"', snippet))
    return body.encode()


def test_python_snippet_sends_with_the_cpp_client_wheel(rmqd: Any, tmp_path: Path, sent: list[bytes]) -> None:
    check = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True)
    if check.returncode != 0:
        harness.missing(f"the C++ client wheel (PyPI rocketmq) does not import: {check.stderr.strip()[-300:]}")
    code = readme_snippet("python").replace(README_NAMESRV, rmqd.namesrv)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path, env=harness.client_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "OK", result.stdout + result.stderr
    sent.append(_body(code))


def test_java_snippet_sends_with_rocketmq_client_4_9_8(rmqd: Any, tmp_path: Path, sent: list[bytes]) -> None:
    java = harness.clients()["java"]
    problem = java.problem()
    if problem:
        harness.missing(problem)
    classpath = java._F.classpath_file("4").read_text().strip()
    assert "rocketmq-client-4.9.8" in classpath
    body = readme_snippet("java").replace(README_NAMESRV, rmqd.namesrv)
    source = tmp_path / "ReadmeQuickstart.java"
    source.write_text(JAVA_IMPORTS + "\npublic class ReadmeQuickstart {\n"
                      "    public static void main(String[] args) throws Exception {\n"
                      + "".join(f"        {line}\n" for line in body.splitlines()) + "    }\n}\n")
    compiled = subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp", classpath, str(source)],
                              capture_output=True, text=True, timeout=180)
    assert compiled.returncode == 0, compiled.stderr
    result = subprocess.run(["java", *java._F.JVM_FLAGS, "-cp", f"{tmp_path}:{classpath}", "ReadmeQuickstart"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "SEND_OK", result.stdout + result.stderr
    sent.append(_body(body))


def test_a_consumer_gets_what_the_snippets_sent(rmqd: Any, tmp_path: Path, sent: list[bytes]) -> None:
    if len(sent) != 2:
        pytest.fail(f"the snippets did not both send (sent {sent}): see the tests above")
    problem = harness.client_problem("java")
    if problem:
        harness.missing(problem)
    topic = _topic(readme_snippet("python"))
    assert topic == _topic(readme_snippet("java"))
    s = Session("java", tmp_path, rmqd.namesrv, "readme")
    got = s.pull(topic, s.name("readmeg"), start="zero", commit=False)
    messages = got.messages()
    assert sorted(harness.body_of(m) for m in messages) == sorted(sent), got.diagnostics()
    assert {m.get("tags") for m in messages} == {"TagA"}, got.diagnostics()
