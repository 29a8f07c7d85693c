"""The `streamkeep bench` tool (the tools/bench/ package, every section), run in process.

Checks that `bench --quick` prints every registered row and derived figure with positive
numbers, that `--sections` picks sections, and that the AOF and snapshot sections leave no temp
directory behind. Speed targets are reported by the bench, never asserted here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

import pytest

from streamkeep.tools import bench
from streamkeep.tools import main as cli
from streamkeep.tools.bench import registry
from streamkeep.tools.bench.sections import speed
from tests.support.bench_cells import assert_same_rate

NUMBER = r"[\d,]+(?:\.\d+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


# Rows whose op count is their own (duration-bound loops, fsyncs, records, entries loaded),
# not the run's N.
OWN_COUNT = {"aof.always_threads", "aof.always", "aof.fsync", "aof.replay", "aof.replay_xadd",
             "snapshot.load",
             "snapshot.disk",
             "embedded.xread_maxcount",  # reads its data XREAD_PASSES times
             *(b.key for s in bench.SECTIONS if s.name == "queue" for b in s.benchmarks
               if b.key != "queue.batch"),
             # the asyncio rows other than the in-process XADDs: a tenth, kill and queue counts
             *(b.key for s in bench.SECTIONS if s.name == "asyncio" for b in s.benchmarks
               if b.key not in ("asyncio.aredis_xadd", "asyncio.sync_xadd",
                                "asyncio.aredis_xadd_everysec", "asyncio.burner_xadd")),
             *(f"memory.{name}" for name in ("sensor", "one_field", "ten_fields",
                                             "varied_fields", "deletions", "zset", "hash",
                                             "set", "small_hashes", "list",
                                             "small_lists")),  # 5 x N, N / 2
             *(b.key for s in bench.SECTIONS
               if s.name in ("server", "strings", "hardening", "replication", "inspect", "export",
                             "backlog", "interop", "shared", "security", "eviction")
               for b in s.benchmarks),
             # the cluster's rows: ten times the requests (redis-benchmark's quarter seconds,
             # and turns long enough for a ratio read to a few percent)
             *(b.key for s in bench.SECTIONS if s.name == "cluster" for b in s.benchmarks)}
# What a figure's value cell prints after its number, by Figure.unit.
UNIT_SUFFIX = {"x": "x", "/s": "/s", "": "", "count": "", "s": " s", "ms": " ms", "us": " us",
               "MB": " MB"}


def _check_rows(out: str, sections: tuple[bench.Section, ...], n: int) -> None:
    lines = out.splitlines()
    for section in sections:
        for b in section.benchmarks:
            row = [ln for ln in lines if ln.startswith(section.name) and f"  {b.workload}  " in ln]
            assert len(row) == 1, (b.key, out)
            m = re.search(rf"  ({NUMBER})  +({NUMBER})  +({NUMBER})(?:  |$)", row[0])
            assert m, row[0]
            ops, rate, us = map(_num, m.groups())
            if b.key in OWN_COUNT:
                assert ops > 0
            else:
                assert ops == n
            assert rate > 0 and us > 0
            assert_same_rate(m.group(2), m.group(3))
            if b.target is not None:
                assert f">= {b.target:,}" in row[0]
                assert re.search(r"  (PASS|FAIL)$", row[0])


def _figure_rows(out: str) -> dict[str, str]:
    """Each derived figure's printed value cell, by label."""
    rows = {}
    for figure in bench.FIGURES:
        row = [ln for ln in out.splitlines()
               if ln.startswith(figure.section) and f"  {figure.label}  " in ln]
        if row:
            assert len(row) == 1, (figure.label, out)
            rows[figure.label] = row[0].split(figure.label, 1)[1].strip()
    return rows


