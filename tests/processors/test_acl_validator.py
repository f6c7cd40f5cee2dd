"""processors.acl + broker.acl_config: 4.9.8's plain ACL rules, unit and through a live broker.

The expected remarks are 4.9.8's: the AclException message from PlainPermissionManager /
PlainAccessValidator and the Java frame RemotingHelper.exceptionSimpleDesc adds.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings, strategies as st

from rmqd.broker.acl_config import AclService
from rmqd.broker.config import ConfigError
from broker_harness import BROKER_NAME, broker_running, decode_pull_body
from rmqd.processors.acl import (
    ADMIN_CODES, DEFAULT_ADMIN_CODES, DENY, PUB, SUB, AclError, AclState, StoredMessage, address_matcher, admin_codes,
    build_account, check_permission, expand_ipv6, parse_perm, parse_request, validate,
)
from rmqd.wire.acl import sign_fields
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request
from rmqd.wire.message import encode_properties
from support import wait_until

AK, SK = "RocketMQ", "12345678"
ADMIN_AK, ADMIN_SK = "rocketmq2", "12345678"
EXC = "org.apache.rocketmq.acl.common.AclException"
MGR = "org.apache.rocketmq.acl.plain.PlainPermissionManager"

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
- 10.10.103.*
- 192.168.0.*

accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - topicA=DENY
  - topicB=PUB|SUB
  - topicC=SUB
  groupPerms:
  - groupA=DENY
  - groupB=PUB|SUB
  - groupC=SUB

- accessKey: rocketmq2
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
"""


def _state(text: str = PLAIN_ACL, tmp: Path | None = None) -> AclState:
    import yaml
    data = yaml.safe_load(text)
    state = AclState()
    state.global_white = [address_matcher(str(a)) for a in data.get("globalWhiteRemoteAddresses") or []]
    for item in data["accounts"]:
        acc = build_account(item)
        state.accounts[acc.access_key] = acc
    return state


def _send_ext(topic: str, group: str = "groupB", queue_id: int = 0) -> dict[str, str]:
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties({"WAIT": "true"}),
            "j": "0", "k": "false", "m": "false", "n": BROKER_NAME}


def _signed(code: int, ext: dict[str, str] | None, body: bytes | None, ak: str = AK, sk: str = SK) -> RemotingCommand:
    return make_request(code, sign_fields(ext or {}, body, ak, sk), body)


def _verdict(cmd: RemotingCommand, addr: str = "127.0.0.1:5555", state: AclState | None = None) -> str | None:
    try:
        validate(parse_request(cmd, addr), state or _state())
    except AclError as exc:
        return exc.remark
    return None


# -- permissions and address patterns --------------------------------------------------------

def test_perm_strings_and_checks() -> None:
    assert [parse_perm(s) for s in ("PUB", "SUB", " PUB|SUB ", "SUB|PUB", "DENY", "pub", None)] == \
        [PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY]
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(PUB, DENY | PUB)
    assert check_permission(2, PUB) and not check_permission(2, DENY)
    assert ADMIN_CODES == {17, 25, 215, 200, 207}


