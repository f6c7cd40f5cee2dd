"""wire/codes.py: values and names pinned against Apache RocketMQ 4.9.8 / 5.x and the capture."""
from __future__ import annotations

import json

import pytest

from fixtures import CAPTURE as CAPTURE_DIR, require
from rmqd.wire.codes import (
    CURRENT_VERSION, LanguageCode, MQVersion, RequestCode, ResponseCode, SerializeType, version_desc,
)

CAPTURE = CAPTURE_DIR


@pytest.mark.parametrize(
    "name,value",
    [
        ("SEND_MESSAGE", 10), ("PULL_MESSAGE", 11), ("QUERY_MESSAGE", 12), ("QUERY_CONSUMER_OFFSET", 14),
        ("UPDATE_CONSUMER_OFFSET", 15), ("UPDATE_AND_CREATE_TOPIC", 17), ("SEARCH_OFFSET_BY_TIMESTAMP", 29),
        ("GET_MAX_OFFSET", 30), ("GET_MIN_OFFSET", 31), ("GET_EARLIEST_MSG_STORETIME", 32),
        ("VIEW_MESSAGE_BY_ID", 33), ("HEART_BEAT", 34), ("UNREGISTER_CLIENT", 35), ("CONSUMER_SEND_MSG_BACK", 36),
        ("END_TRANSACTION", 37), ("GET_CONSUMER_LIST_BY_GROUP", 38), ("CHECK_TRANSACTION_STATE", 39),
        ("NOTIFY_CONSUMER_IDS_CHANGED", 40), ("LOCK_BATCH_MQ", 41), ("UNLOCK_BATCH_MQ", 42),
        ("CHECK_CLIENT_CONFIG", 46), ("PUT_KV_CONFIG", 100), ("REGISTER_BROKER", 103), ("UNREGISTER_BROKER", 104),
        ("GET_ROUTEINFO_BY_TOPIC", 105), ("GET_BROKER_CLUSTER_INFO", 106), ("DELETE_TOPIC_IN_BROKER", 215),
        ("SEND_MESSAGE_V2", 310), ("SEND_BATCH_MESSAGE", 320), ("QUERY_DATA_VERSION", 322),
        ("UPDATE_AND_CREATE_ACL_CONFIG", 50), ("GET_BROKER_CLUSTER_ACL_INFO", 52),
        # 5.x additions
        ("POP_MESSAGE", 200050), ("ACK_MESSAGE", 200051), ("BATCH_ACK_MESSAGE", 200151), ("LITE_PULL_MESSAGE", 361),
        ("CONTROLLER_APPLY_BROKER_ID", 1013), ("AUTH_LIST_ACL", 3010),
    ],
)
def test_request_codes(name: str, value: int) -> None:
    assert RequestCode[name] == value
    assert RequestCode(value).name == name


def test_request_code_set_is_complete_and_unique() -> None:
    # 95 constants in 4.9.8 + 62 names that only 5.x (develop HEAD) has; no value is shared.
    assert len(RequestCode) == 157
    assert len({m.value for m in RequestCode}) == 157


def test_response_codes_including_sys_codes_and_reused_values() -> None:
    assert [ResponseCode(i).name for i in range(5)] == [
        "SUCCESS", "SYSTEM_ERROR", "SYSTEM_BUSY", "REQUEST_CODE_NOT_SUPPORTED", "TRANSACTION_FAILED"]
    assert ResponseCode.TOPIC_NOT_EXIST == 17
    assert ResponseCode.PULL_NOT_FOUND == 19
    assert ResponseCode.PULL_RETRY_IMMEDIATELY == 20
    assert ResponseCode.PULL_OFFSET_MOVED == 21
    assert ResponseCode.SUBSCRIPTION_NOT_LATEST == 25
    assert ResponseCode.FLOW_CONTROL == 215
    assert ResponseCode.NO_MESSAGE == 208
    # 209..211 changed meaning in 5.x: the 4.9.x names are canonical, the 5.x ones alias them.
    assert ResponseCode(209).name == "UPDATE_AND_CREATE_ACL_CONFIG_FAILED"
    assert ResponseCode.POLLING_FULL is ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    assert ResponseCode.BROKER_NOT_EXIST == 211
    assert ResponseCode.GO_AWAY == 1500
    assert ResponseCode.RPC_TIME_OUT == -1006


def test_language_codes() -> None:
    assert [m.name for m in LanguageCode] == [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
        "RUST", "NODE_JS"]
    assert [m.value for m in LanguageCode] == list(range(14))
    assert SerializeType.JSON == 0 and SerializeType.ROCKETMQ == 1


@pytest.mark.parametrize(
    "name,ordinal",
    [("V3_0_0_SNAPSHOT", 0), ("V3_0_0_FINAL", 15), ("V3_0_1_SNAPSHOT", 16), ("V4_4_0", 293), ("V4_5_2", 317),
     ("V4_6_0", 333), ("V4_8_0", 373), ("V4_9_0", 393), ("V4_9_4", 401), ("V4_9_8", 409), ("V5_0_0", 413),
     ("V5_3_3", 479), ("V5_3_4_SNAPSHOT", 480), ("V5_9_9", 611), ("HIGHER_VERSION", 612)],
)
def test_mq_version_ordinals(name: str, ordinal: int) -> None:
    assert MQVersion[name] == ordinal


def test_version_desc_clamps_like_java() -> None:
    assert version_desc(409) == "V4_9_8"
    assert version_desc(10_000) == "HIGHER_VERSION"
    assert len(MQVersion) == 613


# the 4.9.8 Java client's own requests (the capture's servers are Apache 4.9.7, the newest 4.9.x broker on
# Maven Central, told to answer as 4.9.8 by its rocketmq.remoting.version property: their frames say 409 by
# that setting, so only the client's requests are evidence of what a 4.9.8 peer sends)
CLIENT_REQUEST_CODES = {105, 11, 14, 15, 310, 320, 34, 35, 38}


def test_current_version_is_what_the_captured_4_9_8_client_sends() -> None:
    assert CURRENT_VERSION == 409
    versions = set()
    with open(require(CAPTURE / "remoting-frames.jsonl")) as f:
        for line in f:
            frame = json.loads(line)
            header = frame["header"]
            if isinstance(header, dict) and not header["flag"] & 1 and header["code"] in CLIENT_REQUEST_CODES:
                versions.add(header["version"])
    assert versions == {CURRENT_VERSION}
