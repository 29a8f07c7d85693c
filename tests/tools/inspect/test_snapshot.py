"""`streamkeep snapshot info|dump` on real snapshots: what they print (text and JSON), filters,
binary-safe names and values, and the exit status for a damaged or missing snapshot."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools.main import main
from tests.support import v3_snapshot as v3

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("snap") / "data"
    with Engine.open(str(d)) as db:
        for i in range(250):
            db.execute("XADD", "orders", f"{i + 1}-0", "item", str(i), "bin", "x")
        db.execute("XADD", b"b\xffk", "1-1", b"f\x00", b"\xfe\n")
        db.execute("SELECT", "2")
        db.execute("XADD", "other", "5-5", "a", "b")
        db.execute("SELECT", "0")
        db.execute("XGROUP", "CREATE", "orders", "g", "0")
        db.execute("XREADGROUP", "GROUP", "g", "alice", "COUNT", "7", "STREAMS", "orders", ">")
        db.execute("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "orders", ">")
        db.execute("XDEL", "orders", "100-0")
        db.compact()
    return d


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_info_json_reports_meta_streams_groups_and_consumers(datadir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "snapshot", "info", str(datadir), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["format"] == "streamkeep-snapshot" and doc["streams"] == 3
    assert doc["entries"] == 251 and doc["lsn"] > 250
    streams = {(s["db"], json.dumps(s["key"])): s for s in doc["stream_list"]}
    orders = streams[(0, '"orders"')]
    assert orders["length"] == 249 and orders["max_deleted_id"] == "100-0"
    assert orders["first_id"] == "1-0" and orders["last_id"] == "250-0"
    (group,) = orders["groups"]
    assert group["last_delivered_id"] == "10-0" and group["pending"] == 10
    assert {c["name"]: c["pending"] for c in group["consumers"]} == {"alice": 7, "bob": 3}
    binary = streams[(0, json.dumps({"b64": base64.b64encode(b"b\xffk").decode()}))]
    assert binary["length"] == 1
    assert (2, '"other"') in streams


@pytest.fixture(scope="module")
def keyed_datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Strings, with and without a TTL, beside a stream with a TTL (an injected clock)."""
    d = tmp_path_factory.mktemp("keys") / "data"
    with Engine.open(str(d), clock=lambda: 1_700_000_000_000) as db:
        db.execute("XADD", "jobs", "1-1", "f", "v")
        db.execute("PEXPIREAT", "jobs", "1700000060000")
        db.execute("SET", "lock", "token-1", "PXAT", "1700000030000")
        db.execute("SET", b"bin\xff", b"\x00v")
        db.execute("SELECT", "3")
        db.execute("SET", "counter", "41")
        db.compact()
    return d


