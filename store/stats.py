"""StoreStatsService: the put/get counters GET_BROKER_RUNTIME_INFO reports (mqadmin brokerStatus).

Why its own module: mqadmin and dashboards read these keys by name (putTps, getFoundTps,
putMessageDistributeTime, putLatency99, ...), so the names and text formats are 4.9.8's.
Counting is a few integer additions per put or get; the TPS figures come from one snapshot a
second (``sample``), kept for 10 minutes, as RocketMQ's sampling thread keeps them.
"""
from __future__ import annotations

import collections
import threading
import time

from rmqd.wire.fastjson import java_double

#: StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC and the bucket upper bounds (ms).
DISTRIBUTE_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                   "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
_BOUNDS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
MAX_SAMPLES = 60 * 10 + 1  # MAX_RECORDS_OF_SAMPLING
SAMPLE_INTERVAL_S = 1.0  # FREQUENCY_OF_SAMPLING
PRINT_INTERVAL_S = 60.0  # the distribution is rotated with each minute's print


def _bucket(ms: int) -> int:
    for i, bound in enumerate(_BOUNDS):
        if ms <= bound:
            return i
    return len(_BOUNDS)


class StoreStatsService:
    def __init__(self) -> None:
        self.boot_timestamp = int(time.time() * 1000)
        self.put_times_total = 0
        self.put_size_total = 0
        self.put_failed_times = 0
        self.put_entire_time_max = 0
        self.get_entire_time_max = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transfered = 0
        self.dispatch_max_buffer = 0
        self._distribute = [0] * len(DISTRIBUTE_DESC)
        self._last_distribute: list[int] | None = None
        self._samples: collections.deque[tuple[int, int, int, int, int]] = collections.deque(maxlen=MAX_SAMPLES)
        self._lock = threading.Lock()
        self._last_sample = 0.0
        self._last_rotate = time.monotonic()

    # -- counting (hot paths: plain additions) ---------------------------------------------------
    def on_put(self, ok: bool, msgs: int, wrote_bytes: int, elapsed_ms: int) -> None:
        if not ok:
            self.put_failed_times += 1
            return
        self.put_times_total += msgs
        self.put_size_total += wrote_bytes
        if elapsed_ms > self.put_entire_time_max:
            self.put_entire_time_max = elapsed_ms
        self._distribute[_bucket(elapsed_ms)] += 1

    def on_get(self, found: bool, msgs: int, elapsed_ms: int) -> None:
        if found:
            self.get_found += 1
            self.get_transfered += msgs
        else:
            self.get_miss += 1
        if elapsed_ms > self.get_entire_time_max:
            self.get_entire_time_max = elapsed_ms

    # -- sampling ---------------------------------------------------------------------------------
    def sample(self) -> None:
        """One snapshot (at most one a second); called by the store's periodic thread."""
        now = time.monotonic()
        if now - self._last_sample < SAMPLE_INTERVAL_S * 0.95:
            return
        self._last_sample = now
        with self._lock:
            self._samples.append((int(time.time() * 1000), self.put_times_total, self.get_found, self.get_miss,
                                  self.get_transfered))
        if now - self._last_rotate >= PRINT_INTERVAL_S:
            self._last_rotate = now
            self._last_distribute, self._distribute = self._distribute, [0] * len(DISTRIBUTE_DESC)

    def _rate(self, index: int, seconds: int) -> float | None:
        with self._lock:
            if len(self._samples) <= seconds:
                return None
            a, b = self._samples[-(seconds + 1)], self._samples[-1]
        elapsed = b[0] - a[0]
        return (b[index] - a[index]) / elapsed * 1000 if elapsed else 0.0

    def _tps3(self, index: int) -> str:
        """'tps10 tps60 tps600', a window left empty until it has enough samples."""
        rates = (self._rate(index, s) for s in (10, 60, 600))
        return " ".join("" if r is None else java_double(r) for r in rates)

    def _total_tps3(self) -> str:
        """getTotalTps: found + miss, a window without samples counting 0."""
        return " ".join(java_double((self._rate(2, s) or 0.0) + (self._rate(3, s) or 0.0)) for s in (10, 60, 600))

    def _latency(self, px: float) -> float:
        """findPutMessageEntireTimePX over the last minute's distribution (bucket bounds)."""
        counts = self._last_distribute or [0] * len(DISTRIBUTE_DESC)
        total = sum(counts)
        target = int(total * px)
        passed = 0
        bounds = (*_BOUNDS, 20000)
        for i, count in enumerate(counts):
            if target <= passed + count:
                rel = target - passed
                if i == 0:
                    return 0.0 if count == 0 else bounds[0] * rel / count
                return bounds[i - 1] + (0 if count == 0 else (bounds[i] - bounds[i - 1]) * rel / count)
            passed += count
        return 0.0

    def runtime_info(self) -> dict[str, str]:
        total = self.put_times_total or 1
        elapsed = int(time.time() * 1000) - self.boot_timestamp
        days, rest = divmod(elapsed, 86_400_000)
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        dist = self._last_distribute
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {rest // 1000} seconds ]",
            "putMessageEntireTimeMax": str(self.put_entire_time_max),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(self.put_failed_times),
            "putMessageSizeTotal": str(self.put_size_total),
            "putMessageDistributeTime": "null" if dist is None else
            "".join(f"{d}:{n} " for d, n in zip(DISTRIBUTE_DESC, dist)),
            "putMessageAverageSize": java_double(self.put_size_total / total),
            "dispatchMaxBuffer": str(self.dispatch_max_buffer),
            "getMessageEntireTimeMax": str(self.get_entire_time_max),
            "putTps": self._tps3(1),
            "getFoundTps": self._tps3(2),
            "getMissTps": self._tps3(3),
            "getTotalTps": self._total_tps3(),
            "getTransferedTps": self._tps3(4),
            "putLatency99": f"{self._latency(0.99):.2f}",
            "putLatency999": f"{self._latency(0.999):.2f}",
        }


__all__ = ["DISTRIBUTE_DESC", "StoreStatsService"]