@pytest.mark.parametrize("pattern,yes,no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3", "192.168.1.1"]),
    ("192.168.1-200.*", ["192.168.1.9", "192.168.200.0"], ["192.168.201.1", "192.167.5.5"]),
    ("10.10.103.*", ["10.10.103.7"], ["10.10.104.7"]),
    ("10.10.103.5-9", ["10.10.103.5", "10.10.103.9"], ["10.10.103.4", "10.10.103.10"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("127.0.0.1,127.0.0.3", ["127.0.0.3"], ["127.0.0.2"]),
    ("1:2::3:*", ["1:2::3:5", "1:2:0:0:0:0:3:ffff"], ["1:2::4:5"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
    ("", [], ["127.0.0.1"]),
])
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    match = address_matcher(pattern)
    assert all(match(a) for a in yes)
    assert not any(match(a) for a in no)


@pytest.mark.parametrize("pattern,message", [
    ("1.2.3", "Netaddress examine Exception netaddress is 1.2.3"),
    ("1.2.3.300", "Netaddress examine Exception netaddress is 1.2.3.300"),
    ("1.2.3.{1,x}", "Netaddress examine Exception netaddress is 1.2.3.x"),
    ("1.2.3.5-2", "RangeRemoteAddressStrategy netaddress examine scope Exception start is 5 , end is 2"),
    ("1.2.3.-2", "RangeRemoteAddressStrategy netaddress examine scope Exception value -2 "),
])
def test_bad_patterns_refused_with_4_9_8_words(pattern: str, message: str) -> None:
    with pytest.raises(AclError) as err:
        address_matcher(pattern)
    assert err.value.message == message


def test_expand_ipv6() -> None:
    assert expand_ipv6("::1", 8) == "0000:0000:0000:0000:0000:0000:0000:0001"
    assert expand_ipv6("fe80::a:1", 8) == "FE80:0000:0000:0000:0000:0000:000A:0001"


def test_account_checks() -> None:
    with pytest.raises(AclError) as err:
        build_account({"accessKey": "short", "secretKey": "12345678"})
    assert err.value.message == ("The accessKey=short and secretKey=12345678 cannot be null "
                                 "and length should longer than 6")
    with pytest.raises(AclError) as err:
        build_account({"accessKey": "RocketMQ", "secretKey": "12345678", "topicPerms": ["a=b=c"]})
    assert err.value.message == "Parse resource permission failed for topic:a=b=c"


# -- what each code needs ----------------------------------------------------------------------

def test_parse_resources_per_code() -> None:
    p = parse_request(make_request(RequestCode.SEND_MESSAGE_V2, _send_ext("T", "G"), b"x"), "1.2.3.4:9")
    assert p.remote_ip == "1.2.3.4" and p.resources == {"T": PUB}
    p = parse_request(make_request(RequestCode.SEND_MESSAGE_V2, _send_ext("%RETRY%G", "G"), b"x"), "1.2.3.4:9")
    assert p.resources == {"%RETRY%G": SUB}
    p = parse_request(make_request(RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "G"}, b"x"), "h:1")
    assert p.resources == {"T": PUB}
    p = parse_request(make_request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}), "[::1]:9")
    assert p.remote_ip == "::1" and p.resources == {"T": SUB, "%RETRY%G": SUB}
    p = parse_request(make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": "1"}), "h:1")
    assert p.resources == {"%RETRY%G": SUB}
    p = parse_request(make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "G", "topic": "T", "queueId": "1", "commitOffset": "5"}), "h:1")
    assert p.resources == {"%RETRY%G": SUB, "T": SUB}
    body = json.dumps({"clientID": "c", "producerDataSet": [{"groupName": "P"}], "consumerDataSet": [
        {"groupName": "G", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "T2"}]}]}).encode()
    p = parse_request(make_request(RequestCode.HEART_BEAT, {}, body), "h:1")
    assert p.resources == {"%RETRY%G": SUB, "T1": SUB, "T2": SUB}
    p = parse_request(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), "h:1")
    assert p.resources is None
    # 4.9.8's header decoder skips a missing field: nothing needed, no error here
    assert parse_request(make_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}), "h:1").resources is None


