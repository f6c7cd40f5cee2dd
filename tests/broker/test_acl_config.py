"""broker.acl_config: changes to the acl files by the ACL admin codes (issue 22, D1 and D2).

D1: concurrent UPDATE_AND_CREATE_ACL_CONFIG requests all land (one writer, a temporary file
of its own, fsynced, renamed, the directory fsynced) and the file always parses. D2: a value
the loader would refuse at the next start is refused now, with the code's failure code, and
the file stays as it was; a start on a file the loader refuses says so in one line naming the
file, and `rmqd store repair-config -c broker.conf` puts the last good copy back.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import yaml

from broker_harness import Harness, broker_running
from rmqd.broker import cli
from rmqd.broker.acl_config import AclService, repair_acl_files, write_file_durably
from rmqd.broker.config import ConfigError
from rmqd.processors.acl import AclError
from rmqd.wire.acl import sign_fields
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request

ADMIN_AK, ADMIN_SK = "rocketmq2", "12345678"
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
- 10.10.103.*

accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
- accessKey: rocketmq2
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
"""


def _home(tmp_path: Path, text: str = PLAIN_ACL) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(text)
    return home


def _admin(code: int, ext: dict[str, str]) -> RemotingCommand:
    return make_request(code, sign_fields(ext, None, ADMIN_AK, ADMIN_SK))


def _accounts(path: Path) -> list[str]:
    return [a["accessKey"] for a in yaml.safe_load(path.read_text())["accounts"]]


def _with_broker(tmp_path: Path, home: Path, scenario: Callable[[Harness], Awaitable[None]],
                 timeout: float = 60) -> None:
    async def main() -> None:
        with trio.fail_after(timeout):
            async with broker_running(tmp_path / "store", with_namesrv=False, aclEnable="true",
                                      rocketmqHome=str(home)) as h:
                await scenario(h)
    trio.run(main)


def _leftovers(home: Path) -> list[str]:
    return [p.name for p in (home / "conf").iterdir() if p.name.endswith(".tmp")]


# -- D1 -----------------------------------------------------------------------------------------

def test_concurrent_updates_all_land_unit(tmp_path: Path) -> None:
    home = _home(tmp_path)
    svc = AclService(home)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(6):
                svc.update_account({"accessKey": f"user{n:02d}x{i}", "secretKey": f"secret{n:02d}{i}",
                                    "defaultTopicPerm": "SUB"})
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    acl_file = home / "conf" / "plain_acl.yml"
    names = _accounts(acl_file)
    assert len(names) == 2 + 12 * 6 and len(set(names)) == len(names)
    assert yaml.safe_load(acl_file.read_text())["dataVersion"][0]["counter"] == 72
    assert set(svc.state.accounts) == set(names)
    assert _leftovers(home) == []
    assert (home / "conf" / "plain_acl.yml.bak").read_bytes() == acl_file.read_bytes()  # the last good copy
    assert set(AclService(home).state.accounts) == set(names)                          # a restart loads it


def test_concurrent_updates_all_land_live(tmp_path: Path) -> None:
    """Sixteen signed UPDATE_AND_CREATE_ACL_CONFIG at once: every one SUCCESS and in the file."""
    home = _home(tmp_path)
    acl_file = home / "conf" / "plain_acl.yml"

    async def scenario(h: Harness) -> None:
        codes: dict[str, tuple[int, str | None]] = {}

        async def one(n: int) -> None:
            ak = f"concurrent{n:02d}"
            r = await h.client.invoke(h.broker_addr, _admin(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": ak, "secretKey": f"secret-{n:02d}", "admin": "false",
                "defaultTopicPerm": "PUB", "topicPerms": f"t{n}=SUB"}), 30.0)
            codes[ak] = (r.code, r.remark)

        async with trio.open_nursery() as nursery:
            for n in range(16):
                nursery.start_soon(one, n)
        assert all(c == (ResponseCode.SUCCESS, None) for c in codes.values()), codes
        names = _accounts(acl_file)   # SUCCESS means on disk: read at once, no waiting
        assert set(codes) <= set(names)
        assert set(codes) <= set(h.role.acl.state.accounts)
    _with_broker(tmp_path, home, scenario)
    assert _leftovers(home) == []
    assert {f"concurrent{n:02d}" for n in range(16)} <= set(AclService(home).state.accounts)


def test_a_change_is_fsynced_before_it_is_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    target = tmp_path / "x.yml"
    write_file_durably(target, b"a: 1\n")
    assert events == ["fsync", "replace", "fsync"]   # the file, the rename, the directory
    assert target.read_bytes() == b"a: 1\n"


def test_a_failed_write_answers_failure_and_changes_nothing(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path)
    acl_file = home / "conf" / "plain_acl.yml"

    async def scenario(h: Harness) -> None:
        before = acl_file.read_bytes()

        def no_space(a: object, b: object) -> None:
            raise OSError(28, "No space left on device", str(a))
        monkeypatch.setattr(os, "replace", no_space)
        r = await h.client.invoke(h.broker_addr, _admin(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
            "accessKey": "diskfull1", "secretKey": "diskfull1"}), 10.0)
        monkeypatch.undo()
        assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        assert "No space left on device" in r.remark
        assert acl_file.read_bytes() == before
        assert "diskfull1" not in h.role.acl.state.accounts
        assert _leftovers(home) == []
    _with_broker(tmp_path, home, scenario)


