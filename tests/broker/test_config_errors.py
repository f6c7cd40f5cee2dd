"""Every config error names where the key was set (the file, or the command line) and the key
(issue 41): BrokerStartup's own checks after loading too, not only the values that do not
convert; and two listeners configured on one port are refused naming both keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqd.broker.config import ConfigError, load_broker_settings


@pytest.mark.parametrize("text,needle", [
    ("flushDiskType=SOMETIMES", "flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH"),
    ("brokerRole=slave", "brokerRole='slave' is not one of"),
    ("brokerRole=SLAVE", "brokerRole=SLAVE needs brokerId > 0"),
    ("listenPort=1", "listenPort=1 is out of range"),
    ("brokerId=-1", "brokerId=-1 must be >= 0"),
    ("grpcServerPort=-5", "grpcServerPort=-5 is out of range"),
    ("defaultTopicQueueNums=0", "defaultTopicQueueNums=0 must be > 0"),
    ("brokerName=", "brokerName must not be empty"),
    ("haBindAddress=replication-net", "haBindAddress='replication-net' is not an IP address"),
    ("metricsExporterType=PROMETHEUS", "metricsExporterType='PROMETHEUS' is not one of"),
    ("metricsPromExporterPort=70000", "metricsPromExporterPort=70000 is out of range"),
    ("messageDelayLevel=1s 5x", "messageDelayLevel='1s 5x' is not a list of delays"),
])
def test_every_value_error_names_the_file_and_the_key(tmp_path: Path, text: str, needle: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        load_broker_settings(conf)
    message = str(info.value)
    assert message.startswith(f"{conf}: ") and needle in message, message


def test_a_command_line_value_is_named_as_such() -> None:
    with pytest.raises(ConfigError) as info:
        load_broker_settings(None, {"listenPort": "2"})
    assert str(info.value).startswith("command line: listenPort=2 is out of range")


def test_two_listeners_on_one_port_are_refused_naming_both_keys(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=20911\ngrpcServerPort=20912\n")
    with pytest.raises(ConfigError) as info:
        load_broker_settings(conf)
    assert str(info.value) == (f"{conf}: grpcServerPort=20912 is the port of listenPort+1 (the HA port) too: "
                               "each listener needs its own port")
    conf.write_text("listenPort=20911\nmetricsExporterType=PROM\nmetricsPromExporterPort=20909\n")
    with pytest.raises(ConfigError, match=r"metricsPromExporterPort=20909 is the port of listenPort-2"):
        load_broker_settings(conf)
    conf.write_text("listenPort=20911\nmetricsPromExporterPort=20909\n")  # no exporter: no listener there
    assert load_broker_settings(conf).broker.metricsPromExporterPort == 20909
    # an address of its own: the same port number elsewhere binds
    conf.write_text("listenPort=20911\nmetricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.2\n"
                    "metricsPromExporterPort=20911\nhaBindAddress=127.0.0.3\ngrpcServerPort=20912\n")
    assert load_broker_settings(conf).proxy.grpcServerPort == 20912
