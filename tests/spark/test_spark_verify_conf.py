"""``rmqd spark verify -c broker.conf``: the store and its geometry come from the broker.conf,
as with ``rmqd store verify -c``; a bad file is one line and exit 2."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from rmqd.spark.cli import store_settings, verify_main  # noqa: E402
from tests.spark.conftest import CLEAN, copy_store  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def test_store_settings_reads_store_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=b1\nstorePathRootDir={tmp_path}/s\nmappedFileSizeConsumeQueue=6001\n"
                    "maxHashSlotNum=100\nmessageDelayLevel=1s 2s\n")
    root, options, delay = store_settings(str(conf))
    assert root == f"{tmp_path}/s"
    # rounded up to whole 20-byte units, as MessageStoreConfig#getMappedFileSizeConsumeQueue
    assert options == {"mappedFileSizeConsumeQueue": "6020", "maxHashSlotNum": "100"}
    assert delay == "1s 2s"
    conf.write_text("storePathRootDir=/x\n")
    assert store_settings(str(conf)) == ("/x", {}, None)  # unset keys are inferred from the files


@pytest.mark.parametrize("text, expect", [
    ("maxHashSlotNum=many\n", "bad value for maxHashSlotNum"),
    ("storePathRootDir=/a\nstorePathCommitLog=/b/commitlog\n", "storePathCommitLog=/b/commitlog"),
])
def test_bad_conf_is_one_line(tmp_path, capsys, text, expect):
    conf = tmp_path / "broker.conf"
    conf.write_text(text)
    assert verify_main(["-c", str(conf)]) == 2
    err = capsys.readouterr().err
    assert expect in err and str(conf) in err and len(err.strip().splitlines()) == 1


def test_missing_conf_and_no_store(tmp_path, capsys):
    assert verify_main(["-c", str(tmp_path / "nope.conf")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert verify_main([]) == 2
    assert "give the store directory or -c broker.conf" in capsys.readouterr().err


def test_verify_with_conf(spark, tmp_path, capsys, monkeypatch):
    """The fixture's own broker.conf (relative storePathRootDir/storePathCommitLog, as RocketMQ
    reads them: from the working directory) verifies the store clean; a conf whose consume-queue
    size differs from the files makes the file-size check fail (so the value is really used)."""
    root = copy_store(CLEAN, tmp_path)
    conf = tmp_path / "broker.conf"
    conf.write_text((CLEAN / "broker.conf").read_text().replace("./store", f"./{root.name}"))
    monkeypatch.chdir(tmp_path)
    assert verify_main(["-c", "broker.conf", "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"rmqd spark verify {root}") and out.rstrip().endswith("OK")
    conf.write_text(f"storePathRootDir={root}\nmappedFileSizeConsumeQueue=4000\n")
    assert verify_main(["-c", str(conf), "--master", "local[2]", "--checks", "consumequeue"]) == 1
    assert "cq-file" in capsys.readouterr().out
