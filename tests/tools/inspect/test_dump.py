"""`streamkeep aof dump`: formats, filters, binary-safe round trips, damage, and the RESP
export piped into a real redis-server with redis-cli --pipe."""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.aof_inspect_data import BINARY, ROOT, build_workload, records, run_cli


@pytest.fixture(scope="module")
def datadir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("dump") / "data")
    build_workload(path, aof_segment_max_bytes=2048)  # several segments
    return path


def json_records(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.decode("utf-8").splitlines()]


def from_json_arg(arg: Any) -> bytes:
    return arg.encode("utf-8") if isinstance(arg, str) else base64.b64decode(arg["b64"])


def test_several_segments(datadir: str) -> None:
    assert len([f for f in os.listdir(datadir) if f.endswith(".aof")]) > 2


def test_json_round_trip_and_schema(datadir: str) -> None:
    done = run_cli("aof", "dump", "--format", "json", datadir)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    lines = json_records(done.stdout)
    expected = records(datadir)
    assert len(lines) == len(expected)
    for line, (lsn, time_ms, db, effects) in zip(lines, expected, strict=True):
        assert set(line) == {"lsn", "time_ms", "time", "db", "effects"}
        assert (line["lsn"], line["time_ms"], line["db"]) == (lsn, time_ms, db)
        assert isinstance(line["time"], str) and line["time"].endswith("Z")
        for effect in line["effects"]:
            for arg in effect:
                assert isinstance(arg, str) or (isinstance(arg, dict) and set(arg) == {"b64"})
        assert [[from_json_arg(a) for a in e] for e in line["effects"]] == effects
    # binary values are base64, UTF-8 ones plain strings
    assert any({"b64": base64.b64encode(BINARY).decode()} in e
               for line in lines for e in line["effects"])
    assert any("événements" in e for line in lines for e in line["effects"])


def test_text_round_trip(datadir: str) -> None:
    from streamkeep.tools.inspect.dump import parse_text_line

    done = run_cli("aof", "dump", datadir)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("ascii")  # binary-safe: ASCII only
    rebuilt: dict[int, list] = {}
    for line in text.splitlines():
        lsn, when, db, effect = parse_text_line(line)
        assert when.endswith("Z")
        rebuilt.setdefault(lsn, [db, []])[1].append(effect)
    expected = records(datadir)
    assert sorted(rebuilt) == [r[0] for r in expected]
    for lsn, _t, db, effects in expected:
        assert rebuilt[lsn][0] == db
        assert rebuilt[lsn][1] == effects
    assert '"\\x00\\xff\\r\\n\\"\\\\ bin\\xc3"' in text  # redis-cli's quoting


def test_text_db_of_each_effect(datadir: str) -> None:
    text = run_cli("aof", "dump", "--command", "XADD", datadir).stdout.decode()
    assert '[1] "XADD" "other"' in text
    assert '[0] "XADD" "orders"' in text


def test_filter_key_glob(datadir: str) -> None:
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--key", "oth*",
                                 datadir).stdout)
    assert lines
    for line in lines:
        for effect in line["effects"]:
            assert effect[0] == "SELECT" or "other" in effect[1:3]
    # a glob over binary key bytes
    binary = os.fsdecode(b"?" + BINARY[1:2] + b"*")  # argv cannot hold NUL
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--key", binary,
                                 datadir).stdout)
    assert len(lines) == 1 and from_json_arg(lines[0]["effects"][0][1]) == BINARY


def test_filter_command_and_subcommand(datadir: str) -> None:
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--command", "xgroup",
                                 datadir).stdout)
    names = {e[1] for line in lines for e in line["effects"] if e[0] != "SELECT"}
    assert {"CREATE", "SETID", "CREATECONSUMER", "DELCONSUMER"} <= names
    assert {e[0] for line in lines for e in line["effects"]} <= {"XGROUP", "SELECT"}
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--command",
                                 "XGROUP SETID", datadir).stdout)
    assert lines and {tuple(e[:2]) for ln in lines for e in ln["effects"]} == {
        ("XGROUP", "SETID")}


def test_filter_db(datadir: str) -> None:
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--db", "1",
                                 datadir).stdout)
    keys = {e[1] if e[0] != "XGROUP" else e[2] for ln in lines for e in ln["effects"]
            if e[0] != "SELECT"}
    assert keys == {"other"}
    # the transaction's record (db 0) keeps the SELECT that leads to its db 1 effects
    multi = [ln for ln in lines if ln["db"] == 0]
    assert multi and multi[0]["effects"][0] == ["SELECT", "1"]
    assert ["XADD", "orders"] not in [e[:2] for e in multi[0]["effects"]]


