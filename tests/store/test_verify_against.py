"""`rmqd store verify --against OTHER`: commit logs compared byte for byte where both stores
have data (a slave replicates from the master's last file on, so earlier files are not a
difference); a differing byte is reported with its file and offset."""
from __future__ import annotations

import shutil

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.store.tools import compare_commit_logs
from support import run_once

FILE = 64 * 1024


def _store(root):
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE,
                                               mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400))
    s.load()
    s.start()
    for i in range(300):
        assert s.put_message(MessageExtBrokerInner("T", i % 2, b"x" * 500, {"KEYS": f"k{i}"})).is_ok()
    s.shutdown()


def test_identical_replica_later_start_and_a_differing_byte(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _store(a)
    shutil.copytree(a, b)
    problems, compared = compare_commit_logs(a, b)
    assert problems == [] and "(3 file(s))" in compared
    first = sorted((b / "commitlog").iterdir())[0]
    first.unlink()  # a replica that started at the master's second file
    problems, compared = compare_commit_logs(a, b)
    assert problems == [] and "(2 file(s))" in compared
    victim = sorted((b / "commitlog").iterdir())[-1]
    data = bytearray(victim.read_bytes())
    data[1234] ^= 0xFF
    victim.write_bytes(bytes(data))
    problems, _ = compare_commit_logs(a, b)
    assert [(p.file.rsplit("/", 1)[-1], p.offset) for p in problems] == [(victim.name, 1234)]


def test_cli_verify_against(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _store(a)
    shutil.copytree(a, b)
    ok = run_once("store", "verify", str(a), "--against", str(b))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "are identical over commit-log files" in ok.stdout
    victim = sorted((b / "commitlog").iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[100] ^= 1
    victim.write_bytes(bytes(data))
    bad = run_once("store", "verify", str(a), "--against", str(b))
    assert bad.returncode == 1 and f"{victim.name}:100: differs from" in bad.stdout.replace(str(a / "commitlog") + "/", "")
