"""broker.conf loading: RocketMQ key names and 4.9.x defaults, the split over BrokerConfig /
NettyServerConfig / MessageStoreConfig, and clear errors for unknown keys and bad values."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from fixtures import CLEAN, require
from rmqd.broker.config import BrokerSettings, ConfigError, load_broker_settings, read_properties_file

FIXTURE_CONF = CLEAN / "broker.conf"


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
    s = load_broker_settings(require(FIXTURE_CONF))
    # the name server the fixture's broker used (a free port when it was made)
    namesrv = next(line.split("=", 1)[1] for line in FIXTURE_CONF.read_text().splitlines()
                   if line.startswith("namesrvAddr="))
    assert s.broker.brokerClusterName == "FixtureCluster" and s.broker.brokerName == "broker-fix"
    assert s.broker.namesrvAddr == namesrv and namesrv.startswith("127.0.0.1:") and s.broker.brokerIP1 == "127.0.0.1"
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


def test_unknown_key_is_one_warning_naming_file_and_key(tmp_path, caplog):
    """RocketMQ 4.9 ignores a key no config class has a setter for (MixAll.properties2Object);
    rmqd starts too, with one warning per key that names the file, the key and a near miss."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=a\nautoCreateTopicEnabled=false\n")
    with caplog.at_level(logging.WARNING, logger="rmqd.config"):
        s = load_broker_settings(conf)
    assert s.broker.brokerName == "a" and s.broker.autoCreateTopicEnable is True
    (record,) = caplog.records
    assert record.getMessage() == (f"{conf}: autoCreateTopicEnabled is ignored (RocketMQ 4.9 has no such setting "
                                   "either); did you mean autoCreateTopicEnable?")


# Facts: the keys MixAll.properties2Object sets in RocketMQ 4.9.8 (apache/rocketmq tag
# rocketmq-all-4.9.8): one per public setter with a primitive or String parameter, named after the
# setter (setEnableBatchPush -> enableBatchPush), on the four classes BrokerStartup applies broker.conf to.
SETTER_KEYS_4_9_8 = {
    "BrokerConfig": """
    aclEnable adminBrokerThreadPoolNums autoCreateSubscriptionGroup autoCreateTopicEnable autoDeleteUnusedStats
    brokerClusterName brokerFastFailureEnable brokerIP1 brokerIP2 brokerId brokerName brokerPermission
    brokerTopicEnable clientManageThreadPoolNums clientManagerThreadPoolQueueCapacity clusterTopicEnable
    commercialBaseCount commercialBigCount commercialEnable commercialTimerCount commercialTransCount
    compressedRegister configBlackList consumerFallbehindThreshold consumerManageThreadPoolNums
    consumerManagerThreadPoolQueueCapacity defaultTopicQueueNums disableConsumeIfConsumerReadSlowly
    enableCalcFilterBitMap enableDetailStat enablePropertyFilter endTransactionPoolQueueCapacity
    endTransactionThreadPoolNums expectConsumerNumUseFilter fetchNamesrvAddrByAddressServer
    filterDataCleanTimeSpan filterServerNums filterSupportRetry flushConsumerOffsetHistoryInterval
    flushConsumerOffsetInterval forceRegister heartbeatThreadPoolNums heartbeatThreadPoolQueueCapacity
    highSpeedMode isolateLogEnable longPollingEnable maxDelayTime maxErrorRateOfBloomFilter messageStorePlugIn
    msgTraceTopicName namesrvAddr notifyConsumerIdsChangedEnable processReplyMessageThreadPoolNums
    pullMessageThreadPoolNums pullThreadPoolQueueCapacity putMessageFutureThreadPoolNums
    putThreadPoolQueueCapacity queryMessageThreadPoolNums queryThreadPoolQueueCapacity regionId
    registerBrokerTimeoutMills registerNameServerPeriod rejectTransactionMessage replyThreadPoolQueueCapacity
    rocketmqHome sendMessageThreadPoolNums sendThreadPoolQueueCapacity shortPollingTimeMills slaveReadEnable
    startAcceptSendRequestTimeStamp storeReplyMessageEnable traceOn traceTopicEnable transactionCheckInterval
    transactionCheckMax transactionTimeOut transferMsgByHeap waitTimeMillsInHeartbeatQueue
    waitTimeMillsInPullQueue waitTimeMillsInSendQueue waitTimeMillsInTransactionQueue
""".split(),
    "NettyServerConfig": """
    listenPort serverAsyncSemaphoreValue serverCallbackExecutorThreads serverChannelMaxIdleTimeSeconds
    serverOnewaySemaphoreValue serverPooledByteBufAllocatorEnable serverSelectorThreads serverSocketBacklog
    serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads useEpollNativeSelector
    writeBufferHighWaterMark writeBufferLowWaterMark
""".split(),
    "NettyClientConfig": """
    channelNotActiveInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
    clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize clientWorkerThreads
    connectTimeoutMillis useTLS writeBufferHighWaterMark writeBufferLowWaterMark
""".split(),
    "MessageStoreConfig": """
    accessMessageInMemoryMaxRatio bitMapLengthConsumeQueueExt brokerRole checkCRCOnRecover
    cleanFileForciblyEnable cleanResourceInterval commitCommitLogLeastPages commitCommitLogThoroughInterval
    commitIntervalCommitLog dLegerGroup dLegerPeers dLegerSelfId debugLockEnable defaultQueryMaxNum
    deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval deleteWhen destroyMapedFileIntervalForcibly
    diskFallRecorded diskMaxUsedSpaceRatio duplicationEnable enableBatchPush enableConsumeQueueExt
    enableDLegerCommitLog enableLmq enableMultiDispatch enableScheduleAsyncDeliver enableScheduleMessageStats
    fastFailIfNoBufferInStorePool fileReservedTime flushCommitLogLeastPages flushCommitLogThoroughInterval
    flushCommitLogTimed flushConsumeQueueLeastPages flushConsumeQueueThoroughInterval flushDelayOffsetInterval
    flushDiskType flushIntervalCommitLog flushIntervalConsumeQueue flushLeastPagesWhenWarmMapedFile
    haHousekeepingInterval haListenPort haMasterAddress haSendHeartbeatInterval haSlaveFallbehindMax
    haTransferBatchSize mappedFileSizeCommitLog mappedFileSizeConsumeQueue mappedFileSizeConsumeQueueExt
    maxHashSlotNum maxIndexNum maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch
    maxTransferBytesOnMessageInDisk maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInDisk
    maxTransferCountOnMessageInMemory messageDelayLevel messageIndexEnable messageIndexSafe offsetCheckInSlave
    osPageCacheBusyTimeOutMills preferredLeaderId putMsgIndexHightWater readOnlyCommitLogStorePaths
    redeleteHangedFileInterval scheduleAsyncDeliverMaxPendingLimit scheduleAsyncDeliverMaxResendNum2Blocked
    slaveTimeout storePathCommitLog storePathDLedgerCommitLog storePathRootDir syncFlushTimeout
    transientStorePoolEnable transientStorePoolSize useReentrantLockWhenPutMessage warmMapedFileEnable
""".split(),
}


