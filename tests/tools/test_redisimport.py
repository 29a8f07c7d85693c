"""`streamkeep import` on files written by a real redis-server (7.0): dump.rdb (RDB 10), an
appendonlydir (manifest, a base with an RDB preamble, incr files), a single appendonly.aof, and
AOFs cut short or damaged."""

from __future__ import annotations

import json
import os
import time

import pytest

from streamkeep import Engine
from streamkeep.tools.main import main


def _saved_rdb(client) -> str:
    client.save()
    directory = client.config_get("dir")["dir"]
    return os.path.join(directory, client.config_get("dbfilename")["dbfilename"])


def _fill(client) -> None:
    client.flushall()
    for i in range(1, 321):
        client.xadd("orders", {"id": str(i), "sku": f"sku-{i % 17}", **({"note": "x" * 40}
                                                                        if i % 13 == 0 else {})})
    client.xdel("orders", client.xrange("orders", count=3)[2][0])
    client.xgroup_create("orders", "billing", "0")
    client.xreadgroup("billing", "worker-1", {"orders": ">"}, count=10)
    client.xack("orders", "billing", client.xrange("orders", count=1)[0][0])
    client.execute_command("XGROUP", "CREATECONSUMER", "orders", "billing", "idle")
    client.execute_command("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    client.xadd("later", {"f": "v"})
    client.pexpire("later", 3_600_000)
    client.set("a-string", "v")
    client.hset("a-hash", mapping={"f": "v"})
    client.rpush("a-list", "1", "2")
    client.sadd("a-set", "x")
    client.zadd("a-zset", {"m": 1.5})
    client.execute_command("SELECT", "3")
    client.execute_command("XADD", "in-db3", "1-1", "f", "v")
    client.execute_command("SELECT", "0")


def test_import_of_a_redis_dump(redis_client, tmp_path, capsys) -> None:
    _fill(redis_client)
    out = tmp_path / "data"
    assert main(["import", _saved_rdb(redis_client), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["streams"] == 4 and report["entries"] == 319 + 0 + 1 + 1
    assert report["skipped"] == {}
    assert report["other_keys"] == report["other_keys_from_rdb"] == {"hash": 1, "set": 1,
                                                                     "zset": 1, "list": 1}
    assert report["strings"] == 1 and report["expiries"] == 1
    with Engine.open(str(out)) as engine:
        assert engine.execute("PEXPIRETIME", "later") == redis_client.pexpiretime("later")
    with Engine.open(str(out)) as engine:
        assert engine.datadir.journal.manifest.snapshot is not None  # compacted
        assert engine.execute("XRANGE", "orders", "-", "+") == [
            [i, [x for p in f.items() for x in p]] for i, f in redis_client.xrange("orders")]
        for key in ("orders", "empty"):  # everything else, through redis-server's own eyes
            engine.set_config("dump-rdb-version", 10)
            redis_client.restore(key + ":back", 0, engine.execute("DUMP", key))
            assert redis_client.execute_command("XINFO", "STREAM", key + ":back", "FULL") == \
                redis_client.execute_command("XINFO", "STREAM", key, "FULL"), key
        assert engine.execute("LRANGE", "a-list", "0", "-1") == [b"1", b"2"]
        engine.execute("SELECT", "3")
        assert engine.execute("XRANGE", "in-db3", "-", "+") == [[b"1-1", [b"f", b"v"]]]


def test_refusals_name_the_problem(redis_client, tmp_path, capsys) -> None:
    bad = tmp_path / "bad.rdb"
    bad.write_bytes(b"REDIS0010\xfa\x01")
    assert main(["import", str(bad), "--out", str(tmp_path / "o1")]) == 2
    assert "bad.rdb: truncated" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert main(["import", str(bad), "--out", str(busy)]) == 3
    assert "not an empty directory" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "missing.rdb"), "--out", str(tmp_path / "o2")]) == 3
    assert "missing.rdb" in capsys.readouterr().err