def _check_figures(out: str, sections: tuple[bench.Section, ...] = bench.SECTIONS) -> None:
    """Every figure of the benchmarks in ``sections`` printed once with a positive number in its
    unit (and a verdict if it has a target); no other figure printed."""
    keys = {b.key for s in sections for b in s.benchmarks}
    figures = [f for f in bench.FIGURES if f.numerator in keys]
    rows = _figure_rows(out)
    assert set(rows) == {f.label for f in figures}, out
    for figure in figures:
        cell = rows[figure.label]
        m = re.match(rf"(-?{NUMBER})(x|/s| s| ms| us| MB)?(?:  |$)", cell)
        assert m, (figure.label, cell)
        # (a fill that allocates no lasting containers triggers no collection: time 0; an
        # in-memory peer keeps nothing of what it was told before a SIGKILL; a latency under
        # the printed precision reads 0.0; a hit rate may be at or above redis-server's)
        assert _num(m.group(1)) > 0 or figure.unit in ("ms", "us") or figure.label.endswith(
            ("collections during the fill", "after SIGKILL: burner-redis",
             "points below redis-server's"))
        assert (m.group(2) or "") == UNIT_SUFFIX[figure.unit]
        if figure.target is not None:
            assert re.search(rf"  {'<=' if figure.at_most else '>='} ", cell), cell
            assert re.search(r"  (PASS|FAIL)$", cell), cell


def _aof_root(out: str) -> str:
    return re.search(r"^data: data dirs under (\S+) ", out, re.M).group(1)


def _targets(sections: tuple[bench.Section, ...]) -> int:
    keys = {b.key for s in sections for b in s.benchmarks}
    return (sum(b.target is not None for s in sections for b in s.benchmarks)
            + sum(f.target is not None for f in bench.FIGURES if f.numerator in keys))


# Sections a test below runs on its own at a quick size: the every-row run leaves them out, so
# that no section runs twice (the suite's time) and no one test runs for minutes.
OWN_TESTS = ("snapshot", "server", "strings", "replication", "inspect", "queue", "memory",
             "nodes", "consume", "crashbench", "shared",
             "types",  # (tests/tools/bench/test_datatypes.py)
             "lists")  # (tests/tools/bench/test_lists.py)


def test_every_section_is_run_by_some_test() -> None:
    names = {s.name for s in bench.SECTIONS}
    assert set(OWN_TESTS) <= names
    assert names - set(OWN_TESTS) >= {"embedded", "aof", "redis-py"}  # what RATIOS compare


# The sections no test below runs on their own, a few at a time (each a test: the suite's
# workers share them out). The first holds every section a ratio compares.
EVERY_ROW_GROUPS: tuple[tuple[str, ...], ...] = (
    ("embedded", "aof", "redis-py"),
    *((s.name,) for s in bench.SECTIONS
      if s.name not in OWN_TESTS and s.name not in ("embedded", "aof", "redis-py")),
)


def test_the_every_row_groups_hold_every_other_section() -> None:
    names = [name for group in EVERY_ROW_GROUPS for name in group]
    assert sorted(names) == sorted(s.name for s in bench.SECTIONS if s.name not in OWN_TESTS)
    keys = {b.key for s in bench.select_sections(",".join(EVERY_ROW_GROUPS[0]))
            for b in s.benchmarks}
    assert {k for r in bench.RATIOS for k in (r.numerator, r.denominator)} <= keys


# The export section starts Spark's JVM: on a machine shared with other jobs that alone can
# take most of the suite's default two minutes. (A safety net against a hang.)
@pytest.mark.timeout(600)
@pytest.mark.redis
@pytest.mark.parametrize("group", EVERY_ROW_GROUPS, ids=lambda group: "+".join(group))
def test_bench_quick_prints_every_row(capsys: pytest.CaptureFixture[str],
                                      group: tuple[str, ...]) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server not on PATH: the bench's reference rows need it")
    sections = bench.select_sections(",".join(group))
    names = ",".join(s.option or s.name for s in sections)
    # Targets never fail the run without --strict.
    assert bench.main(["--quick", "--sections", names]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()

    assert re.search(r"machine: \d+ cores", out)
    assert "Python 3." in out

    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS(, \d not measured)?$",
                     out, re.M)
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    if group == EVERY_ROW_GROUPS[0]:
        assert not os.path.exists(_aof_root(out))
        assert re.search(r"reference: redis-server \d+\.\d+\.\d+ on 127\.0\.0\.1:\d+", out)
        for ratio in bench.RATIOS:
            row = [ln for ln in lines
                   if ln.startswith(ratio.workload) and ratio.reference in ln]
            assert len(row) == 1, (ratio, out)
            assert _num(re.search(rf"({NUMBER})x$", row[0]).group(1)) > 0
    assert "skipped" not in out and "n/a" not in out