def test_filter_lsn_and_time(datadir: str) -> None:
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--from-lsn", "10",
                                 "--to-lsn", "30", datadir).stdout)
    assert [ln["lsn"] for ln in lines] == list(range(10, 31))
    since, until = 1_795_000_060_000, 1_795_000_061_020
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--since", str(since),
                                 "--until", "2026-11-18T11:07:41.020Z", datadir).stdout)
    assert lines and all(since <= ln["time_ms"] <= until for ln in lines)
    expected = [r[0] for r in records(datadir) if since <= r[1] <= until]
    assert [ln["lsn"] for ln in lines] == expected


def test_filters_combine(datadir: str) -> None:
    lines = json_records(run_cli("aof", "dump", "--format", "json", "--key", "orders",
                                 "--command", "XACK", "--db", "0", "--from-lsn", "2",
                                 datadir).stdout)
    assert [e[0] for ln in lines for e in ln["effects"]] == ["XACK"]


def test_one_segment_file(datadir: str) -> None:
    seg = sorted(f for f in os.listdir(datadir) if f.endswith(".aof"))[1]
    done = run_cli("aof", "dump", "--format", "json", os.path.join(datadir, seg))
    assert done.returncode == 0
    lsns = [ln["lsn"] for ln in json_records(done.stdout)]
    assert lsns and lsns == list(range(lsns[0], lsns[0] + len(lsns))) and lsns[0] > 1


