"""`streamkeep aof stats`: counts by command, key, database, time bucket and size, for a data
directory and for one segment; the table and the JSON; damage."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import streamkeep.engine.commands  # noqa: F401  (the table effect_command reads)
from streamkeep.aof.manifest import encode_doc
from streamkeep.engine.exec.table import effect_command, effect_vocabulary
from tests.support.aof_inspect_data import build_workload, records, run_cli


@pytest.fixture(scope="module")
def datadir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("stats") / "data")
    build_workload(path, aof_segment_max_bytes=2048)
    return path


def stats_json(*args: str) -> dict[str, Any]:
    done = run_cli("aof", "stats", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_json_counts_match_the_records(datadir: str) -> None:
    doc = stats_json(datadir)
    recs = records(datadir)
    assert doc["records"] == len(recs)
    assert doc["effects"] == sum(len(r[3]) for r in recs)
    assert (doc["first_lsn"], doc["last_lsn"]) == (1, len(recs))
    per_command = Counter(effect_command(e) for r in recs for e in r[3])
    assert {k: v["effects"] for k, v in doc["commands"].items()} == dict(per_command)
    assert doc["commands"]["XADD"]["records"] == sum(
        any(e[0] == b"XADD" for e in r[3]) for r in recs)
    assert doc["commands"]["SK.XCONSUMER"]["streamkeep_only"] is True
    assert doc["commands"]["XADD"]["streamkeep_only"] is False
    assert all(v["bytes"] > 0 for v in doc["commands"].values())
    # databases: the transaction's SELECT 1 counts its later effects in db 1
    assert set(doc["databases"]) == {"0", "1"}
    # in the transaction: XADD, XGROUP CREATE; then XADD, and XREADGROUP's XCLAIM (of both
    # entries), XGROUP SETID and SK.XCONSUMER
    assert doc["databases"]["1"]["effects"] == 6
    assert doc["databases"]["1"]["records"] == 3
    segs = [f for f in os.listdir(datadir) if f.endswith(".aof")]
    assert len(doc["segments"]) == len(segs) > 2
    assert sum(s["records"] for s in doc["segments"]) == len(recs)
    assert sum(s["end"] - 32 for s in doc["segments"]) == doc["bytes"]
    assert doc["damage"] is None and doc["fsync"] is None


def test_top_keys(datadir: str) -> None:
    doc = stats_json("--top", "2", datadir)
    top = doc["keys"]["top"]
    assert [k["key"] for k in top] == ["orders", "capped"]
    assert top[0]["effects"] >= top[1]["effects"]
    # orders, other, capped, the binary one, événements, scratch, scratch2, gone
    assert doc["keys"]["distinct"] == 8
    binary = [k for k in stats_json("--top", "50", datadir)["keys"]["top"]
              if isinstance(k["key"], dict)]
    assert len(binary) == 1 and set(binary[0]["key"]) == {"b64"}


def test_time_buckets(datadir: str) -> None:
    minutes = stats_json("--bucket", "1m", datadir)["time_buckets"]
    assert minutes["width"] == "1m"
    starts = [b["start_ms"] for b in minutes["buckets"]]
    assert len(starts) == 3 and all(s % 60_000 == 0 for s in starts)
    assert sum(b["records"] for b in minutes["buckets"]) == len(records(datadir))
    days = stats_json("--bucket", "1d", datadir)["time_buckets"]["buckets"]
    assert len(days) == 1 and days[0]["start"].endswith("T00:00:00.000Z")


def test_record_sizes(datadir: str) -> None:
    sizes = stats_json(datadir)["record_sizes"]
    assert sizes["min"] <= sizes["percentiles"]["p50"] <= sizes["percentiles"]["p99"] \
        <= sizes["max"] == sizes["percentiles"]["p100"]
    assert sum(h["records"] for h in sizes["histogram"]) == len(records(datadir))
    for h in sizes["histogram"]:
        assert h["min"] <= h["max"]


def test_one_segment(datadir: str) -> None:
    seg = sorted(f for f in os.listdir(datadir) if f.endswith(".aof"))[0]
    doc = stats_json(os.path.join(datadir, seg))
    assert len(doc["segments"]) == 1 and doc["segments"][0]["segment"] == 1
    assert doc["records"] == doc["segments"][0]["records"] > 0


def test_table(datadir: str) -> None:
    done = run_cli("aof", "stats", "--top", "3", datadir)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    for title in ("Commands", "Top 3 keys", "Databases", "Per 1h", "Record sizes",
                  "Segments"):
        assert title in out
    assert "streamkeep-only" in out and "orders" in out and "\x1b[" not in out


def test_damage(tmp_path: Any) -> None:
    path = str(tmp_path / "data")
    build_workload(path)
    seg = Path(path) / "segment-000001.aof"
    data = seg.read_bytes()
    seg.write_bytes(data[: len(data) - 3])  # a torn tail
    done = run_cli("aof", "stats", "--json", path)
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr and str(seg).encode() in done.stderr
    doc = json.loads(done.stdout)
    assert doc["records"] == len(records(path))  # the good ones
    assert "torn tail" in doc["damage"] and "byte offset" in doc["damage"]
    assert run_cli("aof", "stats", str(tmp_path / "nope")).returncode == 3
    assert run_cli("aof", "stats", "--bucket", "1y", path).returncode == 3


def test_missing_records_between_segments(tmp_path: Any) -> None:
    path = Path(tmp_path / "data")
    build_workload(str(path), aof_segment_max_bytes=2048)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["segments"][1]["first_lsn"] += 1  # and its header says so
    second = manifest["segments"][1]
    from streamkeep.aof.codec import HEADER_SIZE, encode_header

    seg = path / second["file"]
    data = seg.read_bytes()
    seg.write_bytes(encode_header(second["segment"], second["first_lsn"]) + data[HEADER_SIZE:])
    (path / "manifest.json").write_bytes(encode_doc(manifest))
    done = run_cli("aof", "stats", "--json", str(path))
    assert done.returncode == 2 and b"records missing" in done.stderr
    assert json.loads(done.stdout)["segments"][0]["damage"].endswith("(records missing)")


# the effects the other value types' commands log (their shapes in engine.model.effects'
# vocabulary once their commands exist): each named as it is, known by the vocabulary
TYPE_EFFECTS = [
    [b"ZADD", b"z", b"1", b"a", b"2", b"b"], [b"ZREM", b"z", b"a"],
    [b"ZINCRBY", b"z", b"2", b"b"], [b"ZUNIONSTORE", b"dst", b"2", b"z", b"src"],
    [b"SADD", b"s1", b"m"], [b"SMOVE", b"s1", b"s2", b"m"],
    [b"HSET", b"h", b"f", b"v"], [b"HPEXPIREAT", b"h", b"1800000000000", b"FIELDS", b"1", b"f"],
]


@pytest.fixture(scope="module")
def typed_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A log of a stream's XADD, then one record per TYPE_EFFECTS effect (appended as the
    engine logs a command's effects)."""
    from streamkeep import Engine

    path = str(tmp_path_factory.mktemp("typed") / "data")
    with Engine.open(path, clock=lambda: 1_795_000_000_000) as engine:
        engine.execute("XADD", "orders", "1-1", "a", "b")
        with engine.lock:
            for effect in TYPE_EFFECTS:
                journal = engine.datadir.journal  # type: ignore[union-attr]
                journal.append(1_795_000_000_000, 0, [effect])
    return path