def test_every_key_4_9_8_sets_is_taken_without_a_warning(tmp_path, caplog):
    settings = BrokerSettings()
    for cls_name, keys in SETTER_KEYS_4_9_8.items():
        target = {"BrokerConfig": settings.broker, "NettyServerConfig": settings.netty_server,
                  "NettyClientConfig": settings.netty_client, "MessageStoreConfig": settings.store}[cls_name]
        types = {f.name: str(f.type) for f in dataclasses.fields(target)}
        aliases = getattr(target, "SETTER_KEYS", {})
        for key in keys:  # each is a typed field of the class BrokerStartup applies it to
            assert types.get(aliases.get(key, key)) in ("int", "bool", "float", "str", "str | None"), key
    # a file with every one of them (each at its default value), plus the aliased and DLedger keys
    # and BrokerStartup's address-server keys: no warning
    lines = []
    for cls_name, keys in SETTER_KEYS_4_9_8.items():
        for key in keys:
            target = [t for t in (settings.broker, settings.netty_server, settings.netty_client, settings.store)
                      if type(t).__name__ == cls_name][0]
            value = getattr(target, getattr(target, "SETTER_KEYS", {}).get(key, key))
            if value is not None:
                lines.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    conf = tmp_path / "every.conf"
    conf.write_text("\n".join(lines) + "\nenableBatchPush=true\ndLegerGroup=g\nreadOnlyCommitLogStorePaths=/ro\n"
                    "storePathDLedgerCommitLog=/dl\nrmqAddressServerDomain=example.org\n")
    with caplog.at_level(logging.WARNING, logger="rmqd.config"):
        s = load_broker_settings(conf)
    assert caplog.records == []
    assert s.store.isEnableBatchPush is True and s.store.dLegerGroup == "g"