def test_info_counts_strings_and_ttls(keyed_datadir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "snapshot", "info", str(keyed_datadir), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert (doc["strings"], doc["keys_with_ttl"]) == (3, 2)
    (jobs,) = doc["stream_list"]
    assert jobs["expires_ms"] == 1700000060000
    rc, out, _ = run(capsys, "snapshot", "info", str(keyed_datadir))
    words = " ".join(out.split())  # the header wraps at the width
    assert "3 string keys, 2 keys with a TTL" in words
    assert "2023-11-14T22:14:20.000Z" in out  # the stream's expiry time


def test_dump_prints_string_keys_after_the_entries(keyed_datadir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "snapshot", "dump", str(keyed_datadir))
    assert rc == 0
    assert out.splitlines() == ['db0 "jobs" 1-1 "f" "v"',
                                'db0 "bin\\xff" string "\\x00v"',
                                'db0 "lock" string "token-1" PXAT 1700000030000',
                                'db3 "counter" string "41"']
    rc, out, _ = run(capsys, "snapshot", "dump", str(keyed_datadir), "--key", "lock",
                     "--format", "json")
    assert json.loads(out) == {"db": 0, "key": "lock", "value": "token-1",
                               "expires_ms": 1700000030000}
    rc, out, _ = run(capsys, "snapshot", "dump", str(keyed_datadir), "--streams-only")
    assert out.splitlines() == ['db0 "jobs" 1-1 "f" "v"']


def test_info_text_is_a_readable_table(datadir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "snapshot", "info", str(datadir))
    assert rc == 0
    assert "LSN" in out and "orders" in out and "alice" in out and "250-0" in out


def test_dump_text_and_json_with_filters(datadir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = run(capsys, "snapshot", "dump", str(datadir), "--key", "orders",
                     "--start", "99", "--end", "102", "--format", "json")
    assert rc == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == ["99-0", "101-0", "102-0"]  # 100-0 was deleted
    assert lines[0]["fields"] == [["item", "98"], ["bin", "x"]]
    rc, out, _ = run(capsys, "snapshot", "dump", str(datadir), "--db", "0", "--count", "1")
    assert out.splitlines() == ['db0 "b\\xffk" 1-1 "f\\x00" "\\xfe\\n"',
                                'db0 "orders" 1-0 "item" "0" "bin" "x"']
    rc, out, _ = run(capsys, "snapshot", "dump", str(datadir), "--db", "2", "--format", "json")
    assert json.loads(out) == {"db": 2, "key": "other", "id": "5-5", "fields": [["a", "b"]]}
    rc, _out, err = run(capsys, "snapshot", "dump", str(datadir), "--start", "x-y")
    assert rc == 3 and "not a stream ID" in err


def test_missing_and_damaged_snapshots_exit_with_a_message(datadir: Path, tmp_path: Path,
                                                           capsys) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = run(capsys, "snapshot", "info", str(tmp_path / "nothing"))
    assert rc == 3 and "no such file" in err
    with Engine.open(str(tmp_path / "fresh")):
        pass
    rc, _, err = run(capsys, "snapshot", "info", str(tmp_path / "fresh"))
    assert rc == 3 and "no snapshot" in err
    snap = next(datadir.glob("snapshot-*.mdb"))
    cut = tmp_path / "cut.mdb"
    cut.write_bytes(snap.read_bytes()[:8192])
    rc, _, err = run(capsys, "snapshot", "info", str(cut))
    assert rc == 2 and "truncated" in err and "Traceback" not in err
    junk = tmp_path / "junk.mdb"
    junk.write_bytes(b"not lmdb" * 1000)
    rc, _, err = run(capsys, "snapshot", "info", str(junk))
    assert rc in (2, 3) and "Traceback" not in err


def test_piped_output_is_plain_and_help_has_examples(datadir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "streamkeep", "snapshot", "info", str(datadir)],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    assert "\x1b[" not in proc.stdout  # no colour codes when piped
    for command in ("info", "dump"):
        text = subprocess.run([sys.executable, "-m", "streamkeep", "snapshot", command,
                               "--help"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout
        assert "examples:" in text and "exit status" in text


def test_info_and_dump_show_a_format_3_file(capsys) -> None:  # type: ignore[no-untyped-def]
    want = v3.want()
    rc, out, err = run(capsys, "snapshot", "info", str(v3.V3), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["version"] == 3 and doc["streams"] == len(v3.streams(want))
    lengths = {(s["db"], json.dumps(s["key"])): s["length"] for s in doc["stream_list"]}
    orders = next(row for row in want["keys"] if row["key"] == b"orders")
    assert lengths[0, '"orders"'] == v3.full(orders, "length")
    rc, out, err = run(capsys, "snapshot", "dump", str(v3.V3), "--format", "json",
                       "--streams-only")
    assert rc == 0, err
    ids = [line["id"] for line in map(json.loads, out.splitlines())]
    assert ids == [e[0].decode() for row in v3.streams(want) for e in row["xrange"]]


# --- every type ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def typed_snapshot(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Streams, strings and sorted sets over three databases (tests.support.typed_keys)."""
    from tests.support.typed_keys import typed_engine, write_typed_snapshot

    return write_typed_snapshot(typed_engine(),
                                str(tmp_path_factory.mktemp("typed") / "snapshot.mdb"))


def test_info_counts_the_keys_of_every_type(typed_snapshot: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from streamkeep.engine.model.value_types import TYPES

    rc, out, _ = run(capsys, "snapshot", "info", typed_snapshot, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["keys_by_type"] == {**{t.name: 0 for t in TYPES}, "stream": 2, "string": 3,
                                   "zset": 3}
    assert (doc["strings"], doc["keys_with_ttl"]) == (3, 3)
    rc, out, _ = run(capsys, "snapshot", "info", typed_snapshot)
    assert "3 string keys, 3 zset keys, 3 keys with a TTL" in " ".join(out.split())


def test_dump_renders_every_types_value(typed_snapshot: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "snapshot", "dump", typed_snapshot, "--db", "0")
    assert rc == 0
    assert out.splitlines() == [
        'db0 "events" 1-1 "a" "b"',
        'db0 "bin\\xff" string "\\x00\\xff" PXAT 4102444800001',
        'db0 "board" zset "bob" -inf "alice" 1.5 "\\xffcarol" 1e+300 PXAT 4102444800002',
        'db0 "plain" string "v"']
    rc, out, _ = run(capsys, "snapshot", "dump", typed_snapshot, "--format", "json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["key"] for line in lines if "id" in line] == ["events", "s2"]
    board = next(line for line in lines if line["key"] == "board")
    assert board == {"db": 0, "key": "board", "type": "zset",
                     "value": [["bob", "-inf"], ["alice", "1.5"],
                               [{"b64": base64.b64encode(b"\xffcarol").decode()}, "1e+300"]],
                     "expires_ms": 4102444800002}
    big = next(line for line in lines if line["key"] == "big")
    assert len(big["value"]) == 300 and big["value"][:2] == [["m000", "0"], ["m001", "0.25"]]
    assert {"db": 2, "key": "counter", "value": "41", "expires_ms": None} in lines
    rc, out, _ = run(capsys, "snapshot", "dump", typed_snapshot, "--key", "z\x00")
    assert out.splitlines() == ['db2 "z\\x00" zset "only" 0']
    rc, out, _ = run(capsys, "snapshot", "dump", typed_snapshot, "--streams-only")
    assert [line.split()[2] for line in out.splitlines()] == ["1-1", "5-5"]


def test_dump_renders_hashes_sets_and_lists_once_registered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hash (a field's expiry beside it), a set and a list (its elements head first, no
    index shown), from their types' rows; a type without a rows entry (tools.value_tables) is
    named with its stored size."""
    from streamkeep.engine.model import lists
    from streamkeep.engine.model.hashes import Hash
    from streamkeep.engine.model.sets import RSet
    from streamkeep.engine.model.value_types import HASH as hash_type
    from streamkeep.engine.model.value_types import LIST
    from streamkeep.engine.model.value_types import SET as set_type
    from streamkeep.snapshot.writer import write_snapshot
    from streamkeep.tools.inspect import snapshot as inspect_snapshot

    h = Hash.from_pairs([(b"f1", b"v1"), (b"f2", b"\xff")])
    h.set_field_expiry(b"f2", 4102444800000)
    values: list[list[dict]] = [[{}] for _ in range(
        max(hash_type.slot, set_type.slot, LIST.slot) + 1)]
    values[hash_type.slot][0][b"h"] = h
    values[set_type.slot][0][b"s"] = RSet.from_members([b"7"])
    values[LIST.slot][0][b"l"] = lists.from_elements([b"b", b"\xff", b"7", b"b"])
    path = str(tmp_path / "snapshot.mdb")
    write_snapshot([{}], path, 3, 1, "r" * 40, values=values, expires=[{b"s": 5}])
    rc, out, _ = run(capsys, "snapshot", "dump", path)
    assert rc == 0
    lines = out.splitlines()
    assert lines[2] == 'db0 "s" set "7" PXAT 5'
    assert lines[1] == 'db0 "l" list "b" "\\xff" "7" "b"'
    # (a field with a TTL comes first in a listpackex, as HGETALL walks it)
    assert lines[0] == 'db0 "h" hash "f2" "\\xff" field_expire_ms=4102444800000 "f1" "v1"'
    rc, out, _ = run(capsys, "snapshot", "dump", path, "--format", "json")
    h_doc, l_doc, s_doc = map(json.loads, out.splitlines())
    assert l_doc == {"db": 0, "key": "l", "type": "list",
                     "value": ["b", {"b64": "/w=="}, "7", "b"], "expires_ms": None}
    assert sorted(h_doc["value"]) == [["f1", "v1", None],
                                      ["f2", {"b64": "/w=="}, 4102444800000]]
    assert s_doc == {"db": 0, "key": "s", "type": "set", "value": ["7"], "expires_ms": 5}
    monkeypatch.delitem(inspect_snapshot.BY_TYPE, "set")
    rc, out, _ = run(capsys, "snapshot", "dump", path)
    assert out.splitlines()[2].startswith('db0 "s" set (') and "bytes stored) PXAT 5" in out
    rc, out, _ = run(capsys, "snapshot", "info", path, "--json")
    assert json.loads(out)["keys_by_type"] == {"stream": 0, "string": 0, "zset": 0, "hash": 1,
                                               "set": 1, "list": 1}


def test_dump_reads_a_chunked_value_chunk_by_chunk(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A big value stored as chunk rows (snapshot.values, its threshold lowered here) dumps
    exactly as the same value in one row does, text and JSON."""
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.snapshot import values
    from streamkeep.snapshot.reader import Snapshot
    from streamkeep.snapshot.writer import write_snapshot

    e = EngineCore()
    e.execute("ZADD", "z", *[x for j in range(700) for x in (str(j / 4), b"m%03d" % j)])
    e.execute("HSET", "h", *[x for j in range(700) for x in (b"f%d" % j, b"\xff%d" % j)])
    e.execute("HPEXPIREAT", "h", "4102444800000", "FIELDS", "1", "f3")
    e.execute("SADD", "s", *[b"%d" % j for j in range(700)])
    e.execute("PEXPIREAT", "s", "4102444800000")
    e.execute("RPUSH", "l", *[b"e%d" % j for j in range(3000)], b"\xff" * 9000)
    outputs = []
    for chunked in (False, True):
        monkeypatch.setattr(values, "CHUNKED_ELEMENTS", 500 if chunked else 1 << 40)
        monkeypatch.setattr(values, "CHUNK_ELEMENTS", 64)
        path = str(tmp_path / f"snapshot-{chunked}.mdb")
        write_snapshot(e.dbs, path, 3, 1, "r" * 40, values=e.keyspaces, expires=e.expires)
        with Snapshot(path) as snap:
            assert all((row.chunked is not None) == chunked for row in snap.key_rows())
        dumps = []
        for fmt in ("text", "json"):
            rc, out, _ = run(capsys, "snapshot", "dump", path, "--format", fmt)
            assert rc == 0
            dumps.append(out)
        outputs.append(dumps)
    assert outputs[0] == outputs[1]
    h, lst, s, z = (json.loads(line) for line in outputs[1][1].splitlines())  # (key order)
    assert len(z["value"]) == len(h["value"]) == len(s["value"]) == 700
    assert lst["value"][:2] == ["e0", "e1"] and len(lst["value"]) == 3001
    assert lst["value"][-1] == {"b64": base64.b64encode(b"\xff" * 9000).decode()}
    assert s["expires_ms"] == 4102444800000
    assert ["f3", {"b64": "/zM="}, 4102444800000] in h["value"]
