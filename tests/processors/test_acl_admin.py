"""ACL admin codes 50-53 through a live aclEnable=true broker: the yml is rewritten as 4.9.8
does (dataVersion bumped) and the new rules apply at once; unsigned calls and (unlike 4.9.8)
calls of non-admin accounts change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import yaml

from broker_harness import broker_running
from test_acl_validator import ADMIN_AK, ADMIN_SK, AK, PLAIN_ACL, SK, _signed  # type: ignore[import-not-found]
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import make_request


def _run(tmp_path: Path, fn, **overrides: str) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)

    async def main() -> None:
        with trio.fail_after(40):
            async with broker_running(tmp_path / "store", with_namesrv=False, rocketmqHome=str(home),
                                      **overrides) as h:
                await fn(h, home)
    trio.run(main)


def test_update_delete_and_white_list(tmp_path: Path) -> None:
    async def scenario(h, home: Path) -> None:  # type: ignore[no-untyped-def]
        acl_file = home / "conf" / "plain_acl.yml"

        async def call(cmd):  # type: ignore[no-untyped-def]
            return await h.client.invoke(h.broker_addr, cmd, 5.0)

        new = {"accessKey": "newuser1", "secretKey": "newsecret1", "admin": "false",
               "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB", "topicPerms": "tA=SUB,tB=PUB|SUB"}
        before = acl_file.read_text()
        r = await call(make_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new))
        assert r.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in r.remark
        assert acl_file.read_text() == before                       # unsigned: nothing written
        r = await call(_signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new, None))   # not an admin
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert "Need admin permission for request code=50, but accessKey=RocketMQ is not" in r.remark
        assert acl_file.read_text() == before
        r = await call(_signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.SUCCESS, r.remark
        data = yaml.safe_load(acl_file.read_text())
        entry = [a for a in data["accounts"] if a["accessKey"] == "newuser1"][0]
        assert entry == {"accessKey": "newuser1", "secretKey": "newsecret1", "admin": False,
                         "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB", "topicPerms": ["tA=SUB", "tB=PUB|SUB"]}
        assert data["dataVersion"][0]["counter"] == 1
        # the new account works at once
        r = await call(_signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "tA"}, None, "newuser1", "newsecret1"))
        assert r.code != ResponseCode.SYSTEM_ERROR, r.remark

        bad = dict(new, topicPerms="tA=WRITE")
        r = await call(_signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, bad, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        assert r.remark == ("Parse resource permission error for tA=WRITE.\n"
                            "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
        short = dict(new, secretKey="abc")
        r = await call(_signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, short, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        assert r.remark == ("The accessKey=newuser1 and secretKey=abc cannot be null "
                            "and length should longer than 6")

        info = await call(_signed(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, None, ADMIN_AK, ADMIN_SK))
        assert info.code == ResponseCode.SUCCESS
        assert json.loads(info.ext_fields["version"])["counter"] == 1
        assert list(json.loads(info.ext_fields["allAclFileVersion"])) == [str(acl_file)]
        assert info.ext_fields["brokerName"] == "broker-t" and info.ext_fields["clusterName"] == "TestCluster"

        r = await call(_signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newuser1"}, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await call(_signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newuser1"}, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
        assert r.remark == "The accesskey[newuser1] corresponding to accessConfig has been deleted failed."
        r = await call(_signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "tA"}, None, "newuser1", "newsecret1"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "No acl config for newuser1" in r.remark

        white = {"globalWhiteAddrs": "127.0.0.1,10.0.0.*", "aclFileFullPath": str(acl_file)}
        r = await call(_signed(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, white, None, ADMIN_AK, ADMIN_SK))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["127.0.0.1", "10.0.0.*"]
        r = await call(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "tA"}))   # unsigned, white-listed
        assert r.code != ResponseCode.SYSTEM_ERROR, r.remark
        outside = dict(white, aclFileFullPath=str(home / ".." / "elsewhere.yml"))
        (home.parent / "elsewhere.yml").write_text("")
        r = await call(make_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, outside))
        assert r.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        assert (home.parent / "elsewhere.yml").read_text() == ""
        # a missing aclFileFullPath is the default file (4.9.8's decoder skips the missing field)
        r = await call(make_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "127.0.0.1"}))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["127.0.0.1"]
        r = await call(make_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {}))
        assert (r.code, r.remark) == (ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                      "The globalWhiteAddresses[null] has been updated failed.")
        r = await call(make_request(RequestCode.DELETE_ACL_CONFIG, {}))
        assert (r.code, r.remark) == (ResponseCode.DELETE_ACL_CONFIG_FAILED,
                                      "The accesskey[null] corresponding to accessConfig has been deleted failed.")
        r = await call(make_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"secretKey": "12345678"}))
        assert (r.code, r.remark) == (ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                                      "The accessKey=null and secretKey=12345678 cannot be null and length should "
                                      "longer than 6")
        # 54 GET_BROKER_CLUSTER_ACL_CONFIG: not a code 4.9.8's broker handles
        r = await call(make_request(54, {}))
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    _run(tmp_path, scenario, aclEnable="true")


def test_acl_disabled_answers(tmp_path: Path) -> None:
    async def scenario(h, home: Path) -> None:  # type: ignore[no-untyped-def]
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": AK, "secretKey": SK})
        assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and r.remark is None
        r = await h.invoke(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
        assert r.code == ResponseCode.SYSTEM_ERROR and "aclEnable=false" in r.remark
        assert ADMIN_AK and ADMIN_SK
    _run(tmp_path, scenario)