def test_help_has_examples_and_exit_codes(capsys) -> None:
    import pytest

    with pytest.raises(SystemExit) as done:
        main(["import", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "exit status:" in text and "--out DIR" in text


# --- AOF files and appendonlydirs ------------------------------------------------------------
#
# The oracle is a redis-server that loads the same files: an AOF holds the commands Redis
# propagated, which carry less than the primary changed (a history XREADGROUP's delivery
# count, entries-read after XCLAIM), so a redis-server loading it is what the import must equal.

AOF_DIR = "aofdir"


def _aof_workload(r) -> None:
    from tests.support.replication_util import drive

    drive(r, seed=7, start=0, stop=300)
    with r.pipeline(transaction=True) as p:
        p.xadd("tx", {"a": "1"})
        p.set("tx-string", "x")
        p.xadd("tx", {"b": "2"})
        p.execute()
    r.set("a-string", "v")
    r.xadd("later", {"f": "v"})
    r.expire("later", 3600)
    r.delete("s3")


def _loaded_by_redis(start_redis, directory) -> dict:
    """What a redis-server holds after loading `directory`'s AOF (an appendonlydir, or a
    single appendonly.aof that it converts)."""
    import redis

    from tests.support.redis_state import databases_state, keys_state, raw_client

    server = start_redis("--appendonly", "yes", "--appenddirname", AOF_DIR,
                         "--dir", str(directory))
    client = redis.Redis(host=server.host, port=server.port)
    strings = {db: keys_state(raw_client(client, db)) for db in range(16)}
    return {"streams": databases_state(lambda db: raw_client(client, db)), "keys": strings}


def _imported(out) -> dict:
    from tests.support.redis_state import databases_state, keys_state

    with Engine.open(str(out)) as engine:
        def run_in(db: int):
            engine.execute("SELECT", str(db))
            return engine.execute
        strings = {db: keys_state(run_in(db)) for db in range(16)}
        return {"streams": databases_state(run_in), "keys": strings}


def _redis_with_aof(start_redis, tmp_path):
    import redis

    server = start_redis("--appendonly", "yes", "--appenddirname", AOF_DIR,
                         "--dir", str(tmp_path / "source"))
    return server, redis.Redis(host=server.host, port=server.port)


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_import_of_an_appendonlydir_and_of_an_aof_file(start_redis, tmp_path, capsys) -> None:
    (tmp_path / "source").mkdir()
    _server, r = _redis_with_aof(start_redis, tmp_path)
    _aof_workload(r)
    r.bgrewriteaof()  # a base with the data as an RDB preamble, then a new incr file
    from tests.support.replication_util import wait_for

    wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0 and
             r.info("persistence")["aof_rewrite_scheduled"] == 0, what="the rewrite")
    from tests.support.replication_util import drive

    drive(r, seed=8, start=0, stop=200)
    r.set("after-rewrite", "v")
    r.execute_command("SELECT", "2")
    r.xadd("in-db2", {"f": "v"}, id="1-1")
    r.execute_command("SELECT", "0")
    time.sleep(1.2)  # appendfsync everysec: the incr file written
    copy = _copy(tmp_path / "source" / AOF_DIR, tmp_path / "copy" / AOF_DIR)
    expected = _loaded_by_redis(start_redis, tmp_path / "copy")
    assert expected["streams"] and 2 in expected["streams"]
    assert expected["keys"][0][b"later"][2] > 0 and expected["keys"][0][b"a-string"][1] == b"v"

    assert main(["import", str(copy), "--out", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert _imported(tmp_path / "out") == expected
    assert report["rdb_version"] == 10 and report["truncated_bytes"] == 0
    assert report["strings"] >= 3 and "set" not in report["skipped_commands"]
    assert report["failed_commands"] == 0

    # The same history as one appendonly.aof: the base (an RDB preamble) then the incr file.
    manifest = next(copy.glob("*.manifest")).read_text().split("\n")
    names = [line.split()[1] for line in manifest if " type b" in line or " type i" in line]
    single = tmp_path / "single"
    single.mkdir()
    (single / "appendonly.aof").write_bytes(b"".join((copy / n).read_bytes() for n in names))
    assert main(["import", str(single / "appendonly.aof"), "--out", str(tmp_path / "out2"),
                 "--json"]) == 0
    capsys.readouterr()
    assert _imported(tmp_path / "out2") == expected


def test_an_aof_cut_short_or_damaged(start_redis, tmp_path, capsys) -> None:
    (tmp_path / "source").mkdir()
    _server, r = _redis_with_aof(start_redis, tmp_path)
    r.xadd("s", {"f": "v"}, id="1-1")
    r.xadd("s", {"f": "w"}, id="2-1")
    time.sleep(1.2)
    incr = next((tmp_path / "source" / AOF_DIR).glob("*.incr.aof")).read_bytes()
    aof = tmp_path / "cut.aof"
    aof.write_bytes(incr[:-7])  # the last XADD cut short
    assert main(["import", str(aof), "--out", str(tmp_path / "o1"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["truncated_bytes"] > 0 and report["entries"] == 1
    aof.write_bytes(incr + b"*1\r\n$5\r\nMULTI\r\n*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n3-1\r\n"
                    b"$1\r\nf\r\n$1\r\nx\r\n")  # a transaction without its EXEC
    assert main(["import", str(aof), "--out", str(tmp_path / "o2")]) == 0
    text = capsys.readouterr().out
    assert "without its EXEC" in text and "2 entries" in text
    aof.write_bytes(incr + b"*2\r\n$4\r\nXADD\r\n$x\r\n")
    assert main(["import", str(aof), "--out", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert "cut.aof: not an AOF" in err and "Traceback" not in err
    assert not (tmp_path / "o3").exists()  # nothing half made is left behind
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "x.manifest").write_text("file appendonly.aof.1.base.rdb seq\n")
    assert main(["import", str(odd), "--out", str(tmp_path / "o4")]) == 2
    assert "x.manifest: line 1 is not a manifest entry" in capsys.readouterr().err


# --- what SOURCE is, by its content ----------------------------------------------------------


def _rdb_of(*keys: str) -> bytes:
    from streamkeep.snapshot.rdb import write_rdb

    engine = Engine()
    for i, key in enumerate(keys):
        engine.execute("XADD", key, f"{i + 1}-1", "f", "v" * 30)
    items = sorted(engine.dbs[0].items())
    return b"".join(write_rdb(10, [(b"redis-ver", b"7.0.0")], [(0, len(items), items)]))


def _strings_rdb() -> bytes:
    """Strings raw, integer-encoded and LZF-compressed, with TTLs past and future."""
    from streamkeep.snapshot.rdb import encode_length, write_rdb

    base = b"".join(write_rdb(10, [], [(0, 3, 2, [(b"i", b"-5", 1), (b"r", b"x" * 30, None),
                                                   (b"t", b"v", 2**50)])]))
    body = base[:-9] + b"\x00\x01z\xc3" + encode_length(5) + encode_length(30) + \
        b"\x00x\xe0\x14\x00" + b"\xff"  # "x" * 30 as LZF: a literal, one back reference
    from streamkeep.snapshot.rdb import crc64

    return body + crc64(body).to_bytes(8, "little")


def test_a_damaged_stream_value_is_named_with_its_key_and_offset(tmp_path, capsys) -> None:
    import struct

    from streamkeep.snapshot import rdb

    data = _rdb_of("orders")
    for pos in range(data.index(b"orders") + 8, len(data) - 20):  # the first bad value
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        body = bytes(bad[:-8])
        damaged = body + struct.pack("<Q", rdb.crc64(body))  # the container itself is fine
        try:
            version, _aux, keys = rdb.read_rdb(damaged)
        except rdb.RdbError:
            continue  # the file's structure refuses it: not the case here
        try:
            rdb.load_payload(rdb.payload_from(keys[0].rdb_type, keys[0].value, version))
        except rdb.RdbError:
            break
    source = tmp_path / "damaged.rdb"
    source.write_bytes(damaged)
    assert main(["import", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # the applier's own warning is not printed too
    assert f'damaged.rdb: the value of stream key "orders" (db 0) at byte ' \
           f"{keys[0].offset} is damaged" in err
    assert not (tmp_path / "out").exists()


def test_an_aof_line_that_is_no_command_is_refused_with_its_offset(tmp_path, capsys) -> None:
    good = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    source = tmp_path / "appendonly.aof"
    source.write_bytes(good + b"root:x:0:0:root:/root:/bin/bash\n")
    assert main(["import", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"appendonly.aof: not an AOF: byte {len(good)} starts 72 6f 6f 74" in err
    assert not (tmp_path / "out").exists()
    source.write_bytes(good + b"*1\r\n$x\r\n")
    assert main(["import", str(source), "--out", str(tmp_path / "out")]) == 2
    assert f"in the command at byte {len(good)}" in capsys.readouterr().err


def test_an_appendonlydir_may_hold_empty_files_but_nothing_else(tmp_path, capsys) -> None:
    source = tmp_path / "appendonlydir"
    source.mkdir()
    (source / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 "
        "type i\n")
    (source / "appendonly.aof.1.base.rdb").write_bytes(_rdb_of("a", "b"))
    (source / "appendonly.aof.1.incr.aof").write_bytes(b"")  # nothing written since
    assert main(["import", str(source), "--out", str(tmp_path / "o1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["streams"] == 2
    (source / "appendonly.aof.1.incr.aof").write_bytes(b"\x1f\x8b\x08\x00")
    assert main(["import", str(source), "--out", str(tmp_path / "o2")]) == 2
    assert "appendonly.aof.1.incr.aof: gzip data: decompress it first" in \
        capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


def _import_refuses_or_imports(tmp_path, data: bytes) -> None:
    import contextlib
    import io
    import shutil

    source = tmp_path / "source"
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    source.write_bytes(data)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["import", str(source), "--out", str(out)])
    assert code in (0, 2), (code, err.getvalue())
    if code == 2:
        assert err.getvalue().count("\n") == 1 and str(source) in err.getvalue()
        assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_arbitrary_bytes_are_imported_or_refused_never_a_crash(tmp_path_factory) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    tmp = tmp_path_factory.mktemp("fuzz")

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=300))
    def check(data: bytes) -> None:
        _import_refuses_or_imports(tmp, data)

    check()


def test_damaged_redis_files_are_imported_or_refused_never_a_crash(tmp_path_factory) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    tmp = tmp_path_factory.mktemp("fuzz")
    aof = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n"
           b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n$1\r\nf\r\n$1\r\nv\r\n"
           b"*1\r\n$4\r\nEXEC\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
    originals = [_rdb_of("a", "b"), aof, _rdb_of("pre") + aof, _strings_rdb()]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(originals), st.data())
    def check(original: bytes, data) -> None:
        raw = bytearray(original)
        for _ in range(data.draw(st.integers(0, 3))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            del raw[data.draw(st.integers(0, len(raw))):]
        _import_refuses_or_imports(tmp, bytes(raw))

    check()


def test_redis_8_8_and_valkey_9_dumps_import_their_streams_and_name_what_is_skipped(
        tmp_path, capsys) -> None:
    from tests.support.rdb_files import rdb14_file as _rdb14_file
    from tests.support.rdb_files import valkey_file as _valkey_file
    from tests.support.rdb_files import xnacked as _xnacked

    rdb14 = tmp_path / "dump14.rdb"
    rdb14.write_bytes(_rdb14_file())  # a type-27 stream with an entry XNACK released, an array
    assert main(["import", str(rdb14), "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert "(RDB 14)" in printed and "imported 1 stream(s), 5 entries, 1 string(s)" in printed
    assert "skipped 1 array key(s): streamkeep stores streams, strings" in printed
    with Engine.open(str(tmp_path / "a")) as engine:
        argv = ("XPENDING", "s", "g", "-", "+", "10")
        # (the idle times are this clock's; the released entry's is -1 on both)
        assert [(i, c, n) for i, c, _idle, n in engine.execute(*argv)] == [
            (i, c, n) for i, c, _idle, n in _xnacked().execute(*argv)]
        assert engine.execute(*argv)[1][1:] == [b"", -1, 1]
    valkey = tmp_path / "dump80.rdb"
    valkey.write_bytes(_valkey_file())
    assert main(["import", str(valkey), "--out", str(tmp_path / "b"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rdb_version"] == 80 and report["skipped"] == {"hash": 1}
    assert (report["streams"], report["strings"]) == (1, 1)


def _functions_of(engine: Engine) -> list:
    return engine.execute("FUNCTION", "LIST", "WITHCODE")


def test_function_libraries_of_a_redis_dump_are_loaded_and_kept(start_redis, tmp_path,
                                                                capsys) -> None:
    import redis

    from tests.support.rdb_files import LIBRARY

    (tmp_path / "source").mkdir()
    server = start_redis("--dir", str(tmp_path / "source"))
    r = redis.Redis(host=server.host, port=server.port)
    r.execute_command("FUNCTION", "LOAD", LIBRARY)
    r.set("k", "from redis")
    r.save()
    out = tmp_path / "out"
    assert main(["import", str(tmp_path / "source" / "dump.rdb"), "--out", str(out),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["functions"] == report["functions_from_rdb"] == 1
    with Engine.open(str(out)) as engine:  # (from DIR's snapshot: durable)
        assert engine.execute("FCALL", "getk", "1", "k") == b"from redis"
        assert engine.execute("FCALL_RO", "ro", "0") == b"ro"
        listed = _functions_of(engine)
    assert listed[0][1::2][:2] == [b"lib", b"LUA"] and listed[0][-1] == LIBRARY
    with Engine.open(str(out)) as engine:  # and again, after a compaction of the directory
        engine.execute("SET", "k2", "v")
        engine.compact()
    with Engine.open(str(out)) as engine:
        assert _functions_of(engine) == listed
    assert main(["import", str(tmp_path / "source" / "dump.rdb"), "--out",
                 str(tmp_path / "out2")]) == 0
    assert "1 string(s), 1 function library (" in capsys.readouterr().out


def test_function_libraries_of_an_appendonlydir_come_from_its_base_and_its_commands(
        start_redis, tmp_path, capsys) -> None:
    from tests.support.rdb_files import LIBRARY
    from tests.support.replication_util import wait_for

    (tmp_path / "source").mkdir()
    _server, r = _redis_with_aof(start_redis, tmp_path)
    r.execute_command("FUNCTION", "LOAD", LIBRARY)
    r.set("k", "v")
    r.bgrewriteaof()  # the library a function record of the base's RDB preamble
    wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0 and
             r.info("persistence")["aof_rewrite_scheduled"] == 0, what="the rewrite")
    later = b"#!lua name=later\nredis.register_function('two', function() return 2 end)"
    r.execute_command("FUNCTION", "LOAD", later)  # a FUNCTION LOAD of the incr file
    time.sleep(1.2)  # appendfsync everysec: the incr file written
    copy = _copy(tmp_path / "source" / AOF_DIR, tmp_path / "copy" / AOF_DIR)
    assert main(["import", str(copy), "--out", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["functions"], report["functions_from_rdb"]) == (2, 1)
    with Engine.open(str(tmp_path / "out")) as engine:
        assert engine.execute("FCALL", "getk", "1", "k") == b"v"
        assert engine.execute("FCALL", "two", "0") == 2


def _rdb_with_libraries(*codes: bytes) -> bytes:
    from streamkeep.snapshot.rdb import write_rdb

    return b"".join(write_rdb(10, [], [(0, 1, [(b"k", b"v")])], codes))


@pytest.mark.parametrize("codes,said", [
    (2, "the function library \"lib\" at byte {second} cannot be loaded: ERR Library 'lib' "
        "already exists"),
    ([b"#!lua name=bad\nreturn 1"], 'the function library "bad" at byte 9 cannot be loaded: '
                                     "ERR No functions registered"),
    ([b"#!tcl name=t\nx"], "library \"t\" at byte 9 cannot be loaded: ERR Engine 'tcl' not "
                           "found"),
    ([b"no shebang"], "the function library at byte 9 cannot be loaded: ERR Missing library "
                      "metadata"),
])
def test_a_library_redis_would_not_load_is_refused_naming_it(tmp_path, capsys, codes,
                                                              said: str) -> None:
    from streamkeep.snapshot.rdb_functions import encode_function_record
    from tests.support.rdb_files import LIBRARY

    source = tmp_path / "dump.rdb"
    source.write_bytes(_rdb_with_libraries(*([LIBRARY] * codes if codes == 2 else codes)))
    assert main(["import", str(source), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    second = 9 + len(encode_function_record(LIBRARY))  # (the header, the first record)
    assert said.format(second=second) in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_redis_8_10_templated_hashes_are_skipped_and_named(tmp_path, capsys) -> None:
    from tests.support.rdb_files import rdb15_file

    source = tmp_path / "dump.rdb"
    source.write_bytes(rdb15_file())
    assert main(["import", str(source), "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "(RDB 15)" in printed and "1 stream(s), 5 entries, 1 string(s), 1 function " \
        "library" in printed
    assert "skipped 5 templated hash key(s): Redis 8.10's template encoding of hashes is not " \
        "read" in printed
    with Engine.open(str(tmp_path / "o")) as engine:
        assert engine.execute("FCALL", "getk", "1", "str") == b"v"
        assert engine.execute("EXISTS", "k1", "k2", "d1", "d2", "d3") == 0


def test_a_redis_8_10_layout_unknown_here_is_refused_naming_it(tmp_path, capsys) -> None:
    import struct

    from streamkeep.snapshot.rdb import crc64, encode_length, encode_string

    body = b"REDIS0015\xfe\x00\x21" + encode_string(b"limiter") + encode_length(0) + b"\xff"
    source = tmp_path / "dump.rdb"
    source.write_bytes(body + struct.pack("<Q", crc64(body)))
    assert main(["import", str(source), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "a GCRA rate limiter (RDB type 33, Redis 8.10)" in err and "byte 11" in err
    assert not (tmp_path / "o").exists()
