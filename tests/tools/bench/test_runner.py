"""tools/bench/runner.py, the one runner: the rows a ratio compares run in turns (A B A B ...),
each row keeps its best repeat (by its rank) and every repeat's rate, a skipped row says why,
and the runner tells the progress what runs."""

from __future__ import annotations

from streamkeep.tools.bench.declarations import Benchmark, Section, extra, ratio
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.runner import groups, run_benchmarks
from streamkeep.tools.bench.workload import Measurement, Skip


def _section(calls: list[str]) -> Section:
    def row(name: str, rates: list[float]) -> Benchmark:
        def run(env: object) -> Measurement:
            calls.append(name)
            return Measurement(rates[calls.count(name) - 1], figures={"p": -len(calls)})
        return Benchmark(name, f"row {name}", run)

    def skipped(env: object) -> float:
        calls.append("s")
        raise Skip("nothing to measure it with")

    return Section("x", (row("a", [5.0, 9.0, 7.0]), row("b", [1.0, 2.0, 3.0]),
                         row("c", [4.0, 6.0, 5.0]), row("d", [8.0, 1.0, 2.0]),
                         Benchmark("s", "row s", skipped)),
                   figures=(ratio("a / c", "a", "c"), extra("d's p", "d", "p"),
                            ratio("b / a", "b", "a"), ratio("s / b", "s", "x.b")))


def test_the_rows_a_ratio_compares_run_in_turns() -> None:
    calls: list[str] = []
    section = _section(calls)
    assert [[b.key for _s, b in g] for g in groups([section])] == [
        ["x.a", "x.b", "x.c", "x.s"], ["x.d"]]
    with BenchEnv(10, use_redis=False) as env:
        results = run_benchmarks(env, [section], repeat=3)
    # a, b, c and s (its ratio with b) in turns, s once (skipped), then d alone
    assert calls == ["a", "b", "c", "s", "a", "b", "c", "a", "b", "c", "d", "d", "d"]
    by_key = {r.bench.key: r for r in results}
    assert [r.bench.key for r in results] == ["x.a", "x.b", "x.c", "x.d", "x.s"]  # row order
    assert (by_key["x.a"].rate, by_key["x.a"].runs) == (9.0, [5.0, 9.0, 7.0])
    assert by_key["x.d"].rate == 8.0 and by_key["x.d"].figures == {"p": -11}  # the best's
    assert (by_key["x.s"].rate, by_key["x.s"].skipped) == (None, "nothing to measure it with")
    assert env.results == by_key


def test_a_rows_rank_picks_its_best_repeat() -> None:
    runs = iter([Measurement(10.0, figures={"p99": 5.0}), Measurement(1.0, figures={"p99": 2.0}),
                 Measurement(5.0, figures={"p99": 9.0})])
    section = Section("x", (Benchmark("lat", "latency", lambda env: next(runs),
                                      rank=lambda m: -m.figures["p99"]),))
    with BenchEnv(10, use_redis=False) as env:
        (result,) = run_benchmarks(env, [section], repeat=3)
    assert (result.rate, result.figures, result.runs) == (1.0, {"p99": 2.0}, [10.0, 1.0, 5.0])


def test_the_progress_hears_each_repeat_and_each_finished_row() -> None:
    heard: list[tuple[object, ...]] = []

    class Progress:
        def started(self, result, repeat, repeats, done, total):  # type: ignore[no-untyped-def]
            heard.append(("started", result.bench.key, repeat, repeats, done, total))

        def finished(self, result, done, total):  # type: ignore[no-untyped-def]
            heard.append(("finished", result.bench.key, result.rate, done, total))

    section = Section("x", (Benchmark("a", "a", lambda env: 2.0),
                            Benchmark("b", "b", lambda env: 1.0)), figures=(
        ratio("a / b", "a", "b"),))
    with BenchEnv(10, use_redis=False) as env:
        run_benchmarks(env, [section], repeat=2, progress=Progress())
    assert heard == [("started", "x.a", 1, 2, 0, 2), ("started", "x.b", 1, 2, 0, 2),
                     ("started", "x.a", 2, 2, 0, 2), ("finished", "x.a", 2.0, 1, 2),
                     ("started", "x.b", 2, 2, 1, 2), ("finished", "x.b", 1.0, 2, 2)]
