"""`streamkeep import` on dump.rdb files written by a real redis-server (7.0, RDB 10)."""

from __future__ import annotations

import json
import os

from streamkeep import Engine
from streamkeep.tools.cli import main


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
    assert report["skipped"] == {"string": 1, "hash": 1, "list": 1, "set": 1, "zset": 1}
    assert report["expiry_dropped"] == 1
    with Engine.open(str(out)) as engine:
        assert engine.datadir.journal.manifest.snapshot is not None  # compacted
        assert engine.execute("XRANGE", "orders", "-", "+") == [
            [i, [x for p in f.items() for x in p]] for i, f in redis_client.xrange("orders")]
        for key in ("orders", "empty"):  # everything else, through redis-server's own eyes
            engine.set_config("dump-rdb-version", 10)
            redis_client.restore(key + ":back", 0, engine.execute("DUMP", key))
            assert redis_client.execute_command("XINFO", "STREAM", key + ":back", "FULL") == \
                redis_client.execute_command("XINFO", "STREAM", key, "FULL"), key
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