# -- D2 -----------------------------------------------------------------------------------------

WHITE_FAILED = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
ACCOUNT_FAILED = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED


@pytest.mark.parametrize("code, ext, failed, remark", [
    (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "x\u0000y"}, WHITE_FAILED,
     "Netaddress examine Exception netaddress is x\u0000y"),
    (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "a\u0001b"}, WHITE_FAILED,
     "Netaddress examine Exception netaddress is a\u0001b"),
    (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "a\nb: c"}, WHITE_FAILED,
     "Netaddress examine Exception netaddress is a\nb: c"),
    (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "1.2.3.4,10.0.0.1-300"}, WHITE_FAILED,
     "RangeRemoteAddressStrategy netaddress examine scope Exception start is 1 , end is 300"),
    (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "mallory1", "secretKey": "mallory1",
                                                "whiteRemoteAddress": "1.2.3.\u00004"}, ACCOUNT_FAILED,
     "Netaddress examine Exception netaddress is 1.2.3.\u00004"),
    (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "mallory1", "secretKey": "mallory1",
                                                "whiteRemoteAddress": "10.1.{1,x}"}, ACCOUNT_FAILED,
     "MultipleRemoteAddressStrategy has got a/some wrong format IP(s) "),
    (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "mallory1", "secretKey": "mallory1",
                                                "defaultTopicPerm": "ALL"}, ACCOUNT_FAILED,
     "Parse defaultTopicPerm error for ALL.\n"
     "The expected permissions are 'DENY' or 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."),
])
def test_values_the_loader_refuses_are_refused_before_writing(tmp_path: Path, code: int, ext: dict[str, str],
                                                              failed: int, remark: str) -> None:
    home = _home(tmp_path)
    acl_file = home / "conf" / "plain_acl.yml"

    async def scenario(h: Harness) -> None:
        before = acl_file.read_bytes()
        r = await h.client.invoke(h.broker_addr, _admin(code, ext), 10.0)
        assert (r.code, r.remark) == (failed, remark)
        assert acl_file.read_bytes() == before
    _with_broker(tmp_path, home, scenario)
    AclService(home)   # the broker can start again on the file


def test_global_white_list_only_goes_to_an_acl_file(tmp_path: Path) -> None:
    """4.9.8 takes any existing file under rocketmqHome (its name test lets all but *.yaml
    through): code 53 could turn broker.conf into YAML. rmqd takes only the acl files."""
    home = _home(tmp_path)
    conf = home / "conf" / "broker.conf"
    conf.write_text("brokerName=b\n")
    svc = AclService(home)
    assert not svc.update_global_white(["1.2.3.4"], str(conf))
    assert conf.read_text() == "brokerName=b\n"
    (home / "conf" / "acl").mkdir()
    extra = home / "conf" / "acl" / "extra.yml"
    extra.write_text("")
    assert svc.update_global_white(["1.2.3.4"], str(extra))
    assert yaml.safe_load(extra.read_text())["globalWhiteRemoteAddresses"] == ["1.2.3.4"]


def test_a_change_is_refused_while_another_acl_file_is_broken(tmp_path: Path) -> None:
    home = _home(tmp_path)
    svc = AclService(home)
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "broken.yml").write_text("accounts: [\n")
    with pytest.raises(AclError, match=r"broken\.yml: not valid YAML"):
        svc.update_account({"accessKey": "newuser1", "secretKey": "newuser1"})
    assert "newuser1" not in (home / "conf" / "plain_acl.yml").read_text()


def test_start_on_a_refused_file_then_repair_config_puts_the_last_good_copy_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(tmp_path)
    acl_file = home / "conf" / "plain_acl.yml"
    svc = AclService(home)                                    # a start keeps the last good copy
    svc.update_account({"accessKey": "kept-user1", "secretKey": "kept-secret1"})
    good = acl_file.read_bytes()
    acl_file.write_text(PLAIN_ACL.replace("- 10.10.103.*", '- "1.2.3.\\x004"'))   # a bad hand edit
    with pytest.raises(ConfigError) as err:
        AclService(home)
    line = str(err.value)
    assert "\n" not in line and str(acl_file) in line and "Netaddress examine Exception" in line
    assert "rmqd store repair-config -c" in line and "plain_acl.yml.bak" in line

    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\nrocketmqHome={home}\nstorePathRootDir={tmp_path / 'store'}\n")
    assert cli.main(["store", "repair-config", "-c", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "restored from plain_acl.yml.bak" in out and "corrupt-" in out
    assert acl_file.read_bytes() == good
    assert "kept-user1" in AclService(home).state.accounts
    assert [p for p in (home / "conf").iterdir() if ".corrupt-" in p.name]        # the damaged file is kept
    assert cli.main(["store", "repair-config", "-c", str(conf)]) == 0
    assert "every one loads, nothing to repair" in capsys.readouterr().out


def test_repair_without_a_good_copy_fails_closed(tmp_path: Path) -> None:
    home = _home(tmp_path, "accounts: [\n")
    lines = repair_acl_files(home)
    assert len(lines) == 1 and "no loadable plain_acl.yml.bak" in lines[0]
    svc = AclService(home)
    assert svc.state.accounts == {} and svc.state.global_white == []   # nobody gets in
