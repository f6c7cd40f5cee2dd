"""`rmqd` as a user runs it: subprocesses on free loopback ports, the ready line, SIGTERM ->
exit 0, one-line errors with a non-zero exit and never a traceback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
import trio

from fixtures import CLEAN, require
from rmqd.broker.remoting_client import RemotingClient
from support import REPO, free_broker_port, free_port, rmqd, rmqd_command, run_once, stop, wait_ready
from rmqd.wire.bodies import ClusterInfo
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import make_request

pytestmark = pytest.mark.timeout(60)

FIXTURE_CONF = CLEAN / "broker.conf"
FIXTURE_STORE = CLEAN / "store"


def invoke(addr: str, code: int, ext: dict | None = None):
    async def main():
        async with RemotingClient() as client:
            return await client.invoke(addr, make_request(code, ext), 5)
    return trio.run(main)


def test_namesrv_ready_answers_and_exits_0_on_sigterm(tmp_path):
    port = free_port()
    proc = rmqd("namesrv", "--host", "127.0.0.1", "--port", str(port), "--kv-config", str(tmp_path / "kv.json"))
    try:
        line = wait_ready(proc)
        assert line == f"rmqd ready namesrv=127.0.0.1:{port}"
        resp = invoke(f"127.0.0.1:{port}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert "Traceback" not in err


def test_namesrv_sigint_also_exits_0(tmp_path):
    proc = rmqd("namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(tmp_path / "kv.json"))
    wait_ready(proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


def test_serve_registers_broker_and_stops_cleanly(tmp_path):
    ns_port, br_port = free_port(), free_broker_port()
    store = tmp_path / "store"
    proc = rmqd("serve", "--host", "127.0.0.1", "--namesrv-port", str(ns_port), "--broker-port", str(br_port),
                "--store", str(store), "--kv-config", str(tmp_path / "kv.json"))
    try:
        line = wait_ready(proc)
        assert line.startswith(f"rmqd ready namesrv=127.0.0.1:{ns_port} broker=127.0.0.1:{br_port} "
                               f"fast=127.0.0.1:{br_port - 2}")
        assert str(store) in line
        info = ClusterInfo.decode(invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_BROKER_CLUSTER_INFO).body)
        (broker,) = info.brokerAddrTable.values()
        assert broker.brokerAddrs == {0: f"127.0.0.1:{br_port}"}
        route = invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert route.code == 0
        # the fast port answers too
        fast = invoke(f"127.0.0.1:{br_port - 2}", 31999)
        assert fast.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert not (store / "abort").exists()


def test_broker_alone_registers_with_a_name_server(tmp_path):
    ns_port, br_port = free_port(), free_broker_port()
    ns = rmqd("namesrv", "--host", "127.0.0.1", "--port", str(ns_port), "--kv-config", str(tmp_path / "kv.json"))
    try:
        wait_ready(ns)
        conf = tmp_path / "broker.conf"
        conf.write_text(f"brokerClusterName=C9\nbrokerName=b9\nlistenPort={br_port}\nbrokerIP1=127.0.0.1\n"
                        f"storePathRootDir={tmp_path / 's'}\n")
        br = rmqd("broker", "-n", f"127.0.0.1:{ns_port}", "-c", str(conf), "--host", "127.0.0.1")
        try:
            assert "broker=127.0.0.1:%d" % br_port in wait_ready(br)
            info = ClusterInfo.decode(invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_BROKER_CLUSTER_INFO).body)
            assert info.clusterAddrTable == {"C9": ["b9"]}
        finally:
            code, err = stop(br)
        assert code == 0, err
        # unregistered on the way out
        info = ClusterInfo.decode(invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_BROKER_CLUSTER_INFO).body)
        assert info.brokerAddrTable == {}
    finally:
        stop(ns)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rmqd: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_apache_style_broker_conf_starts_serve_with_one_warning_per_ignored_key(tmp_path):
    """A tutorial broker.conf (keys RocketMQ 4.9 ignores, the old spelling mapedFileSizeCommitLog)
    starts rmqd as it starts Apache's broker: one warning line per ignored key naming the file
    and the key, the store where 4.9 puts it (storePathRootDir), a clean stop."""
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=C1\nbrokerName=b1\nbrokerIP1=127.0.0.1\nstorePathRootDir={root}\n"
                    f"storePathCommitLog={root}/commitlog\nstorePathConsumeQueue={elsewhere}/consumequeue\n"
                    f"storePathIndex={elsewhere}/index\nstoreCheckpoint={elsewhere}/checkpoint\n"
                    f"abortFile={elsewhere}/abort\nmapedFileSizeCommitLog=1048576\nmaxHashSlotNum=1000\n"
                    "maxIndexNum=4000\n")
    proc = rmqd("serve", "-c", str(conf), "--host", "127.0.0.1", "--namesrv-port", str(free_port()),
                "--broker-port", str(free_broker_port()), "--kv-config", str(tmp_path / "kv.json"))
    try:
        assert f"store={root}" in wait_ready(proc)
        assert (root / "checkpoint").is_file() and (root / "abort").is_file()
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert not elsewhere.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 5 and "Traceback" not in err, err
    for key in ("storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile", "mapedFileSizeCommitLog"):
        (line,) = [x for x in lines if f"{conf}: {key} is ignored" in x]
        assert "WARNING" in line


def test_namesrv_conf_takes_netty_keys_and_warns_on_others(tmp_path):
    conf = tmp_path / "namesrv.conf"
    port = free_port()
    conf.write_text(f"listenPort={port}\nserverWorkerThreads=8\norderMessageEnable=true\nrocketmqHome=/opt/rmq\n"
                    "listenPortt=1\n")
    proc = rmqd("namesrv", "-c", str(conf), "--host", "127.0.0.1", "--kv-config", str(tmp_path / "kv.json"))
    try:
        assert wait_ready(proc) == f"rmqd ready namesrv=127.0.0.1:{port}"
    finally:
        code, err = stop(proc)
    assert code == 0, err
    (line,) = err.strip().splitlines()
    assert f"{conf}: listenPortt is ignored" in line and "did you mean listenPort?" in line
    conf.write_text("serverWorkerThreads=eight\n")
    assert_one_line_error(run_once("namesrv", "-c", str(conf)), str(conf), "serverWorkerThreads")


def test_bad_config_value_and_missing_file(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("defaultTopicQueueNums=many\n")
    assert_one_line_error(run_once("broker", "-n", "127.0.0.1:9876", "-c", str(conf)), "defaultTopicQueueNums")
    assert_one_line_error(run_once("serve", "-c", str(tmp_path / "missing.conf")), "does not exist")


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = run_once("namesrv", "--host", "127.0.0.1", "--port", str(port), "--kv-config",
                          str(tmp_path / "kv.json"))
    assert_one_line_error(result, "address already in use")


def test_unusable_store_is_one_line(tmp_path):
    not_dir = tmp_path / "file"
    not_dir.write_text("x")
    assert_one_line_error(run_once("serve", "--store", str(not_dir), "--namesrv-port", "0"), "not a directory")
    assert_one_line_error(run_once("serve", "--store", str(tmp_path / "no" / "such" / "store"),
                                   "--namesrv-port", "0"), "does not exist")
    assert_one_line_error(run_once("store", "verify", str(tmp_path / "nothing")), "does not exist")


def test_help_and_usage():
    result = run_once("--help")
    assert result.returncode == 0 and "serve" in result.stdout and "namesrv" in result.stdout
    assert run_once().returncode == 2
    assert run_once("serve", "--broker-port", "notanumber").returncode == 2


def test_store_dump_and_verify_on_fixture_store():
    store = require(FIXTURE_STORE)
    verify = run_once("store", "verify", str(store))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "Traceback" not in verify.stderr
    dump = run_once("store", "dump", str(store))
    assert dump.returncode == 0, dump.stderr
    assert dump.stdout.count("\n") > 10


def test_spark_subcommands_reach_the_spark_entry_points(tmp_path):
    """`rmqd spark verify|export` hand their arguments to spark/cli.py (Spark itself is exercised
    by tests/spark); usage errors stay one line with spark's exit codes."""
    assert_one_line_error(run_once("spark"), "verify, export or package")
    helped = run_once("spark", "verify", "--help")
    assert helped.returncode == 0 and "--against" in helped.stdout
    missing = run_once("spark", "verify", str(tmp_path / "nothing"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "Traceback" not in missing.stderr and missing.stderr.strip().count("\n") == 0
    exported = run_once("spark", "export", "--help")
    assert exported.returncode == 0 and "--format" in exported.stdout


def test_store_verify_takes_the_broker_conf_the_store_was_written_with(tmp_path):
    """A store written with non-default messageDelayLevel has SCHEDULE_TOPIC_XXXX tag codes that
    only check out against that configuration; -c passes it."""
    store = require(FIXTURE_STORE)
    ok = run_once("store", "verify", "-c", str(FIXTURE_CONF), str(store))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    odd = tmp_path / "odd.conf"
    odd.write_text(FIXTURE_CONF.read_text() + "messageDelayLevel=1s 2s 3s\n")
    bad = run_once("store", "verify", "-c", str(odd), str(store))
    assert bad.returncode == 1
    assert "SCHEDULE_TOPIC_XXXX" in bad.stdout and "Traceback" not in bad.stderr
    assert_one_line_error(run_once("store", "verify", "-c", str(tmp_path / "none.conf"), str(store)))


def test_two_broker_names_and_a_slave_register_with_one_name_server(tmp_path):
    """`rmqd namesrv` + three `rmqd broker` processes: broker-a master (id 0) and slave (id 1),
    broker-b master; clients see all of them in the cluster info and in topic routes."""
    ns_port = free_port()
    ns = rmqd("namesrv", "--host", "127.0.0.1", "--port", str(ns_port), "--kv-config", str(tmp_path / "kv.json"))
    brokers: list[subprocess.Popen] = []
    try:
        wait_ready(ns)
        addrs = {}
        for name, broker_id, role in (("broker-a", 0, "ASYNC_MASTER"), ("broker-a", 1, "SLAVE"),
                                      ("broker-b", 0, "ASYNC_MASTER")):
            port = free_broker_port()
            conf = tmp_path / f"{name}-{broker_id}.conf"
            conf.write_text(f"brokerClusterName=MultiCluster\nbrokerName={name}\nbrokerId={broker_id}\n"
                            f"brokerRole={role}\nlistenPort={port}\nbrokerIP1=127.0.0.1\n"
                            f"storePathRootDir={tmp_path / f's-{name}-{broker_id}'}\n"
                            "mappedFileSizeCommitLog=1048576\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n")
            proc = rmqd("broker", "-n", f"127.0.0.1:{ns_port}", "-c", str(conf), "--host", "127.0.0.1")
            brokers.append(proc)
            wait_ready(proc)
            addrs[(name, broker_id)] = f"127.0.0.1:{port}"
        info = ClusterInfo.decode(invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_BROKER_CLUSTER_INFO).body)
        assert sorted(info.clusterAddrTable["MultiCluster"]) == ["broker-a", "broker-b"]
        assert info.brokerAddrTable["broker-a"].brokerAddrs == {0: addrs[("broker-a", 0)], 1: addrs[("broker-a", 1)]}
        assert info.brokerAddrTable["broker-b"].brokerAddrs == {0: addrs[("broker-b", 0)]}
        # TBW102 lives on every broker: its route names both broker names and the slave
        route = invoke(f"127.0.0.1:{ns_port}", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert route.code == ResponseCode.SUCCESS
        body = bytes(route.body).decode()
        for addr in addrs.values():
            assert addr in body
        # a slave refuses topic administration as RocketMQ's does
        refused = invoke(addrs[("broker-a", 1)], RequestCode.UPDATE_AND_CREATE_TOPIC,
                         {"topic": "T1", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
                          "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        assert refused.code == ResponseCode.SYSTEM_ERROR and "slave" in refused.remark
    finally:
        for proc in brokers:
            code, err = stop(proc)
            assert code == 0, err
        stop(ns)


def test_version():
    from importlib.metadata import version

    result = run_once("--version")
    assert result.returncode == 0 and result.stdout.startswith(f"rmqd {version('rmqd')} (")  # (+ compiled status)


def test_spark_help_lists_its_commands():
    result = run_once("spark", "--help")
    assert result.returncode == 0, result.stderr
    for word in ("verify", "export", "package", "pip install 'rmqd[spark]'"):
        assert word in result.stdout
    assert run_once("spark", "package", "--help").returncode == 0


@pytest.mark.parametrize("where", ["before", "after"])
def test_log_level_before_or_after_the_subcommand(tmp_path, where):
    args = ["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(tmp_path / "kv.json")]
    level = ["--log-level", "INFO"]
    proc = rmqd(*(level + args if where == "before" else args + level))
    wait_ready(proc)
    code, err = stop(proc)
    assert code == 0 and "INFO rmqd: received SIGTERM, shutting down" in err, err


def test_log_level_after_a_spark_subcommand_is_rmqd_s(tmp_path):
    """`rmqd spark package OUT --log-level DEBUG`: the option is taken by rmqd, not handed to
    the Spark command (whose parser would refuse it)."""
    result = run_once("spark", "package", str(tmp_path / "rmqd.zip"), "--log-level", "DEBUG")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "rmqd.zip").is_file()


@pytest.mark.parametrize("command", ["verify", "export"])
def test_spark_without_the_spark_extra_prints_the_install_hint(tmp_path, command):
    """Simulated as a user without `rmqd[spark]` meets it: pyspark cannot be imported."""
    store = require(FIXTURE_STORE)
    argv = ["spark", command, str(store)] + ([str(tmp_path / "out")] if command == "export" else [])
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "from rmqd.broker.cli import main\n"
            f"sys.exit(main({argv!r}))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"rmqd spark {command}: needs rmqd's spark extra: pip install 'rmqd[spark]' (no module named 'pyspark')"]


def test_store_verify_takes_the_store_from_the_conf(tmp_path):
    """`rmqd store verify -c broker.conf` alone verifies the store that `rmqd serve -c` would
    use: storePathRootDir (and its storePathCommitLog), else ./store of the working directory."""
    store = require(FIXTURE_STORE).resolve()
    keep = [line for line in FIXTURE_CONF.read_text().splitlines() if not line.startswith("storePath")]
    conf = tmp_path / "broker.conf"
    conf.write_text("\n".join(keep + [f"storePathRootDir={store}", f"storePathCommitLog={store}/commitlog"]) + "\n")
    result = run_once("store", "verify", "-c", str(conf))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith(f"store {store}: OK")
    # without storePathRootDir: ./store, as for serve
    bare = tmp_path / "bare.conf"
    bare.write_text("\n".join(keep) + "\n")
    work = tmp_path / "work"
    shutil.copytree(store, work / "store")
    result = run_once("store", "verify", "-c", str(bare), cwd=work)
    assert result.returncode == 0 and result.stdout.strip().endswith("store store: OK"), result.stdout + result.stderr
    # the commit log where the conf puts it
    moved = tmp_path / "moved"
    shutil.copytree(store, moved)
    (moved / "commitlog").rename(tmp_path / "cl")
    conf.write_text("\n".join(keep + [f"storePathRootDir={moved}", f"storePathCommitLog={tmp_path / 'cl'}"]) + "\n")
    assert run_once("store", "verify", "-c", str(conf)).returncode == 0
    assert_one_line_error(run_once("store", "verify"), "store directory or -c broker.conf")


def test_store_verify_progress_is_plain_lines_off_a_terminal(tmp_path):
    store = require(FIXTURE_STORE)
    result = subprocess.run(rmqd_command("store", "verify", str(store)), capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, RMQD_PROGRESS_INTERVAL="0"))
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) > 3 and all(line.startswith(f"verifying {store}: ") for line in lines), result.stderr
    assert "\r" not in result.stderr and lines[-1].startswith(f"verifying {store}: 100% (")
    quiet = run_once("store", "verify", str(store))  # the default interval: a short verify says nothing
    assert quiet.returncode == 0 and quiet.stderr == ""