def test_bench_aof_section_rows_and_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "--no-redis", "--sections", "embedded,aof"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("embedded,aof")
    assert [s.name for s in sections] == ["embedded", "aof"]
    assert "sections embedded, aof" in out
    assert not re.search(r"^redis-py ", out, re.M)  # not selected: no rows, not even skipped
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS$", out, re.M)
    root = _aof_root(out)
    assert os.path.dirname(root) == tempfile.gettempdir()  # /tmp unless TMPDIR says otherwise
    assert not os.path.exists(root)  # every data directory removed


def test_bench_snapshot_section_prints_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    n = 200  # a 1,000-entry stream; the bounded-disk loop runs DISK_OPS_QUICK_FACTOR x n XADDs
    assert bench.main(["--n", str(n), "--no-redis", "--sections", "snapshot"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("snapshot")
    assert [s.name for s in sections] == ["snapshot"]
    assert not re.search(r"^(embedded|aof|redis-py) ", out, re.M)
    assert not re.search(r"^aof: ", out, re.M)  # no AOF-section directory was used
    _check_rows(out, sections, n)
    entries = n * bench.SNAPSHOT_ENTRIES_PER_N
    assert re.search(rf"^snapshot +entries loaded from the snapshot .*  {entries:,}  ", out, re.M)
    disk_ops = n * bench.DISK_OPS_QUICK_FACTOR
    assert re.search(rf"^snapshot +XADD MAXLEN ~ .*  {disk_ops:,}  ", out, re.M)
    _check_figures(out, sections)
    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS$", out, re.M)

    # the no-pause latency table: both phases over the same number of XADDs, p50..max each
    cells = rf"({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER})$"
    without = re.search(rf"^snapshot +without a compaction(?: \(.*\))? +{cells}", out, re.M)
    during = re.search(rf"^snapshot +during a compaction: a [\d.]+ s window of its [\d.]+ s "
                       rf"+{cells}", out, re.M)
    assert without and during, out
    assert _num(without.group(1)) == _num(during.group(1)) > 0
    for m in (without, during):
        p50, p99, p999, worst = map(_num, m.groups()[1:])
        assert 0 < p50 <= p99 <= p999 <= worst

    # bounded disk: a size per tenth of the run, and the compactions it saw
    series = re.search(r"^snapshot: bounded disk: .*MB at 10%.*: ((?:[\d.]+ ?){10})$", out, re.M)
    assert series, out
    sizes = [float(x) for x in series.group(1).split()]
    assert min(sizes) >= 0 and max(sizes) > 0
    assert re.search(r"^snapshot: bounded disk: \d+ compactions ran, seconds each", out, re.M)
    root = re.search(r"^data: data dirs under (\S+) ", out, re.M).group(1)
    assert not os.path.exists(root)


def test_figure_with_a_maximum() -> None:
    ratio = bench.Figure("snapshot", "r", "snapshot.load", extra="r", target=2.0, at_most=True)
    assert bench.FigureResult(ratio, 1.9).verdict == "PASS"
    assert bench.FigureResult(ratio, 2.1).verdict == "FAIL"
    assert bench.format_target(2.0, "x", at_most=True) == "<= 2x"
    assert [bench.Figure("s", "l", "k", unit=u).format(1234.5) for u in ("s", "ms", "us", "MB",
                                                                       "count")] == [
        "1234.500 s", "1234.5 ms", "1,234.5 us", "1234.50 MB", "1,234"]


def test_bench_aof_alone_has_no_in_memory_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--n", "300", "--no-redis", "--sections", "aof"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"^embedded ", out, re.M)
    rows = _figure_rows(out)
    ratio = next(f for f in bench.FIGURES if f.section == "aof")  # the section's first
    assert ratio.denominator == "embedded.xadd"
    assert rows[ratio.label].startswith("n/a (embedded.xadd not run)")
    assert rows[ratio.label].endswith("n/a")  # its verdict
    assert re.search(r"^targets: \d+/\d+ PASS, 1 not measured$", out, re.M)
    assert not os.path.exists(_aof_root(out))


def test_bench_sections_option() -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["bench", "--sections", "aof,redis"]).sections == "aof,redis"
    assert [s.name for s in bench.select_sections("redis,embedded")] == ["embedded", "redis-py"]
    assert [s.name for s in bench.select_sections("redis-py")] == ["redis-py"]
    assert bench.select_sections(None) == bench.SECTIONS
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--sections", "embedded,nope"])
    with pytest.raises(ValueError, match="nope"):
        bench.select_sections("nope")


def test_aof_threads_counts_group_commit(tmp_path: os.PathLike[str]) -> None:
    m = bench.bench_aof_threads(os.path.join(tmp_path, "d"), 4, 400, 2.0)
    assert m.count == 400 and m.rate > 0
    assert m.figures["records_per_fsync"] >= 1


def test_aof_replay_counts_records(tmp_path: os.PathLike[str]) -> None:
    m = bench.bench_aof_replay(os.path.join(tmp_path, "d"), 1_050)
    # 1,050 XADDs, 10 full chunks each read + acked, 4 XGROUP CREATEs
    assert m.count == 1_050 + 2 * 10 + bench.REPLAY_STREAMS
    assert m.rate > 0 and m.figures["effects_per_s"] > m.rate


def test_bench_without_redis_skips_reference_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--n", "500", "--no-redis", "--sections", "embedded,redis"]) == 0
    out = capsys.readouterr().out
    assert "reference: none (disabled (--no-redis))" in out
    assert re.search(r"^embedded +XADD, 1 thread +500 +[\d,]+ ", out, re.M)
    assert re.search(r"^redis-py +XADD, one at a time +500 +skipped", out, re.M)
    assert "embedded  / reference" not in out  # no ratios without the reference


def test_strict_fails_on_a_missed_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = bench.Section("embedded", (bench.Benchmark("embedded.x", "x", lambda env: 1.0,
                                                      target=2.0),))
    monkeypatch.setattr(registry, "SECTIONS", (slow,))
    assert bench.main(["--n", "10", "--no-redis"]) == 0
    assert bench.main(["--n", "10", "--no-redis", "--strict"]) == 1
    assert "targets: 0/1 PASS" in capsys.readouterr().out


def test_strict_fails_on_a_missed_figure_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = bench.Section("aof", (
        bench.Benchmark("aof.a", "a", lambda env: bench.Measurement(10.0, 3, {"k": 1.0})),
        bench.Benchmark("aof.b", "b", lambda env: 40.0),
    ))
    figures = (bench.Figure("aof", "a per b", "aof.a", denominator="aof.b", target=0.5),
               bench.Figure("aof", "k of a", "aof.a", extra="k", unit="", target=1))
    monkeypatch.setattr(registry, "SECTIONS", (fast,))
    monkeypatch.setattr(registry, "FIGURES", figures)
    assert bench.main(["--n", "10", "--no-redis", "--strict"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^aof +a +3 +10\.0 ", out, re.M)  # the Measurement's own count
    assert re.search(r"^aof +a per b +0\.25x +>= 0\.5x +FAIL$", out, re.M)
    assert re.search(r"^aof +k of a +1\.0 +>= 1 +PASS$", out, re.M)
    assert "targets: 1/2 PASS" in out


@pytest.mark.redis
def test_bench_server_section_quick(capsys: pytest.CaptureFixture[str]) -> None:
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH: the server section needs it")
    # (its size is what keeps it short: the rows' counts are the quick N, checked below)
    assert cli.main(["bench", "--sections", "server", "--quick"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("server")
    assert [s.name for s in sections] == ["server"]
    assert not re.search(r"^(embedded|aof|redis-py|snapshot) ", out, re.M)
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS$", out, re.M)
    assert "skipped" not in out and "n/a" not in out

    # which server runs which config, both started (and removed) by the bench
    assert re.search(r"^server: streamkeep \S+ on 127\.0\.0\.1:\d+, a child process .*"
                     r"--appendfsync everysec", out, re.M)
    assert re.search(r"^server: streamkeep .*--appendfsync always", out, re.M)
    assert re.search(r'^server: redis-server \d+\.\d+\.\d+ on 127\.0\.0\.1:\d+ .*--save "" '
                     r"--appendonly yes --appendfsync everysec", out, re.M)
    assert re.search(r"^server: redis-benchmark \S+ -c 50 .* XADD mystream \* myfield myvalue",
                     out, re.M)
    for data_dir in re.findall(r"data dir under (\S+),", out):
        assert not os.path.exists(data_dir)

    # the side-by-side summary: ops/s of both servers and their ratio, latencies in ms
    rate, ms = rf"({NUMBER})/s", rf"({NUMBER}) ms"
    for pipeline in (1, 16):
        m = re.search(rf"^XADD, 50 clients, -P {pipeline} +{rate} +{rate} +({NUMBER})x", out, re.M)
        assert m, out
        mine, theirs, ratio = map(_num, m.groups())
        assert mine > 0 and theirs > 0
        assert ratio == pytest.approx(mine / theirs, abs=0.01)
    for pipeline, target in ((1, speed.SERVER_P1_TARGET), (16, speed.SERVER_P16_TARGET)):
        assert re.search(rf"^XADD, 50 clients, -P {pipeline} +.*>= {target}x +(met|not met)$",
                         out, re.M), out
    assert re.search(rf"^XADD, 50 clients, -P 16, streamkeep appendfsync always +{rate} +-$",
                     out, re.M)
    latency = {}
    for name in ("p50", "p99", "p99.9", "max"):
        m = re.search(rf"^latency {re.escape(name)} +{ms} +{ms} ", out, re.M)
        assert m, (name, out)
        latency[name] = tuple(map(_num, m.groups()))
    for i in (0, 1):  # streamkeep, redis-server
        p50, p99, p999, worst = (latency[k][i] for k in ("p50", "p99", "p99.9", "max"))
        assert 0 < p50 <= p99 <= p999 <= worst
    assert re.search(r"^latency p99\.9 .*<= 2 ms +(met|not met)$", out, re.M)

    # a histogram per server: every bucket, counts adding up to the messages measured
    for server in ("streamkeep", "redis-server"):
        block = next(b for b in out.split("\n\n") if re.search(rf"^{server} +0-1 ms ", b, re.M))
        total = int(_num(re.search(rf"^latency of +XADD -> XREADGROUP reply, ({NUMBER}) "
                                   r"messages +count +share$", block, re.M).group(1)))
        rows = re.findall(rf"^{server} +(\d+)(?:-(\d+))?\+? ms +({NUMBER}) +([\d.]+)%$", block,
                          re.M)
        assert [r[0] for r in rows] == ["0", "1", "2", "3", "5", "10"], block
        assert sum(int(_num(r[2])) for r in rows) == total > 0
        assert sum(float(r[3]) for r in rows) == pytest.approx(100, abs=0.1)
        assert re.search(rf"^server: latency, {server}: p50 by second of the run: ", out, re.M)
        key = "server.latency" if server == "streamkeep" else "server.redis_latency"
        assert re.search(rf"^server: {key}: .*sent_per_s {NUMBER}, writes {NUMBER}, .*"
                         rf"harness_cpu {NUMBER}, server_cpu {NUMBER}$", out, re.M), out


def test_bench_server_is_a_section_name() -> None:
    parser = cli.build_parser()
    opts = parser.parse_args(["bench", "server", "--quick"])
    assert opts.only == ["server"] and opts.quick
    assert [s.name for s in bench.select_sections(bench.section_names(opts))] == ["server"]
    opts = parser.parse_args(["bench", "--sections", "embedded", "server"])
    assert [s.name for s in bench.select_sections(bench.section_names(opts))] == [
        "embedded", "server"]
    assert bench.section_names(parser.parse_args(["bench"])) is None  # everything
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "nope"])


def test_bench_replication_section_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("redis-benchmark") is None:
        pytest.fail("redis-benchmark not on PATH: the replication section's -P 16 rows need it")
    n = 200  # 5,000 requests per redis-benchmark run (its minimum); a 1,000-entry full sync
    # (its size is what keeps it short: every row's count is checked below)
    assert bench.main(["--n", str(n), "--no-redis", "replication"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("replication")
    assert [s.name for s in sections] == ["replication"]
    assert not re.search(r"^(embedded|aof|redis-py|snapshot|server|hardening) ", out, re.M)
    _check_rows(out, sections, n)
    _check_figures(out, sections)
    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS$", out, re.M)
    assert "skipped" not in out and "n/a" not in out

    # each row's own count: the requests, the XADDs, the backlog, the entries synced
    rows = {b.key: re.search(rf"^replication +{re.escape(b.workload)} +({NUMBER}) ", out, re.M)
            for s in sections for b in s.benchmarks}
    counts = {key: _num(m.group(1)) for key, m in rows.items() if m}
    assert counts["replication.xadd_p16"] == counts["replication.xadd_p16_replica"] == 5_000
    assert counts["replication.embedded_xadd"] == counts["replication.embedded_xadd_replica"] == n
    assert counts["replication.apply"] == n
    assert counts["replication.full_sync"] == 5 * n
    assert 0 < counts["replication.lag"] <= 10_000  # 1 s at 10,000/s, the first 0.5 s not counted

    # the notes: the replica caught up, the same records replayed, the lag percentiles in order
    assert re.search(r"^replication: XADD -P 16 with a replica: it had every record "
                     rf"{NUMBER} ms after .*; replica CPU {NUMBER} us per XADD$", out, re.M)
    assert re.search(rf"^replication: replication\.apply: apply_s {NUMBER}, replay_s {NUMBER}, "
                     rf"replayed_records {n:,}$", out, re.M), out
    lag = re.search(rf"^replication: lag: .* all seen on the replica, .* p50 ({NUMBER}) ms, p99 "
                    rf"({NUMBER}) ms, p99\.9 ({NUMBER}) ms, max ({NUMBER}) ms$", out, re.M)
    assert lag, out
    p50, p99, p999, worst = map(_num, lag.groups())
    assert 0 < p50 <= p99 <= p999 <= worst
    assert re.search(rf"^replication: replication\.full_sync: answering_s {NUMBER}, snapshot_mb "
                     rf"{NUMBER}, snapshot_lsn {NUMBER}$", out, re.M), out
    root = re.search(r"^data: data dirs under (\S+) ", out, re.M).group(1)
    assert not os.path.exists(root)


def test_bench_inspect_section_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    """`streamkeep bench inspect` at a tiny size: both rows run the real commands (verify,
    dump --format json) in child processes, with their peak RSS as figures."""
    assert bench.main(["--n", "400", "--no-redis", "inspect"]) == 0
    out = capsys.readouterr().out
    for b in bench.select_sections("inspect")[0].benchmarks:
        assert re.search(rf"^inspect +{re.escape(b.workload)} +2,000 ", out, re.M), out
    assert re.search(r"^inspect +aof verify: peak RSS +[\d.]+ MB", out, re.M), out
    assert re.search(r"^inspect: inspect\.dump_json: segments_mb [\d.]+, wall_s [\d.]+$", out,
                     re.M), out


@pytest.mark.redis
def test_bench_queue_section(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row, the redis-server loop that the redis-py row is compared with among them."""
    assert bench.main(["--quick", "--sections", "queue"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("queue")
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert "persist-queue SQLiteAckQueue" in out and "skipped" not in out
    assert re.search(r"^queue +redis-py: StreamQueue on streamkeep serve / plain loop on "
                     r"redis-server +[\d.]+x +>= 0\.8x +(PASS|FAIL)$", out, re.M), out


def test_bench_shared_section(capsys: pytest.CaptureFixture[str]) -> None:
    """Every row and figure; no shared server it started is left running."""
    from tests.support.shared_dirs import servers_under

    assert bench.main(["--quick", "--no-redis", "--sections", "shared"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("shared")
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert "skipped" not in out
    assert re.search(r"^shared +4 processes: shared / persist-queue +[\d.]+x +>= 10x +"
                     r"(PASS|FAIL)$", out, re.M), out
    root = re.search(r"^data: data dirs under (\S+) ", out, re.M).group(1)
    assert not os.path.exists(root)
    assert servers_under(root) == []


@pytest.mark.redis
def test_bench_memory_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "--sections", "memory"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("memory")
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert "skipped" not in out


@pytest.mark.redis
def test_bench_strings_section_quick(capsys: pytest.CaptureFixture[str]) -> None:
    """SET, GET and EVALSHA rows against both servers, and their ratios."""
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH: the strings section needs it")
    assert cli.main(["bench", "--sections", "strings", "--quick"]) == 0
    out = capsys.readouterr().out
    sections = bench.select_sections("strings")
    assert [s.name for s in sections] == ["strings"]
    assert re.search(rf"^targets: \d+/{_targets(sections)} PASS(, 1 not measured)?$", out,
                     re.M)
    _check_rows(out, sections, bench.QUICK_N)
    _check_figures(out, sections)
    assert "skipped" not in out and "n/a" not in out
    assert re.search(r"^strings: redis-benchmark -n: [\d,]+; -r: 100,000; --dbnum: 9$", out, re.M)
    assert re.search(r"^strings: strings\.redis_get_p16: p50_ms [\d.]+, p99_ms [\d.]+, "
                     r"server_cpu_us [\d.]+$", out, re.M)
