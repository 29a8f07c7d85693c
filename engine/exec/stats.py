"""Server statistics as Redis keeps them: per-command counters (INFO commandstats) and their
latency histograms (INFO latencystats, LATENCY HISTOGRAM), error replies by error code (INFO
errorstats) and `total_error_replies`, keyspace hits and misses, expired keys and the expiry
cycle's figures, and the instantaneous rates INFO stats shows (INFO stats).

Owns `ServerStats` and the rules (Redis's src/server.c `call`, `rejectCommand`,
`incrementErrorCount`, networking.c `afterErrorReply`):
- a command is counted as a call once it ran (`calls`, and the time its handler took, `usec`);
  one refused before running (unknown subcommand aside: arity, NOAUTH, MISCONF, a refusal while
  queueing in MULTI) counts a `rejected_calls` and no call; one that ran and replied an error
  counts a call and a `failed_calls`;
- every error reply counts once in `total_error_replies` and under its code: the first word of
  the error line when a space ends it within the first 32 bytes of the reply ("-" included),
  ERR otherwise;
- at most 128 distinct codes: the one after them empties the table, which then holds
  `ERRORSTATS_DISABLED` with count 1 and counts nothing more by code until `reset` (CONFIG
  RESETSTAT); `total_error_replies` goes on counting.
- a call's time goes to its command's latency histogram while `latency-tracking` is on, and
  the call is found slow (at or above `slow_ns`) in the same step (`CommandCounters.count`,
  which reads both settings from the command's counters: `set_monitoring` writes them
  there); CONFIG RESETSTAT drops the histograms too;
- keyspace hits and misses count the lookups Redis's lookupKeyRead counts (the read commands'
  keys; a write's own lookup is not counted);
- instantaneous rates (ops/sec, kbps) are the mean of the last 16 samples taken every 100 ms
  (Redis's trackInstantaneousMetric): `sample` is called by whoever runs the cron.
The engine's command path updates the counters (engine.runtime.core); its dispatch table holds
each command's `CommandCounters`, so a call is counted without a lookup. Must not touch: the
command table, sessions, I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

NEVER_SLOW: Final = 1 << 62  # `slow_ns` while neither the slow log nor the latency monitor is on
# A command's latency histogram is an HdrHistogram as Redis keeps one per command: values in
# nanoseconds from 1 to 10^9, two significant digits, so 24 half-buckets of 128 sub-buckets,
# each the count of the calls whose time falls in it (engine.exec.latency reads it: INFO
# latencystats, LATENCY HISTOGRAM).
HIST_LEN: Final = 3072  # (23 buckets + 1) * 128 sub-buckets: the counts for 1 ns..1 s
HIST_MAX: Final = 1_000_000_000  # Redis's LATENCY_HISTOGRAM_MAX_VALUE: longer calls count as 1 s


def hist_index(nanos: int) -> int:
    """The histogram slot of a call that took `nanos` (clamped to 1 ns .. 1 s): its bucket is
    the power of two above 255 that holds it, its sub-bucket the top 8 bits within."""
    value = 1 if nanos < 1 else HIST_MAX if nanos > HIST_MAX else nanos
    bucket = (value | 255).bit_length() - 8
    return ((bucket + 1) << 7) + (value >> bucket) - 128


class CommandCounters:
    """One command's figures (INFO commandstats and latencystats) and the monitoring settings
    its every call is checked against. The engine's dispatch table holds each command's
    counters, so a call is counted without a lookup; ServerStats keeps them by name."""

    __slots__ = ("calls", "nanos", "rejected", "failed", "histogram", "slow_ns", "tracked")

    def __init__(self, slow_ns: int = NEVER_SLOW, tracked: bool = True) -> None:
        self.calls = 0
        self.nanos = 0
        self.rejected = 0
        self.failed = 0
        self.histogram: list[int] | None = None  # the latency histogram, made by a first call
        self.slow_ns = slow_ns  # a call at or above this is slow (ServerStats.set_monitoring)
        self.tracked = tracked  # latency-tracking: its calls go to the histogram

    def count(self, nanos: int) -> bool:
        """One call that took `nanos`: its count, its time and (tracked) its histogram slot.
        True when it is slow: the caller hands it to the slow log and the latency monitor."""
        self.calls += 1
        self.nanos += nanos
        if self.tracked:
            histogram = self.histogram
            if histogram is None:
                histogram = self.histogram = [0] * HIST_LEN
            histogram[hist_index(nanos)] += 1
        return nanos >= self.slow_ns

    def reset(self) -> None:
        """CONFIG RESETSTAT: the figures to zero, the histogram dropped."""
        self.calls = self.nanos = self.rejected = self.failed = 0
        self.histogram = None


def count_call(counters: CommandCounters, nanos: int) -> bool:
    """`counters.count(nanos)`, for callers that hold the counters as a value."""
    return counters.count(nanos)

ERROR_STATS_NUMBER = 128  # Redis's cap on distinct error codes
ERRORSTATS_DISABLED = "ERRORSTATS_DISABLED"
ERROR_CODE_SCAN = 31  # Redis looks for the space in the reply's first 32 bytes, "-" included
_UNSAFE_INFO = str.maketrans("#:\n\r", "____")  # getSafeInfoString
_F32 = struct.Struct("f")


def error_code(line: str) -> str:
    """The errorstats code of an error line (without its leading "-"), as afterErrorReply
    takes it: the first word if a space ends it within the first 32 bytes, else ERR."""
    space = line.find(" ", 0, ERROR_CODE_SCAN)
    return line[:space] if space >= 0 else "ERR"


def safe_info_name(name: str) -> str:
    """A name as INFO prints it: the characters its format cannot carry become '_'."""
    return name.translate(_UNSAFE_INFO)


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def usec_per_call(usec: int, calls: int) -> str:
    """Redis's `%.2f` of `(float)usec / calls`: a single-precision division."""
    return "0.00" if calls == 0 else f"{_f32(_f32(usec) / _f32(calls)):.2f}"


