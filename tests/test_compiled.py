"""rmqd/_compiled.py and scripts/build_ext: a compiled hot module gives the same bytes as its
plain-Python source, and a build older than its source (or RMQD_PURE=1) never runs.

Each comparison loads a second, separate copy of the module's .py (``load_pure``) next to the
module as imported (the Cython build when scripts/build_ext made one) and feeds both the same
input: the 4.9.8 capture's frames, generated headers, records of the fixture commit log.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fixtures import CAPTURE as CAPTURE_DIR, CLEAN, require
from rmqd import _compiled
from rmqd.wire.errors import WireError

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = CAPTURE_DIR / "remoting-frames.jsonl"
STORE = CLEAN / "store"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _module(name: str) -> tuple[Any, Any]:
    """(module as imported, its plain-Python twin); under scripts/dev test the first must be the
    build (set-up compiled it), elsewhere an unbuilt tree compares the source with itself."""
    import importlib

    mod = importlib.import_module(name)
    built = not (mod.__file__ or "").endswith(".py")
    if not built and os.environ.get("RMQD_REQUIRE_ALL") and not _compiled.pure_forced():
        pytest.fail(f"{name} is not compiled: scripts/dev setup runs scripts/build_ext (Cython and a C compiler)")
    return mod, _compiled.load_pure(name)


def _outcome(fn: Any, *args: Any) -> Any:
    """What a call gives: its value, or the wire error's type and text."""
    try:
        return ("ok", fn(*args))
    except WireError as e:
        return ("error", type(e).__name__, str(e))


def _fields(cmd: Any) -> tuple:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields,
            None if cmd.body is None else bytes(cmd.body), int(cmd.serialize_type))


def _capture_frames() -> list[bytes]:
    return [bytes.fromhex(json.loads(line)["rawFrameHex"]) for line in require(CAPTURE).read_text().splitlines() if line]


def test_frames_decode_and_encode_alike() -> None:
    built, pure = _module("rmqd.wire.frame")
    frames = _capture_frames()
    for raw in frames:
        a, b = built.decode_frame(raw), pure.decode_frame(raw)
        assert _fields(a) == _fields(b)
        assert built.encode_frame(a) == pure.encode_frame(a)
        # the same commands in the other serialization
        a.serialize_type = 1 - a.serialize_type
        if a.ext_fields is None or all(k and v for k, v in a.ext_fields.items()):
            assert built.encode_frame(a) == pure.encode_frame(a)


_KEYS = st.text(max_size=12)
_VALUES = st.text(max_size=300)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ext=st.dictionaries(_KEYS, _VALUES, max_size=16), code=st.integers(-(2**15), 2**15 - 1),
       opaque=st.integers(-(2**31), 2**31 - 1), remark=st.none() | st.text(max_size=40),
       stype=st.sampled_from([0, 1]), body=st.binary(max_size=64))
def test_generated_commands_alike(ext: dict, code: int, opaque: int, remark: str | None, stype: int,
                                  body: bytes) -> None:
    built, pure = _module("rmqd.wire.frame")
    cmd = built.RemotingCommand(code=code, opaque=opaque, remark=remark, ext_fields=ext, body=body or None,
                                serialize_type=stype)
    raw = built.encode_frame(cmd)
    assert raw == pure.encode_frame(cmd)
    assert _fields(built.decode_frame(raw)) == _fields(pure.decode_frame(raw))


@settings(max_examples=500, deadline=None)
@given(header=st.binary(max_size=120), cut=st.integers(0, 120))
def test_damaged_binary_headers_fail_alike(header: bytes, cut: int) -> None:
    built, pure = _module("rmqd.wire.frame")
    # a real header start, then arbitrary bytes: every length check is reached
    fixed = bytes.fromhex("0136000191000000070000000000000000") + header[:cut]
    # ... and an entry whose value length has its sign bit set (a C shift would wrap it)
    signed = fixed[:17] + bytes.fromhex("0000000d0001618000000167") + header[:cut]
    for data in (header, fixed, fixed + b"\x00\x00\x00\x10" + header, signed):
        a, b = _outcome(built.decode_binary_header, data), _outcome(pure.decode_binary_header, data)
        if a[0] == "ok":
            assert b[0] == "ok" and _fields(a[1]) == _fields(b[1])
        else:
            assert a == b


def test_commit_log_records_alike() -> None:
    built, pure = _module("rmqd.store.commitlog")
    files = sorted(require(STORE / "commitlog").glob("*"))
    seen = 0
    for f in files:
        data = f.read_bytes()
        pos = 0
        a_cl = built.CommitLog.__new__(built.CommitLog)
        b_cl = pure.CommitLog.__new__(pure.CommitLog)
        for cl in (a_cl, b_cl):
            cl.delay_level_table = {i: 1000 * i for i in range(1, 19)}
        while pos < len(data):
            a, b = a_cl.dispatch_info(data, pos, True), b_cl.dispatch_info(data, pos, True)
            assert a == b
            if not isinstance(a, tuple):
                break
            assert built.CommitLog.validate_record(data, pos) == pure.CommitLog.validate_record(data, pos) == a[3]
            pos += a[3]
            seen += 1
    assert seen > 0


