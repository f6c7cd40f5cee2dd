"""SIGKILL a process appending under SYNC_FLUSH at random points; after recovery every
acknowledged message is present and intact and no torn record is served."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.mapped_file import TEMP_SUFFIX
from rmqd.store.message_store import DefaultMessageStore, GetMessageStatus
from rmqd.wire.message import iter_records

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys, threading, hashlib
    from rmqd.store.config import MessageStoreConfig
    from rmqd.store.message_store import DefaultMessageStore
    from rmqd.store.commitlog import MessageExtBrokerInner
    root, start = sys.argv[1], int(sys.argv[2])
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root, flushDiskType="SYNC_FLUSH",
        mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=200, maxHashSlotNum=64, maxIndexNum=256))
    s.load(); s.start()
    out = sys.stdout
    lock = threading.Lock()
    def writer(t):
        i = 0
        while True:
            key = f"{start}-{t}-{i}"
            body = (key.encode() + b"|") * (1 + (i * 7919) % 97)
            r = s.put_message(MessageExtBrokerInner("CrashT", t, body, {"KEYS": key, "TAGS": "c"}))
            assert r.is_ok(), r
            if s.wait_for_flush(r.end_offset):
                with lock:
                    out.write(f"{key} {r.appendMessageResult.wroteOffset} {r.appendMessageResult.logicsOffset}\\n")
                    out.flush()
            i += 1
    print("ready", flush=True)
    for t in range(3):
        threading.Thread(target=writer, args=(t,), daemon=True).start()
    threading.Event().wait()
""")


def _body(key: str, i: int) -> bytes:
    return (key.encode() + b"|") * (1 + (i * 7919) % 97)


@pytest.mark.timeout(240)
def test_sigkill_rounds_lose_no_acknowledged_message(tmp_path):
    root = tmp_path / "store"
    rnd = random.Random(int(os.environ.get("RMQD_CRASH_SEED", "1234")))
    acked: dict[str, tuple[int, int]] = {}
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for rnd_no in range(20):
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(rnd_no)], stdout=subprocess.PIPE,
                             env=env, cwd=str(REPO))
        assert p.stdout.readline().strip() == b"ready"
        time.sleep(rnd.uniform(0.02, 0.4))  # the behaviour under test: a kill at a random point of the writes
        p.send_signal(signal.SIGKILL)
        out = p.stdout.read().decode()
        p.wait()
        lines = out.splitlines()
        if lines and not lines[-1].count(" ") == 2:
            lines = lines[:-1]  # a half-printed line was never fully acknowledged
        for line in lines:
            key, off, qoff = line.split()
            acked[key] = (int(off), int(qoff))
        assert (root / "abort").exists()
    assert len(acked) > 100

    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                                               mappedFileSizeConsumeQueue=200, maxHashSlotNum=64, maxIndexNum=256))
    s.load()
    s.start()
    try:
        assert s.recovery_report.abnormal
        assert s.wait_dispatched()
        # the whole log validates (CRC included): nothing torn is left to serve
        n = 0
        for mf in s.commit_log.mapped_file_queue.mapped_files:
            for _pos, rec in iter_records(mf.view(), 0, mf.wrote_position, check_crc=True, where=mf.file_name):
                n += rec is not None
        assert n >= len(acked)
        for key, (off, qoff) in acked.items():
            rec = s.look_message_by_offset(off)
            assert rec is not None and rec.keys == [key]
            i = int(key.rsplit("-", 1)[1])
            assert rec.body == _body(key, i)
            got = s.get_message("g", "CrashT", rec.queue_id, qoff, 1)
            assert got.status is GetMessageStatus.FOUND and bytes(got.message_buffers[0]) == rec.encode()
            # the index (rolled over many times: 256 entries per file) finds it by key
            found = s.query_message("CrashT", key, 64, 0, 2**62)
            assert any(bytes(v) == bytes(got.message_buffers[0]) for v in found.message_buffers), key
        assert len(s.index_service.index_files) > 1
    finally:
        s.shutdown()