STATS_METRIC_SAMPLES = 16  # Redis's: the instantaneous rates are means of this many samples
STATS_SAMPLE_MS = 100  # taken this far apart at least (serverCron at hz 10)


class Rate:
    """One instantaneous metric (trackInstantaneousMetric): samples of a growing counter, the
    rate per second between consecutive ones, the mean of the last STATS_METRIC_SAMPLES."""

    __slots__ = ("last_ms", "last_value", "samples", "index")

    def __init__(self) -> None:
        self.last_ms = 0
        self.last_value = 0
        self.samples = [0.0] * STATS_METRIC_SAMPLES
        self.index = 0

    def track(self, value: int, now_ms: int) -> None:
        elapsed = now_ms - self.last_ms
        if self.last_ms and elapsed > 0:
            self.samples[self.index] = (value - self.last_value) * 1000 / elapsed
            self.index = (self.index + 1) % STATS_METRIC_SAMPLES
        self.last_ms, self.last_value = now_ms, value

    def per_second(self) -> float:
        return sum(self.samples) / STATS_METRIC_SAMPLES


class ServerStats:
    """The counters of one engine. Updated and read under the engine lock."""

    __slots__ = ("commands", "errors", "errors_enabled", "total_error_replies", "slow_ns",
                 "tracking", "keyspace_hits", "keyspace_misses", "expired_keys", "evicted_keys",
                 "expired_stale_perc", "expired_time_cap_reached_count", "expire_cycle_nanos", "rates",
                 "last_sample_ms", "dump_payload_sanitizations", "avg_ttl")

    def __init__(self, names: Iterable[str] = ()) -> None:
        # The monitoring settings every counter list carries (set_monitoring): a call at or
        # above slow_ns is slow; tracking: latency-tracking (Redis's default: yes).
        self.slow_ns = NEVER_SLOW
        self.tracking = True
        # Every command's counters from the start, in INFO's order; a name not declared yet
        # gets its list on first use (`counters`).
        self.commands: dict[str, CommandCounters] = {name: self._new() for name in names}
        self.errors: dict[str, int] = {}
        self.errors_enabled = True
        self.total_error_replies = 0
        self.keyspace_hits = 0
        self.keyspace_misses = 0
        self.expired_keys = 0
        self.evicted_keys = 0  # keys maxmemory evicted (engine.runtime.evictions)
        self.expired_stale_perc = 0.0  # the active cycle's running estimate, percent
        self.expired_time_cap_reached_count = 0
        self.expire_cycle_nanos = 0
        self.dump_payload_sanitizations = 0  # RESTOREs of a stream (each read whole)
        # db index -> the active cycle's running estimate of its keys' TTL, ms (INFO keyspace's
        # avg_ttl; engine.runtime.expiry_cycle keeps it). Not a counter: RESETSTAT keeps it.
        self.avg_ttl: dict[int, int] = {}
        # name -> Rate: "ops", "net_input", "net_output", "net_repl_input", "net_repl_output"
        self.rates: dict[str, Rate] = {}
        self.last_sample_ms = 0

    def _new(self) -> CommandCounters:
        return CommandCounters(self.slow_ns, self.tracking)

    def counters(self, name: str) -> CommandCounters:
        """The counter list of the command named `name` ("xadd", "client|info")."""
        found = self.commands.get(name)
        if found is None:
            found = self.commands[name] = self._new()
        return found

    def set_monitoring(self, slow_ns: int, tracking: bool) -> None:
        """The time at or above which a call is slow, and latency-tracking (histograms kept
        so far stay while it is off, as Redis keeps them until CONFIG RESETSTAT), into every
        counter list."""
        self.slow_ns, self.tracking = slow_ns, tracking
        for counters in self.commands.values():
            counters.slow_ns = slow_ns
            counters.tracked = tracking

    # --- recording -----------------------------------------------------------------------

    def error_reply(self, line: str) -> None:
        """One error reply was sent (afterErrorReply)."""
        self.total_error_replies += 1
        if not self.errors_enabled:
            return
        code = error_code(line)
        errors = self.errors
        count = errors.get(code)
        if count is not None:
            errors[code] = count + 1
        elif len(errors) >= ERROR_STATS_NUMBER:
            errors.clear()
            errors[ERRORSTATS_DISABLED] = 1
            self.errors_enabled = False
        else:
            errors[code] = 1

    def rejected(self, counters: CommandCounters | None, line: str) -> None:
        """A command refused before it ran (None: an unknown command or subcommand)."""
        if counters is not None:
            counters.rejected += 1
        self.error_reply(line)

    def failed(self, counters: CommandCounters, nanos: int, line: str) -> bool:
        """A command that ran and replied the error `line`; True if it was slow."""
        slow = counters.count(nanos)
        counters.failed += 1
        self.error_reply(line)
        return slow

    def lookups(self, hits: int, misses: int) -> None:
        """Keys a read command looked up (lookupKeyRead): found, not found."""
        self.keyspace_hits += hits
        self.keyspace_misses += misses

    def expire_sample(self, sampled: int, expired: int, capped: bool) -> None:
        """The active expiry cycle over one database: keys with a TTL looked at, how many had
        expired (deleted: expired_keys; the running estimate of the stale share, each cycle
        weighted 5% as Redis's), whether it stopped at its effort limit with expired keys
        still being found (Redis's time cap)."""
        self.expired_keys += expired
        if sampled:
            current = expired * 100 / sampled
            self.expired_stale_perc = current * 0.05 + self.expired_stale_perc * 0.95
        if capped:
            self.expired_time_cap_reached_count += 1

    def sample(self, now_ms: int, values: dict[str, int]) -> bool:
        """The cron's sample of the counters behind the instantaneous rates (`values`: name
        -> counter now; "ops" is added here); False when the last one is too recent."""
        if self.last_sample_ms and now_ms - self.last_sample_ms < STATS_SAMPLE_MS:
            return False
        self.last_sample_ms = now_ms
        rates = self.rates
        for name, value in (("ops", self.total_calls()), *values.items()):
            rate = rates.get(name)
            if rate is None:
                rate = rates[name] = Rate()
            rate.track(value, now_ms)
        return True

    def per_second(self, name: str) -> float:
        rate = self.rates.get(name)
        return rate.per_second() if rate is not None else 0.0

    def late_failure(self, counters: CommandCounters | None, line: str) -> None:
        """A command already counted as a call replied the error `line` after all (SAVE's
        wait for its compaction)."""
        if counters is not None:
            counters.failed += 1
        self.error_reply(line)

    def reset(self) -> None:
        """CONFIG RESETSTAT: every counter to zero, the latency histograms dropped,
        errorstats enabled and empty, the keyspace and expiry figures to zero."""
        for counters in self.commands.values():
            counters.reset()
        self.errors.clear()
        self.errors_enabled = True
        self.total_error_replies = 0
        self.keyspace_hits = self.keyspace_misses = self.expired_keys = self.evicted_keys = 0
        self.expired_stale_perc = 0.0
        self.expired_time_cap_reached_count = self.expire_cycle_nanos = 0
        self.dump_payload_sanitizations = 0

    # --- reading -------------------------------------------------------------------------

    def total_calls(self) -> int:
        """Every call counted (Redis's total_commands_processed counts the same calls)."""
        return sum(counters.calls for counters in self.commands.values())

    def commandstats(self) -> list[tuple[str, str]]:
        """INFO commandstats: the commands called or refused since the last reset."""
        fields = []
        for name, counters in self.commands.items():
            calls, nanos = counters.calls, counters.nanos
            rejected, failed = counters.rejected, counters.failed
            if calls or rejected or failed:
                usec = nanos // 1000
                fields.append((f"cmdstat_{safe_info_name(name)}",
                               f"calls={calls},usec={usec},"
                               f"usec_per_call={usec_per_call(usec, calls)},"
                               f"rejected_calls={rejected},failed_calls={failed}"))
        return fields

    def histograms(self) -> list[tuple[str, list[int]]]:
        """(command name, latency histogram) of every command with one, in INFO's order."""
        return [(name, counters.histogram) for name, counters in self.commands.items()
                if counters.histogram is not None]

    def errorstats(self) -> list[tuple[str, str]]:
        """INFO errorstats: one line per error code, in byte order (Redis's radix tree)."""
        codes = sorted(self.errors, key=lambda c: c.encode("utf-8", "surrogateescape"))
        return [(f"errorstat_{safe_info_name(code)}", f"count={self.errors[code]}")
                for code in codes]


__all__ = ["ERRORSTATS_DISABLED", "ERROR_STATS_NUMBER", "HIST_LEN", "HIST_MAX", "NEVER_SLOW",
           "CommandCounters", "Rate", "ServerStats", "count_call", "error_code", "hist_index",
           "safe_info_name", "usec_per_call"]