def test_unique_key_flag_left_out_of_the_signed_content() -> None:
    ext = {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
    cmd = make_request(RequestCode.QUERY_MESSAGE, sign_fields(ext, None, AK, SK))
    cmd.ext_fields["_UNIQUE_KEY_QUERY"] = "true"  # 4.9.8 does not count it
    assert parse_request(cmd, "h:1").content == parse_request(
        make_request(RequestCode.QUERY_MESSAGE, sign_fields(ext, None, AK, SK)), "h:1").content


# -- verdicts ----------------------------------------------------------------------------------

def test_verdicts_and_remarks() -> None:
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x")) is None
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicA"), b"x")) == \
        f"{EXC}: No default permission for topic:topicA, {MGR}.checkPerm(PlainPermissionManager.java:611)"
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicC"), b"x")) == \
        f"{EXC}: No default permission for topic:topicC, {MGR}.checkPerm(PlainPermissionManager.java:611)"
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("other"), b"x")) == \
        f"{EXC}: No default permission for topic:other, {MGR}.checkPerm(PlainPermissionManager.java:606)"
    # pull: topicC SUB, groupA DENY
    pull = {"topic": "topicC", "consumerGroup": "groupA", "queueId": "0"}
    assert _verdict(_signed(RequestCode.PULL_MESSAGE, pull, None)) == \
        f"{EXC}: No default permission for group:groupA, {MGR}.checkPerm(PlainPermissionManager.java:611)"
    assert _verdict(_signed(RequestCode.PULL_MESSAGE, dict(pull, consumerGroup="anyGroup"), None)) is None
    unsigned = make_request(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x")
    assert _verdict(unsigned) == f"{EXC}: No accessKey is configured, {MGR}.validate(PlainPermissionManager.java:664)"
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x", ak="nobody1")) == \
        f"{EXC}: No acl config for nobody1, {MGR}.validate(PlainPermissionManager.java:668)"
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x", sk="wrong-secret")) == \
        f"{EXC}: Check signature failed for accessKey=RocketMQ, {MGR}.validate(PlainPermissionManager.java:684)"
    replay = _signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x")
    replay.ext_fields["e"] = "3"
    assert "Check signature failed" in (_verdict(replay) or "")
    replay = _signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"x")
    replay.body = b"y"
    assert "Check signature failed" in (_verdict(replay) or "")
    admin = _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"}, None)
    assert _verdict(admin) == (f"{EXC}: Need admin permission for request code=17, but accessKey=RocketMQ is not, "
                               f"{MGR}.checkPerm(PlainPermissionManager.java:581)")
    assert _verdict(_signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, None, ADMIN_AK, ADMIN_SK)) is None
    # the trace topic is always publishable by a signed account
    assert _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("RMQ_SYS_TRACE_TOPIC"), b"x")) is None


def test_white_lists_skip_the_signature() -> None:
    unsigned = make_request(RequestCode.SEND_MESSAGE_V2, _send_ext("topicA"), b"x")
    assert _verdict(unsigned, "10.10.103.9:1000") is None          # global white list
    assert _verdict(unsigned, "10.10.104.9:1000") is not None
    bad_sig = _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, None, ADMIN_AK, "not-the-secret")
    assert _verdict(bad_sig, "192.168.1.77:1") is None             # the account's white list
    assert "Check signature failed" in (_verdict(bad_sig, "192.168.2.77:1") or "")


@settings(deadline=None)  # HMACs of random fields: no time bound on a shared, loaded box
@given(st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=10), max_size=6),
       st.binary(max_size=64), st.text(min_size=1, max_size=6))
def test_signed_requests_pass_and_any_change_fails(ext: dict[str, str], body: bytes, key: str) -> None:
    ext.pop("Signature", None)
    ext.pop("AccessKey", None)
    ext.pop("_UNIQUE_KEY_QUERY", None)
    cmd = _signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, body or None)
    assert _verdict(cmd, "1.1.1.1:1") is None
    changed = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(cmd.ext_fields), body or None)
    changed.ext_fields[key] = changed.ext_fields.get(key, "") + "!"
    if key == "Signature":
        assert _verdict(changed, "1.1.1.1:1") is not None
    elif key not in ("_UNIQUE_KEY_QUERY",):
        assert "Check signature failed" in (_verdict(changed, "1.1.1.1:1") or "") or \
            "No acl config" in (_verdict(changed, "1.1.1.1:1") or "")


# -- config files ------------------------------------------------------------------------------

def test_service_files_and_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rocketmqHome"):
        AclService(None)
    (tmp_path / "conf").mkdir()
    svc = AclService(tmp_path)              # the default file is created empty
    assert (tmp_path / "conf" / "plain_acl.yml").read_text() == ""
    assert svc.state.accounts == {}
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    (tmp_path / "conf" / "acl").mkdir()
    (tmp_path / "conf" / "acl" / "more.yml").write_text(
        "accounts:\n- accessKey: another1\n  secretKey: 87654321\n  admin: true\n"
        "- accessKey: RocketMQ\n  secretKey: differentsecret\n")
    assert svc.reload_if_changed() and not svc.reload_if_changed()
    assert set(svc.state.accounts) == {"RocketMQ", "rocketmq2", "another1"}
    assert svc.state.accounts["RocketMQ"].secret_key == "differentsecret"   # conf/acl/ is read first
    (tmp_path / "conf" / "plain_acl.yml").write_text("accounts: [\n")
    assert not svc.reload_if_changed()                     # a broken edit keeps the rules in force
    assert "rocketmq2" in svc.state.accounts
    with pytest.raises(ConfigError, match="plain_acl.yml: not valid YAML"):
        AclService(tmp_path)
    (tmp_path / "conf" / "plain_acl.yml").write_text("accounts:\n- accessKey: ab\n  secretKey: cd\n")
    with pytest.raises(ConfigError, match="cannot be null and length should longer than 6"):
        AclService(tmp_path)