def test_a_crash_inside_file_creation_leaves_nothing_the_next_start_refuses(tmp_path):
    """Files are created at full size under a temporary name and renamed: what a kill in
    between leaves (a short temporary) is removed at load, in every mapped-file directory."""
    cfg = dict(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=200,
               maxHashSlotNum=64, maxIndexNum=256)
    s = DefaultMessageStore(MessageStoreConfig(**cfg))
    s.load()
    s.start()
    r = s.put_message(MessageExtBrokerInner("CrashT", 0, b"x" * 100, {"KEYS": "k0"}))
    assert r.is_ok() and s.wait_dispatched()
    s.shutdown()
    leftovers = [tmp_path / "commitlog" / f"{64 * 1024:020d}{TEMP_SUFFIX}",
                 tmp_path / "consumequeue" / "CrashT" / "0" / f"{200:020d}{TEMP_SUFFIX}",
                 tmp_path / "index" / f"20990101000000000{TEMP_SUFFIX}"]
    for p in leftovers:
        p.write_bytes(b"")  # killed right after open(O_CREAT), before sizing
    (tmp_path / "abort").touch()
    s = DefaultMessageStore(MessageStoreConfig(**cfg))
    s.load()
    s.start()
    try:
        assert not any(p.exists() for p in leftovers)
        assert s.query_message("CrashT", "k0", 1, 0, 2**62).message_buffers
        r = s.put_message(MessageExtBrokerInner("CrashT", 0, b"y" * 100, {"KEYS": "k1"}))
        assert r.is_ok() and r.appendMessageResult.logicsOffset == 1
    finally:
        s.shutdown()


def test_new_files_appear_only_at_full_size(tmp_path, monkeypatch):
    """Creation is sized before the file gets its real name: a failure while preparing leaves
    neither the file nor its temporary."""
    from rmqd.store import mapped_file

    def boom(_mm):
        raise OSError("disk gone")

    target = tmp_path / f"{0:020d}"
    with pytest.raises(OSError, match="disk gone"):
        mapped_file.create_file_atomically(str(target), 4096, prepare=boom)
    assert list(tmp_path.iterdir()) == []
    mm = mapped_file.create_file_atomically(str(target), 4096, allocate=True)
    try:
        assert target.stat().st_size == 4096 and list(tmp_path.iterdir()) == [target]
    finally:
        mm.close()


DELETE_CHILD = textwrap.dedent("""
    import os, sys
    from rmqd.store.config import MessageStoreConfig
    from rmqd.store.message_store import DefaultMessageStore
    from rmqd.store.commitlog import MessageExtBrokerInner
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=sys.argv[1], mappedFileSizeCommitLog=1024 * 1024,
                                               mappedFileSizeConsumeQueue=2000))
    s.load(); s.start()
    def put(n):
        for _ in range(n):
            assert s.put_message(MessageExtBrokerInner("LivesT", 0, b"x" * 50, {})).is_ok()
    for lives in (6, 3, 2):  # three lives of one topic, each deleted
        put(lives)
        assert s.wait_dispatched(), "this life's units in the consume queue before the delete"
        s.delete_topics(["LivesT"])
    os._exit(0)  # no shutdown: the next start recovers abnormally, walking the whole file
""")


@pytest.mark.timeout(60)
def test_recovery_after_a_deleted_topic_indexes_one_life(tmp_path):
    """A topic sent to, deleted, sent to again (offsets restart at 0), ... then SIGKILL: the
    recovery dispatches every life's records again. 4.9.8 appends each later life's offset-0
    record at the end of the queue (unit N pointing at a record of queue offset 0); rmqd keeps
    the first life only, so every unit points at the record of its own queue offset."""
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", DELETE_CHILD, str(root)], env=env, cwd=str(REPO), check=True, timeout=30)
    assert (root / "abort").exists()
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1024 * 1024,
                                               mappedFileSizeConsumeQueue=2000))
    assert s.load()
    s.start()
    try:
        cq = s.find_consume_queue("LivesT", 0)
        assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (0, 6)
    finally:
        s.shutdown()
    from rmqd.store import tools
    assert tools.verify(root) == []