def test_damage_stops_with_file_and_offset(tmp_path: Any) -> None:
    path = str(tmp_path / "data")
    build_workload(path)
    seg = os.path.join(path, "segment-000001.aof")
    data = bytearray(Path(seg).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(seg).write_bytes(bytes(data))
    done = run_cli("aof", "dump", "--format", "json", path)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "Traceback" not in err
    assert seg in err and "byte offset" in err
    good = json_records(done.stdout)
    assert good and [ln["lsn"] for ln in good] == list(range(1, len(good) + 1))
    # a torn tail too
    with open(seg, "r+b") as f:
        f.truncate(len(data) // 2 - 1)
    done = run_cli("aof", "dump", path)
    assert done.returncode == 2 and b"torn tail" in done.stderr
    assert b"Traceback" not in done.stderr


def test_usage_and_io_errors(tmp_path: Any) -> None:
    done = run_cli("aof", "dump", str(tmp_path / "missing"))
    assert done.returncode == 3 and b"missing" in done.stderr
    done = run_cli("aof", "dump", str(tmp_path))  # a directory without a manifest
    assert done.returncode == 3 and b"manifest" in done.stderr
    junk = tmp_path / "junk.aof"
    junk.write_bytes(b"not a segment at all, really not one")
    done = run_cli("aof", "dump", str(junk))
    assert done.returncode == 2 and b"junk.aof" in done.stderr and b"offset" in done.stderr
    assert run_cli("aof", "dump", "--format", "xml", str(tmp_path)).returncode == 3
    assert run_cli("aof", "dump", "--since", "yesterday", str(tmp_path)).returncode == 3
    for out in (run_cli("aof", "dump", "--help"), run_cli("aof", "stats", "--help")):
        assert out.returncode == 0
        assert b"examples:" in out.stdout and b"exit status:" in out.stdout


def test_resp_translations(tmp_path: Any) -> None:
    from streamkeep.tools.inspect.dump import resp_translate

    assert resp_translate([b"SK.XCONSUMER", b"k", b"g", b"c", b"1", b"2"]) == [
        b"XGROUP", b"CREATECONSUMER", b"k", b"g", b"c"]
    assert resp_translate([b"SK.XTRIMIDS", b"k", b"1-1", b"2-2"]) == [
        b"XDEL", b"k", b"1-1", b"2-2"]
    assert resp_translate([b"SK.XIDMPDUP", b"k", b"3"]) is None
    assert resp_translate([b"XADD", b"k", b"1-1", b"f", b"v"]) == [
        b"XADD", b"k", b"1-1", b"f", b"v"]


# --- RESP into a real redis-server -----------------------------------------------------------

STREAM_FIELDS = ("length", "last-generated-id", "max-deleted-entry-id", "entries-added",
                 "recorded-first-entry-id", "groups", "first-entry", "last-entry")
GROUP_FIELDS = ("name", "consumers", "pending", "last-delivered-id", "entries-read", "lag")


def stream_state(run: Any, key: bytes) -> dict[str, Any]:
    """What Redis 7.0 and streamkeep both report about a stream, times left out."""
    def pairs(flat: list) -> dict[str, Any]:
        return {(k.decode() if isinstance(k, bytes) else k): v
                for k, v in zip(flat[::2], flat[1::2], strict=True)}

    info = pairs(run("XINFO", "STREAM", key))
    state: dict[str, Any] = {"entries": run("XRANGE", key, "-", "+"),
                             "stream": {f: info.get(f) for f in STREAM_FIELDS}}
    groups = []
    for raw in run("XINFO", "GROUPS", key):
        group = pairs(raw)
        name = group["name"]
        consumers = sorted((c["name"], c["pending"]) for c in map(
            pairs, run("XINFO", "CONSUMERS", key, name)))
        pending = [(p[0], p[1], p[3]) for p in run("XPENDING", key, name, "-", "+", "1000")]
        groups.append(({f: group.get(f) for f in GROUP_FIELDS}, consumers, pending))
    state["groups"] = groups
    return state


def test_resp_pipe_rebuilds_streams_in_redis(tmp_path: Any, redis_server: Any,
                                             redis_raw: Any) -> None:
    from tests.support.resp_client import RespClient

    path = str(tmp_path / "data")
    build_workload(path)
    done = run_cli("aof", "dump", "--format", "resp", path)
    assert done.returncode == 0, done.stderr
    cli = shutil.which("redis-cli")
    assert cli is not None
    piped = subprocess.run([cli, "-h", redis_server.host, "-p", str(redis_server.port),
                            "--pipe"], input=done.stdout, capture_output=True, timeout=60,
                           check=False)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert b"errors: 0" in piped.stdout, piped.stdout

    def raw(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [raw(v) for v in value]
        if isinstance(value, str):
            return value.encode()
        return value

    expected_keys = {0: {b"orders", BINARY, "événements".encode(), b"capped", b"scratch2"},
                     1: {b"other"}}
    with Engine.open(path) as engine, RespClient(redis_server.host,
                                                 redis_server.port) as client:
        for dbnum, keys in expected_keys.items():
            client.execute("SELECT", str(dbnum))
            engine.execute("SELECT", str(dbnum))
            assert set(raw(client.execute("KEYS", "*"))) == keys
            assert set(engine.execute("KEYS", "*")) == keys
            for key in keys:
                theirs = stream_state(lambda *a: raw(client.execute(*a)), key)
                ours = stream_state(lambda *a: raw(engine.execute(*a)), key)
                assert ours == theirs, key
                if key == b"orders":  # the comparison saw groups, consumers and PELs
                    assert len(ours["groups"]) == 2
                    assert all(consumers and pending for _g, consumers, pending in ours["groups"])
                    assert ours["stream"]["max-deleted-entry-id"] != b"0-0"


def test_json_writer_edge_arguments() -> None:
    from streamkeep.tools.inspect.dump import json_writer

    effects = [[b"XADD", b"", b"a\\u0000", b"\x00", "é✓".encode(), b'"q"\n', b"\\"],
               [b"XADD", b"k", b"\xff\x00"], [b"XDEL", b"k", b"1-1"]]
    out: list[bytes] = []
    json_writer(out.append)([(7, 1_795_000_000_000, 3, effects)])
    line = json.loads(b"".join(out))
    assert line == {"lsn": 7, "time_ms": 1_795_000_000_000, "time": "2026-11-18T11:06:40.000Z",
                    "db": 3, "effects": [
                        ["XADD", "", "a\\u0000", "\x00", "é✓", '"q"\n', "\\"],
                        ["XADD", "k", {"b64": base64.b64encode(b"\xff\x00").decode()}],
                        ["XDEL", "k", "1-1"]]}


def test_after_a_snapshot_and_bad_manifest(tmp_path: Any) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
        engine.compact()
        engine.execute("XADD", "s", "2-1", "f", "w")
    done = run_cli("aof", "dump", "--format", "resp", path)
    assert done.returncode == 0
    assert b"snapshot covering LSNs up to 1" in done.stderr
    assert b"2-1" in done.stdout and b"1-1" not in done.stdout
    stats = json.loads(run_cli("aof", "stats", "--json", path).stdout)
    assert stats["snapshot_lsn"] == 1 and stats["records"] == 1 and stats["first_lsn"] == 2
    Path(path, "manifest.json").write_text("{not json")
    for command in ("dump", "stats"):
        done = run_cli("aof", command, path)
        assert done.returncode == 2 and b"manifest.json" in done.stderr
        assert b"Traceback" not in done.stderr


def test_closed_pipe_is_not_an_error(tmp_path: Any) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        for i in range(5000):
            engine.execute("XADD", "s", "*", "f", "x" * 100, "i", str(i))
    cmd = f"{shlex.quote(sys.executable)} -m streamkeep aof dump {shlex.quote(path)} | head -1"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep
               + os.pathsep.join(sys.path))
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"1 ") and done.stdout.count(b"\n") == 1
    assert done.stderr == b""