# -- through a live broker ---------------------------------------------------------------------

def _home(tmp_path: Path, text: str = PLAIN_ACL) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(text)
    return home


def _run(tmp_path: Path, fn, text: str = PLAIN_ACL, timeout: float = 40.0) -> None:  # type: ignore[no-untyped-def]
    home = _home(tmp_path, text)

    async def main() -> None:
        with trio.fail_after(timeout):
            async with broker_running(tmp_path / "store", with_namesrv=False, aclEnable="true",
                                      rocketmqHome=str(home), autoCreateTopicEnable="false") as h:
                await fn(h, home)
    trio.run(main)


async def _invoke(h, cmd: RemotingCommand) -> RemotingCommand:  # type: ignore[no-untyped-def]
    return await h.client.invoke(h.broker_addr, cmd, 5.0)


def test_live_send_pull_and_refusals(tmp_path: Path) -> None:
    async def scenario(h, home: Path) -> None:  # type: ignore[no-untyped-def]
        ok = await _invoke(h, _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "topicB", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"},
            None, ADMIN_AK, ADMIN_SK))
        # the admin account's white list is 192.168.1.*: from loopback it must sign, and does
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        refused = await _invoke(h, _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "topicZ", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, None))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark.startswith(f"{EXC}: Need admin permission for request code=17")
        assert h.role.topic_config_manager.select_topic_config("topicZ") is None

        sent = await _invoke(h, _signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"hello"))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        h.wait_dispatched()
        max_before = h.role.store.get_max_offset_in_queue("topicB", 0)
        for cmd in (make_request(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"unsigned"),
                    _signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"bad", sk="wrongsecret")):
            r = await _invoke(h, cmd)
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(EXC)
        replay = _signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"hello")
        replay.body = b"changed"
        r = await _invoke(h, replay)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == (f"{EXC}: Check signature failed for accessKey=RocketMQ, "
                            f"{MGR}.validate(PlainPermissionManager.java:684)")
        h.wait_dispatched()  # the refusals were answered: whatever they wrote is dispatched by now
        assert h.role.store.get_max_offset_in_queue("topicB", 0) == max_before == 1

        pull = {"consumerGroup": "groupB", "topic": "topicB", "queueId": "0", "queueOffset": "0",
                "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0",
                "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
        hb = json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": "groupB", "messageModel": "CLUSTERING", "unitMode": False, "subscriptionDataSet": [{
                "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                "subVersion": 0, "tagsSet": [], "topic": "topicB"}]}]}).encode()
        beat = await _invoke(h, _signed(RequestCode.HEART_BEAT, {}, hb))
        assert beat.code == ResponseCode.SUCCESS, beat.remark
        got = await _invoke(h, _signed(RequestCode.PULL_MESSAGE, pull, None))
        assert got.code == ResponseCode.SUCCESS, got.remark
        assert [m.body for m in decode_pull_body(got)] == [b"hello"]
        denied = await _invoke(h, _signed(RequestCode.PULL_MESSAGE, dict(pull, consumerGroup="groupA"), None))
        assert denied.code == ResponseCode.SYSTEM_ERROR
        assert denied.remark == (f"{EXC}: No default permission for group:groupA, "
                                 f"{MGR}.checkPerm(PlainPermissionManager.java:611)")
    _run(tmp_path, scenario)


def test_live_reload_on_file_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQD_ACL_WATCH_INTERVAL_MS", "100")

    async def scenario(h, home: Path) -> None:  # type: ignore[no-untyped-def]
        route = {"topic": "TBW102"}
        r = await _invoke(h, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, route))
        assert r.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in r.remark
        (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL.replace("- 192.168.0.*", "- 127.0.0.1"))
        answers: list = []

        async def admitted() -> bool:  # unsigned from a now white-listed address
            answers.append(await _invoke(h, make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, route)))
            return answers[-1].code != ResponseCode.SYSTEM_ERROR
        await wait_until(admitted, 5, "the reloaded plain_acl.yml to white-list 127.0.0.1", interval=0.05)
        assert h.role.acl.reloads == 1
    _run(tmp_path, scenario)


