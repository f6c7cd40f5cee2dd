"""SlaveSynchronize (RocketMQ 4.9.8): a slave copies its master's metadata every 10 s.

* topics: GET_ALL_TOPIC_CONFIG (21); the table is replaced when the master's dataVersion
  differs, then persisted;
* consumer offsets: GET_ALL_CONSUMER_OFFSET (43); the offsets are taken over and persisted;
* delay offsets: GET_ALL_DELAY_OFFSET (45); the master's delayOffset.json text is written
  as the slave's delayOffset.json;
* subscription groups: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201); replaced on a dataVersion
  change, then persisted.
The master's address is the masterAddr the name server returns on REGISTER_BROKER. A failing
step is logged and the next one still runs, as in SlaveSynchronize.syncAll.

The master side of code 45 lives here too (``get_all_delay_offset``), because it exists only
for this synchronisation: AdminBrokerProcessor answers with the file's text, or SYSTEM_ERROR
"No delay offset in this broker" when there is none.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from rmqd.broker.remoting_client import RemotingClient
from rmqd.store.config_files import config_path, string_to_file
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request, make_response

log = logging.getLogger("rmqd.ha.sync")

#: BrokerController.handleSlaveSynchronize (4.9.x): syncAll first after 3 s, then every 10 s.
SYNC_INITIAL_DELAY_S = 3.0
SYNC_INTERVAL_S = 10.0
DELAY_OFFSET_FILE = "delayOffset.json"


def _delay_offset_path(root: str) -> Any:
    return config_path(root, DELAY_OFFSET_FILE)


async def get_all_delay_offset(broker: Any, ctx: Any, request: RemotingCommand) -> RemotingCommand:
    """GET_ALL_DELAY_OFFSET on any broker: the delayOffset.json text as the body."""
    path = _delay_offset_path(broker.message_store_config.storePathRootDir)

    def read() -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    content = await trio.to_thread.run_sync(read)
    if not content:
        return make_response(request, ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
    return make_response(request, ResponseCode.SUCCESS, None, body=content.encode("utf-8"))


def _version(obj: Any) -> tuple[int, int] | None:
    dv = obj.get("dataVersion") if isinstance(obj, dict) else None
    if not isinstance(dv, dict):
        return None
    return int(dv.get("timestamp") or 0), int(dv.get("counter") or 0)


class SlaveSynchronize:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.interval_s = SYNC_INTERVAL_S
        self.initial_delay_s = SYNC_INITIAL_DELAY_S
        self.rounds = 0

    async def run(self) -> None:
        await trio.sleep(self.initial_delay_s)
        async with RemotingClient("slave-sync") as client:
            while True:
                await self.sync_all(client)
                await trio.sleep(self.interval_s)

    async def sync_all(self, client: RemotingClient) -> None:
        addr = self.master_addr
        if not addr or addr == self.broker.settings.broker_addr:
            return
        for step in (self._topics, self._consumer_offsets, self._delay_offsets, self._subscription_groups):
            try:
                await step(client, addr)
            except Exception as exc:  # noqa: BLE001 - one step failing must not stop the others
                log.warning("slave sync %s from %s failed: %s", step.__name__.strip("_"), addr, exc)
        self.rounds += 1

    async def _fetch(self, client: RemotingClient, addr: str, code: int) -> bytes:
        response = await client.invoke(addr, make_request(code), 3.0)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {response.code} {response.remark}")
        return bytes(response.body or b"")

    @staticmethod
    def _replace(manager: Any, table_attr: str, obj: Any) -> bool:
        """Replace a versioned table when the master's dataVersion differs; True if it did."""
        if _version(obj) == (manager.data_version.timestamp, manager.data_version.counter):
            return False
        with manager._lock:
            getattr(manager, table_attr).clear()
        manager.decode_obj(obj)
        return True

    async def _topics(self, client: RemotingClient, addr: str) -> None:
        obj = fastjson.loads((await self._fetch(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)).decode("utf-8"))
        manager = self.broker.topic_config_manager
        if self._replace(manager, "topic_config_table", obj):
            await trio.to_thread.run_sync(manager.persist)
            log.info("slave sync: topic config from master %s", addr)

    async def _consumer_offsets(self, client: RemotingClient, addr: str) -> None:
        body = await self._fetch(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        manager = self.broker.consumer_offset_manager
        manager.decode_obj(fastjson.loads(body.decode("utf-8")))
        await trio.to_thread.run_sync(manager.persist)

    async def _delay_offsets(self, client: RemotingClient, addr: str) -> None:
        body = await self._fetch(client, addr, RequestCode.GET_ALL_DELAY_OFFSET)
        path = _delay_offset_path(self.broker.message_store_config.storePathRootDir)
        await trio.to_thread.run_sync(string_to_file, body.decode("utf-8"), path)

    async def _subscription_groups(self, client: RemotingClient, addr: str) -> None:
        body = await self._fetch(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        obj = fastjson.loads(body.decode("utf-8"))
        manager = self.broker.subscription_group_manager
        if self._replace(manager, "subscription_group_table", obj):
            await trio.to_thread.run_sync(manager.persist)
            log.info("slave sync: subscription groups from master %s", addr)


__all__ = ["SlaveSynchronize", "get_all_delay_offset"]
