"""broker.conf loading: RocketMQ key names and 4.9.x defaults, the split over BrokerConfig /
NettyServerConfig / MessageStoreConfig, and clear errors for unknown keys and bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqd.broker.config import BrokerSettings, ConfigError, load_broker_settings, read_properties_file

FIXTURE_CONF = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "rocketmq-4.9-store" / "broker.conf"


def test_defaults_are_rocketmq_4_9():
    s = BrokerSettings()
    b = s.broker
    assert (b.brokerClusterName, b.brokerId, b.brokerPermission, b.defaultTopicQueueNums) == ("DefaultCluster", 0, 6, 8)
    assert b.autoCreateTopicEnable and b.autoCreateSubscriptionGroup and b.longPollingEnable
    assert b.registerNameServerPeriod == 30000 and b.registerBrokerTimeoutMills == 6000
    assert b.enableUpdateConfig is False and b.enablePropertyFilter is False
    assert s.listen_port == 10911 and s.fast_listen_port == 10909
    assert s.netty_server.serverChannelMaxIdleTimeSeconds == 120
    assert s.store.haListenPort == 10912 and s.store.flushDiskType == "ASYNC_FLUSH"


def test_fixture_broker_conf_is_split_over_the_config_classes():
    s = load_broker_settings(FIXTURE_CONF)
    assert s.broker.brokerClusterName == "FixtureCluster" and s.broker.brokerName == "broker-fix"
    assert s.broker.namesrvAddr == "127.0.0.1:9877" and s.broker.brokerIP1 == "127.0.0.1"
    assert s.broker.transactionCheckInterval == 5000
    assert s.listen_port == 10921 and s.fast_listen_port == 10919
    assert s.store.mappedFileSizeCommitLog == 1048576 and s.store.maxIndexNum == 4000
    assert s.store.storePathRootDir == "./store"
    assert s.broker_addr == "127.0.0.1:10921"


def test_overrides_win_over_the_file(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=20911\nbrokerName=a\n")
    s = load_broker_settings(conf, {"listenPort": "30911"})
    assert s.listen_port == 30911 and s.broker.brokerName == "a"


def test_unknown_key_names_file_and_key(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=a\nautoCreateTopicEnabled=true\n")
    with pytest.raises(ConfigError, match=r"broker\.conf: unknown config key 'autoCreateTopicEnabled'"):
        load_broker_settings(conf)


@pytest.mark.parametrize("line,key", [
    ("brokerId=zero", "brokerId"),
    ("autoCreateTopicEnable=yes", "autoCreateTopicEnable"),
    ("mappedFileSizeCommitLog=1G", "mappedFileSizeCommitLog"),
    ("listenPort=1", "listenPort"),
])
def test_bad_values_are_clear(tmp_path, line, key):
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=key):
        load_broker_settings(conf)


def test_properties_syntax(tmp_path):
    conf = tmp_path / "x.conf"
    conf.write_text("# comment\n! other\nbrokerName = spaced \nbrokerClusterName:colon\n"
                    "namesrvAddr a:1;\\\n    b:2\nmsgTraceTopicName=caf\\u00e9\n\n")
    props = read_properties_file(conf)
    assert props == {"brokerName": "spaced ", "brokerClusterName": "colon", "namesrvAddr": "a:1;b:2",
                     "msgTraceTopicName": "café"}
    s = load_broker_settings(conf)
    assert s.broker.brokerName == "spaced"


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_broker_settings(tmp_path / "nope.conf")


def test_all_properties_round_trip_through_properties_text(tmp_path):
    s = BrokerSettings()
    conf = tmp_path / "all.conf"
    conf.write_text("".join(line for line in s.to_properties().splitlines(keepends=True)
                            if not line.startswith(("rocketmqHome=", "namesrvAddr=", "storePathCommitLog="))))
    again = load_broker_settings(conf)
    assert again.broker == s.broker and again.netty_server == s.netty_server