def test_live_oneway_refusal_writes_nothing(tmp_path: Path) -> None:
    async def scenario(h, home: Path) -> None:  # type: ignore[no-untyped-def]
        ext = {"consumerGroup": "groupB", "topic": "topicB", "queueId": "0", "commitOffset": "7"}
        await h.client.invoke_oneway(h.broker_addr, make_request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        await trio.sleep(0.2)  # the behaviour under test: nothing is written (no answer to wait for)
        assert h.role.consumer_offset_manager.query_offset("groupB", "topicB", 0) == -1
        await h.client.invoke_oneway(h.broker_addr, _signed(RequestCode.UPDATE_CONSUMER_OFFSET, ext, None))
        await wait_until(lambda: h.role.consumer_offset_manager.query_offset("groupB", "topicB", 0) == 7, 5,
                         "the signed oneway offset update")
    _run(tmp_path, scenario)


def test_first_refused_resource_is_javas_hashmap_order() -> None:
    # Java 17 HashMap over %RETRY%cg,T1,T2,T3,%RETRY%zz,topicX,Ω iterates
    # %RETRY%cg,%RETRY%zz,Ω,topicX,T1,T2,T3 (checked with java); Ω is the first refused topic
    body = json.dumps({"clientID": "c", "consumerDataSet": [{"groupName": "cg", "subscriptionDataSet": [
        {"topic": t} for t in ("T1", "T2", "T3", "topicX", "Ω")]}]}).encode()
    assert _verdict(_signed(RequestCode.HEART_BEAT, {}, body)) == \
        f"{EXC}: No default permission for topic:Ω, {MGR}.checkPerm(PlainPermissionManager.java:606)"


def test_heartbeat_without_body() -> None:
    assert _verdict(_signed(RequestCode.HEART_BEAT, {}, None)) == (
        f'{EXC}: Cannot read the array length because "bytes" is null, '
        "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)")


# -- issue 22: the permission table beyond 4.9.8 ------------------------------------------------

def _lookup(table: dict[int, StoredMessage]):  # type: ignore[no-untyped-def]
    return table.get


def test_batch_send_needs_pub_like_v2() -> None:
    """D5: SEND_BATCH_MESSAGE (320) is checked as SEND_MESSAGE_V2 (310): 4.9.8 let it through."""
    for topic in ("topicA", "topicC", "other"):
        v2 = _verdict(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext(topic), b"x"))
        batch = _verdict(_signed(RequestCode.SEND_BATCH_MESSAGE, _send_ext(topic), b"x"))
        assert v2 is not None and batch == v2
    assert _verdict(_signed(RequestCode.SEND_BATCH_MESSAGE, _send_ext("topicB"), b"x")) is None
    assert parse_request(make_request(RequestCode.SEND_BATCH_MESSAGE, _send_ext("%RETRY%G", "G"), b"x"),
                         "h:1").resources == {"%RETRY%G": SUB}


@pytest.mark.parametrize("code", [50, 51, 52, 53, 54])
def test_acl_administration_is_admin_only_unless_configured(code: int) -> None:
    """D6: an ordinary account cannot send 50-54 (4.9.8: any signed account could make itself
    admin); nonAdminAclConfigEnable=true (admin_codes(True)) restores 4.9.8 for 50-53."""
    ext = {"accessKey": "mallory1", "secretKey": "mallory1", "admin": "true"}
    assert _verdict(_signed(code, ext, None)) == (
        f"{EXC}: Need admin permission for request code={code}, but accessKey=RocketMQ is not, "
        f"{MGR}.checkPerm(PlainPermissionManager.java:581)")
    assert _verdict(_signed(code, ext, None, ADMIN_AK, ADMIN_SK)) is None
    try:
        validate(parse_request(_signed(code, ext, None), "127.0.0.1:1"), _state(), admin_codes(True))
        passed = True
    except AclError:
        passed = False
    assert passed == (code != 54)
    assert DEFAULT_ADMIN_CODES == ADMIN_CODES | {50, 51, 52, 53, 54, 329, 306, 316, 401, 2004, 200056}