TUTORIAL_CONF = """\
# the keys of a widespread tutorial broker.conf (and of 3.x/4.x-era ones)
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
deleteWhen=04
fileReservedTime=120
mapedFileSizeCommitLog=1048576
mapedFileSizeConsumeQueue=300000
destroyMapedFileIntervalForcibly=120000
redeleteHangedFileInterval=120000
diskMaxUsedSpaceRatio=88
storePathRootDir={root}
storePathCommitLog={root}/commitlog
storePathConsumeQueue={elsewhere}/consumequeue
storePathIndex={elsewhere}/index
storeCheckpoint={elsewhere}/checkpoint
abortFile={elsewhere}/abort
maxMessageSize=65536
flushCommitLogLeastPages=4
flushConsumeQueueLeastPages=2
checkTransactionMessageEnable=false
sendMessageThreadPoolNums=128
pullMessageThreadPoolNums=128
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
"""


def test_tutorial_broker_conf_loads_with_one_warning_per_ignored_key(tmp_path, caplog):
    root, elsewhere = tmp_path / "store", tmp_path / "other"
    conf = tmp_path / "broker.conf"
    conf.write_text(TUTORIAL_CONF.format(root=root, elsewhere=elsewhere))
    with caplog.at_level(logging.WARNING, logger="rmqd.config"):
        s = load_broker_settings(conf)
    # what 4.9 honours is set; the old spelling is not (4.9's default stays, as with Apache)
    assert s.store.storePathRootDir == str(root) and s.store.storePathCommitLog == f"{root}/commitlog"
    assert s.store.mappedFileSizeCommitLog == 1024 * 1024 * 1024
    assert s.store.fileReservedTime == 120 and s.store.diskMaxUsedSpaceRatio == 88
    assert s.broker.sendMessageThreadPoolNums == 128 and s.store.maxMessageSize == 65536
    # the store paths really used are derived from storePathRootDir, as StorePathConfigHelper does
    assert s.store.get_store_path_consume_queue() == f"{root}/consumequeue"
    assert s.store.get_store_checkpoint() == f"{root}/checkpoint"
    lines = [r.getMessage() for r in caplog.records]
    assert all(line.startswith(f"{conf}: ") for line in lines)
    by_key = {line.split(": ", 1)[1].split(" ", 1)[0]: line for line in lines}
    assert sorted(by_key) == sorted(["mapedFileSizeCommitLog", "mapedFileSizeConsumeQueue", "storePathConsumeQueue",
                                     "storePathIndex", "storeCheckpoint", "abortFile",
                                     "checkTransactionMessageEnable"])
    assert len(lines) == len(by_key)
    assert by_key["mapedFileSizeCommitLog"].endswith("4.9 spells it mappedFileSizeCommitLog")
    assert by_key["storePathConsumeQueue"].endswith(f"it is always {root}/consumequeue, derived from storePathRootDir")
    assert by_key["abortFile"].endswith(f"it is always {root}/abort, derived from storePathRootDir")


def test_update_broker_config_keeps_refusing_unknown_keys():
    """UPDATE_BROKER_CONFIG (and the tests' settings) stay strict: only a file is lenient."""
    with pytest.raises(ConfigError, match="unknown config key 'storePathIndex'"):
        BrokerSettings().apply({"storePathIndex": "/x"}, source="UPDATE_BROKER_CONFIG")


@pytest.mark.parametrize("line,needle", [
    ("brokerId=zero", "brokerId"),
    ("enableBatchPush=maybe", "enableBatchPush"),
    ("autoCreateTopicEnable=yes", "autoCreateTopicEnable"),
    ("mappedFileSizeCommitLog=1G", "mappedFileSizeCommitLog"),
    ("listenPort=1", "listenPort"),
    ("flushDiskType=SOMETIMES", "flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH"),
    ("brokerRole=slave", "brokerRole='slave' is not one of"),
    # what 4.9 would act on but rmqd cannot do: refused rather than run otherwise
    ("enableDLegerCommitLog=true", "enableDLegerCommitLog=true: rmqd has no DLedger commit log"),
    ("storePathCommitLog=/a/commitlog,/b/commitlog", "several commit-log directories"),
])
def test_bad_values_are_clear(tmp_path, line, needle):
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=needle) as info:
        load_broker_settings(conf)
    assert str(info.value).startswith(f"{conf}: ")  # (validate's errors too, issue 41)


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
