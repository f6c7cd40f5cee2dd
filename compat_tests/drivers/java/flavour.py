"""What the two Java client flavours share for the compat harness (drivers/java/client.py is
the 4.9.8 client, drivers/java5/client.py the 5.x Remoting client): one driver source,
src/Driver.java, compiled by setup.sh into target/driver-<flavour>.jar with
target/classpath-<flavour>.txt.  Imports nothing of rmqd."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "target"

# A quick JVM per case: the driver is short-lived, so C1 only, serial GC, a small heap.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx256m", "-Xshare:auto"]


def jar(flavour: str) -> Path:
    return TARGET / f"driver-{flavour}.jar"


def classpath_file(flavour: str) -> Path:
    return TARGET / f"classpath-{flavour}.txt"


def client_version(flavour: str) -> str:
    """The rocketmq-client version on the built classpath (the pom's pin), for the matrix header."""
    try:
        text = classpath_file(flavour).read_text()
    except OSError:
        text = (HERE / f"pom-{flavour}.xml").read_text()
    m = re.search(r"rocketmq-client[/-](\d+\.\d+\.\d+)", text) or re.search(
        r"<artifactId>rocketmq-client</artifactId><version>([^<]+)", text)
    return m.group(1) if m else "?"


def problem(flavour: str) -> str | None:
    """None if the flavour's jar is built and current, else what to run."""
    if shutil.which("java") is None:
        return "java is not installed (Java 17 is needed)"
    built, cp = jar(flavour), classpath_file(flavour)
    if not built.is_file() or not cp.is_file():
        return "Java driver not built: run compat_tests/drivers/java/setup.sh (needs Maven and Maven Central)"
    sources = [HERE / "src" / "Driver.java", HERE / f"pom-{flavour}.xml"]
    if flavour == "5":
        sources.append(HERE / "src" / "Pop5.java")
    stale = [p.name for p in sources if p.stat().st_mtime > built.stat().st_mtime]
    if stale:
        return f"Java driver older than {', '.join(stale)}: run compat_tests/drivers/java/setup.sh"
    missing = [e for e in cp.read_text().strip().split(":") if e and not Path(e).is_file()]
    if missing:
        return f"Java driver classpath names a missing jar ({missing[0]}): run compat_tests/drivers/java/setup.sh"
    return None


def command(flavour: str, case_file: Path) -> list[str]:
    cp = f"{jar(flavour)}:{classpath_file(flavour).read_text().strip()}"
    # The JVM takes user.home from the password database, not $HOME: without this the client's
    # log and local offset store (broadcast consumers) would be shared by every test as root's.
    home = f"-Duser.home={case_file.resolve().parent}"
    return ["java", *JVM_FLAGS, home, "-cp", cp, "Driver", str(case_file)]