def test_every_types_effects_are_named_and_their_keys_counted(typed_log: str) -> None:

    doc = stats_json("--top", "50", typed_log)
    commands = doc["commands"]
    assert {name: row["effects"] for name, row in commands.items()} == {
        "XADD": 1, "ZADD": 1, "ZREM": 1, "ZINCRBY": 1, "ZUNIONSTORE": 1, "SADD": 1, "SMOVE": 1,
        "HSET": 1, "HPEXPIREAT": 1}
    for name, row in commands.items():
        assert row["known"] == (name in effect_vocabulary()), name
        assert row["streamkeep_only"] in ((False,) if row["known"] else (None,))
    keys = {k["key"]: k["effects"] for k in doc["keys"]["top"]}
    # a *STORE's destination (not its sources), both keys of SMOVE
    assert keys == {"orders": 1, "z": 3, "dst": 1, "s1": 2, "s2": 1, "h": 2}
    table = run_cli("aof", "stats", typed_log).stdout.decode()
    rows = {cells[1]: cells for line in table.splitlines()
            if len(cells := [c.strip() for c in line.split("\u2502")]) > 2}
    for name in commands:
        assert (rows[name][-2] == "UNKNOWN") == (name not in effect_vocabulary()), rows[name]


def test_dump_filters_other_types_effects(typed_log: str) -> None:
    def effects(*args: str) -> list[list]:
        done = run_cli("aof", "dump", "--format", "json", *args, typed_log)
        assert done.returncode == 0, done.stderr
        return [e for line in done.stdout.decode().splitlines()
                for e in json.loads(line)["effects"]]

    assert effects("--key", "s2") == [["SMOVE", "s1", "s2", "m"]]
    assert [e[0] for e in effects("--key", "z")] == ["ZADD", "ZREM", "ZINCRBY"]
    assert effects("--command", "zunionstore") == [["ZUNIONSTORE", "dst", "2", "z", "src"]]