def test_encoded_records_alike(tmp_path: Path) -> None:
    built, pure = _module("rmqd.store.commitlog")
    from rmqd.store.config import MessageStoreConfig

    for mod in (built, pure):
        cfg = MessageStoreConfig(storePathRootDir=str(tmp_path / mod.__name__))
        cl = mod.CommitLog(cfg)
        msgs = []
        for i, (topic, props) in enumerate([("T", {"WAIT": "true", "TAGS": "a"}), ("t" * 200, {"KEYS": "k é"}),
                                            ("Topic", {})]):
            msg = mod.MessageExtBrokerInner(topic=topic, queue_id=i, body=bytes(range(i * 7)), properties=props,
                                            born_host=b"\x7f\x00\x00\x01" if i != 1 else bytes(16),
                                            born_port=5000 + i, born_timestamp=1700000000000 + i)
            msgs.append(bytes(cl.encode(msg)))
        if mod is built:
            expected = msgs
        else:
            assert msgs == expected


@pytest.mark.parametrize("module, cls, args", [
    ("rmqd.store.commitlog", "MessageExtBrokerInner", ("T", 3, b"body", {"TAGS": "a"})),
    ("rmqd.store.commitlog", "MessageExtBatch", ("T", 1, b"batch")),
    ("rmqd.store.commitlog", "PutMessageResult", (None,)),
    ("rmqd.store.commitlog", "AppendMessageResult", (None,)),
    ("rmqd.wire.frame", "RemotingCommand", (310,)),
])
def test_data_classes_behave_as_the_plain_dataclasses(module: str, cls: str, args: tuple) -> None:
    """Compiled, these are extension types (commitlog.pxd, frame.pxd): their fields are struct
    members. As dataclasses they must still act as the plain module's: the same fields and
    defaults, repr, equality, replace, copies; an attribute that is not a field is refused."""
    built, pure = _module(module)
    b, p = getattr(built, cls)(*args), getattr(pure, cls)(*args)
    assert [f.name for f in dataclasses.fields(b)] == [f.name for f in dataclasses.fields(p)]
    assert dataclasses.astuple(b) == dataclasses.astuple(p)
    assert repr(b) == repr(p)
    assert b == getattr(built, cls)(*args) and b != dataclasses.replace(b, **{dataclasses.fields(b)[0].name: 9})
    assert dataclasses.astuple(copy.copy(b)) == dataclasses.astuple(b)
    assert dataclasses.astuple(pickle.loads(pickle.dumps(b))) == dataclasses.astuple(b)
    if not (built.__file__ or "").endswith(".py"):
        with pytest.raises(AttributeError):
            b.not_a_field = 1  # type: ignore[attr-defined]


def _finder_tree(tmp_path: Path) -> Path:
    """tmp/pkgx/frame.py (wire/frame.py's source) and, when built, its extension module."""
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "wire" / "frame.py", pkg / "frame.py")
    so = ROOT / "wire" / f"frame{SUFFIX}"
    if so.exists():
        shutil.copy(so, pkg / f"frame{SUFFIX}")
    return pkg


def _loaded_from(tmp_path: Path, env: dict[str, str] | None = None) -> str:
    code = ("import sys; from rmqd import _compiled; _compiled.MODULES = _compiled.MODULES + ('pkgx.frame',); "
            "import pkgx.frame as f; print(f.__file__)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(tmp_path), "RMQD_PURE": "", **(env or {})})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_a_stale_build_or_rmqd_pure_loads_the_source(tmp_path: Path) -> None:
    pkg = _finder_tree(tmp_path)
    so = pkg / f"frame{SUFFIX}"
    if not so.exists():
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail("wire/frame is not compiled: scripts/dev setup runs scripts/build_ext")
        pytest.skip("wire/frame is not compiled here (scripts/build_ext)")
    src = pkg / "frame.py"
    os.utime(src, (1_000_000_000, 1_000_000_000))
    assert _loaded_from(tmp_path).endswith(SUFFIX)  # the build is newer: it runs
    assert _loaded_from(tmp_path, {"RMQD_PURE": "1"}).endswith("frame.py")
    os.utime(src, None)  # the source edited after the build
    os.utime(so, (1_000_000_000, 1_000_000_000))
    assert _loaded_from(tmp_path).endswith("frame.py")


def test_build_ext_lists_existing_modules() -> None:
    for name in _compiled.MODULES:
        parts = name.split(".")[1:]
        assert ROOT.joinpath(*parts).with_suffix(".py").is_file(), name


@settings(max_examples=400, deadline=None)
@given(s=st.text(max_size=40) | st.text(alphabet=st.characters(max_codepoint=127), min_size=500, max_size=700),
       prefix=st.text(max_size=20))
def test_java_hashes_alike(s: str, prefix: str) -> None:
    built, pure = _module("rmqd.wire.javamap")
    assert built.java_string_hash(s) == pure.java_string_hash(s)
    ph = pure.java_string_hash(prefix)
    assert built.java_string_hash_from(ph, s) == pure.java_string_hash_from(ph, s) == pure.java_string_hash(prefix + s)


def test_java_hash_takes_its_compiled_loop_only_when_built() -> None:
    built, pure = _module("rmqd.wire.javamap")
    assert pure.COMPILED is False
    assert built.COMPILED is (not (built.__file__ or "").endswith(".py"))
    assert pure._ascii_hash(0, b"TBW102") == pure.java_string_hash("TBW102") == built._ascii_hash(0, b"TBW102")