@pytest.mark.parametrize("code", [306, 316, 401])
def test_codes_that_delete_files_or_switch_a_group_are_admin_only(code: int) -> None:
    """CLEAN_EXPIRED_CONSUMEQUEUE and CLEAN_UNUSED_TOPIC delete store files; SET_MESSAGE_REQUEST_MODE
    switches a group between pull and POP for all its clients: admin accounts only."""
    assert "Need admin permission" in (_verdict(_signed(code, {"topic": "T"}, None)) or "")
    assert _verdict(_signed(code, {"topic": "T"}, None, ADMIN_AK, ADMIN_SK)) is None


def test_codes_naming_a_stored_message_check_its_topic() -> None:
    """D7: VIEW_MESSAGE_BY_ID (33), CONSUMER_SEND_MSG_BACK (36), CONSUME_MESSAGE_DIRECTLY (309)
    need SUB on the topic(s) of the record at the offset, END_TRANSACTION (37) PUB on its
    REAL_TOPIC; an offset where the store placed no record is refused (admins excepted)."""
    lookup = _lookup({100: StoredMessage("topicA"), 200: StoredMessage("topicB"),
                      300: StoredMessage("%RETRY%groupB", retry_topic="topicA"),
                      400: StoredMessage("RMQ_SYS_TRANS_HALF_TOPIC", real_topic="topicA"),
                      500: StoredMessage("RMQ_SYS_TRANS_HALF_TOPIC", real_topic="topicB"),
                      600: StoredMessage("SCHEDULE_TOPIC_XXXX", real_topic="topicA")})

    def verdict(code: int, ext: dict[str, str], ak: str = AK, sk: str = SK) -> str | None:
        try:
            validate(parse_request(_signed(code, ext, None, ak, sk), "127.0.0.1:1", lookup), _state())
        except AclError as exc:
            return exc.remark
        return None

    denied_a = f"{EXC}: No default permission for topic:topicA, {MGR}.checkPerm(PlainPermissionManager.java:611)"
    view = RequestCode.VIEW_MESSAGE_BY_ID
    assert verdict(view, {"offset": "100"}) == denied_a
    assert verdict(view, {"offset": "200"}) is None
    assert verdict(view, {"offset": "300"}) == denied_a        # a retry message holds topicA's content
    assert verdict(view, {"offset": "600"}) == denied_a        # so does a delayed one
    assert verdict(view, {"offset": "7"}) == f"{EXC}: No message to check permissions on at commit log offset 7"
    assert verdict(view, {"offset": "7"}, ADMIN_AK, ADMIN_SK) is None
    back = {"group": "groupB", "delayLevel": "0", "originMsgId": "x", "originTopic": "topicB"}
    assert verdict(RequestCode.CONSUMER_SEND_MSG_BACK, dict(back, offset="100")) == denied_a
    assert verdict(RequestCode.CONSUMER_SEND_MSG_BACK, dict(back, offset="200")) is None
    end = {"producerGroup": "P", "tranStateTableOffset": "0", "commitOrRollback": "8", "msgId": "m"}
    assert verdict(RequestCode.END_TRANSACTION, dict(end, commitLogOffset="400")) == denied_a
    parsed = parse_request(_signed(RequestCode.END_TRANSACTION, dict(end, commitLogOffset="500"), None),
                           "h:1", lookup)
    assert parsed.resources == {"topicB": PUB}
    direct = {"consumerGroup": "groupB", "clientId": "c", "msgId": "7F0000010000273F" + f"{100:016X}"}
    assert verdict(RequestCode.CONSUME_MESSAGE_DIRECTLY, direct) == denied_a
    assert verdict(RequestCode.CONSUME_MESSAGE_DIRECTLY, dict(direct, msgId="7F0000010000273F" + f"{200:016X}")) is None
    assert verdict(RequestCode.CONSUME_MESSAGE_DIRECTLY, dict(direct, msgId="not-an-offset-msg-id")) is None
    # without a lookup (no store) nothing can be told: refused
    assert "No message to check permissions on" in (_verdict(_signed(view, {"offset": "200"}, None)) or "")


@pytest.mark.parametrize("code, ext, body, needed", [
    (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T", "queueId": "0"}, None,
     {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": "0", "timestamp": "1"}, None, {"T": SUB}),
    (RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}, None, {"T": SUB}),
    (RequestCode.GET_MIN_OFFSET, {"topic": "T", "queueId": "0"}, None, {"T": SUB}),
    (RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "T", "queueId": "0"}, None, {"T": SUB}),
    (RequestCode.LOCK_BATCH_MQ, {}, json.dumps({"consumerGroup": "G", "clientId": "c", "mqSet": [
        {"topic": "T1", "brokerName": "b", "queueId": 0}, {"topic": "T2", "brokerName": "b", "queueId": 1}]}).encode(),
     {"%RETRY%G": SUB, "T1": SUB, "T2": SUB}),
    (RequestCode.UNLOCK_BATCH_MQ, {}, json.dumps({"consumerGroup": "G", "clientId": "c", "mqSet": [
        {"topic": "T1", "brokerName": "b", "queueId": 0}]}).encode(), {"%RETRY%G": SUB, "T1": SUB}),
    (RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"}, None, {"T": SUB}),
    (RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"}, None, {"%RETRY%G": SUB}),
    (RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "T"}, None, {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"}, None, {"T": SUB}),
    (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "T", "group": "G", "timestamp": "0", "isForce": "true"},
     None, {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G", "clientId": "c"}, None, {"%RETRY%G": SUB}),
    (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": "0", "index": "0", "count": "1",
                                       "consumerGroup": "G"}, None, {"%RETRY%G": SUB, "T": SUB}),
    # RocketMQ 5's POP codes
    (RequestCode.POP_MESSAGE, {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "1",
                               "invisibleTime": "1000", "pollTime": "0", "bornTime": "0", "initMode": "0"},
     None, {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.ACK_MESSAGE, {"consumerGroup": "G", "topic": "T", "queueId": "0", "extraInfo": "x",
                               "offset": "0"}, None, {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {"consumerGroup": "G", "topic": "T", "queueId": "0",
                                                "extraInfo": "x", "offset": "0", "invisibleTime": "1"},
     None, {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.BATCH_ACK_MESSAGE, {}, json.dumps({"acks": [
        {"c": "G", "t": "T1", "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 0, "it": 1, "b": ""},
        {"c": "G2", "t": "T2", "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 0, "it": 1, "b": ""}]}).encode(),
     {"%RETRY%G": SUB, "T1": SUB, "%RETRY%G2": SUB, "T2": SUB}),
    (RequestCode.QUERY_ASSIGNMENT, {}, json.dumps({"topic": "T", "consumerGroup": "G", "clientId": "c",
                                                   "strategyName": "AVG", "messageModel": "CLUSTERING"}).encode(),
     {"%RETRY%G": SUB, "T": SUB}),
    (RequestCode.GET_ALL_TOPIC_CONFIG, {}, None, None),
    (RequestCode.GET_BROKER_RUNTIME_INFO, {}, None, None),
])
def test_further_codes_need_their_topic_and_group(code: int, ext: dict[str, str], body: bytes | None,
                                                  needed: dict[str, int] | None) -> None:
    """The rest of the table (RocketMQ 5's ACL, in plain ACL's words: GET/SUB -> SUB)."""
    need = parse_request(make_request(code, ext, body), "h:1")
    assert need.resources == needed and need.unresolved is None


def test_lock_with_a_body_that_does_not_decode_is_refused() -> None:
    cmd = _signed(RequestCode.LOCK_BATCH_MQ, {}, b"{not json")
    assert _verdict(cmd) == (f"{EXC}: No consumer group and queues to check permissions on: the body does not "
                             "decode")
    assert _verdict(_signed(RequestCode.LOCK_BATCH_MQ, {}, b"{not json", ADMIN_AK, ADMIN_SK)) is None
