"""`streamkeep url DIR` (streamkeep.tools.url): the URL it prints for a shared directory is one
redis-py connects with (ZADD, HSET, XADD through the directory's server), --start starts that
server, and the directories it cannot give a URL for are refused in one line, exit 3."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import redis

from streamkeep import Engine
from streamkeep.tools.main import main
from streamkeep.tools.url import unix_url


def _url(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    assert main(["url", *argv]) == 0
    out, err = capsys.readouterr()
    return out.strip(), err


def test_redis_py_connects_with_the_printed_url(shared_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.shared_dirs import servers_of

    path = str(shared_dir)
    with Engine.open(path, shared=True) as engine:
        engine.execute("SET", "opened", "yes")
        url, err = _url(capsys, path)
        assert url == f"unix://{shared_dir.absolute()}/shared.sock?db=0" and err == ""
        client = redis.Redis.from_url(url)
        try:
            assert client.zadd("z", {"a": 1.5, "b": 2}) == 2
            assert client.hset("h", mapping={"f": "v", "g": "w"}) == 2
            entry = client.xadd("s", {"k": "v"})
            assert client.get("opened") == b"yes"
        finally:
            client.close()
        assert engine.redis().zrange("z", 0, -1, withscores=True) == [(b"a", 1.5), (b"b", 2.0)]
        assert engine.execute("HGETALL", "h") == [b"f", b"v", b"g", b"w"]
        assert engine.execute("XLEN", "s") == 1 and entry
        (server,) = servers_of(shared_dir)
        url2, _ = _url(capsys, path, "--db", "3", "--json")
        doc = json.loads(url2)
        assert doc["url"].endswith("shared.sock?db=3") and doc["db"] == 3
        assert doc["pid"] == server and doc["running"] and not doc["started"]
        client = redis.Redis.from_url(doc["url"])
        try:
            assert client.sadd("set", "x") == 1 and client.dbsize() == 1
        finally:
            client.close()


def test_start_starts_the_directorys_server(shared_dir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.shared_dirs import servers_of

    path = str(shared_dir)
    Engine.open(path, shared=True).close()  # a shared directory, its server stopped below
    from tests.support.shared_dirs import stop_servers

    stop_servers(shared_dir)
    url, err = _url(capsys, path)  # printed all the same; stderr says nothing answers
    assert "no server runs" in err and "--start" in err
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url).ping()
    out, err = _url(capsys, path, "--start", "--json")
    doc = json.loads(out)
    assert doc["started"] and doc["url"] == url and err == ""
    assert servers_of(shared_dir) == [doc["pid"]]
    client = redis.Redis.from_url(url)
    try:
        assert client.zadd("z", {"m": 1}) == 1 and client.zscore("z", "m") == 1.0
    finally:
        client.close()
    # A second --start finds it running: the same server, not started again.
    out, _ = _url(capsys, path, "--start", "--json")
    assert json.loads(out)["pid"] == doc["pid"] and not json.loads(out)["started"]


def test_start_makes_a_missing_directory(shared_dir: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert not shared_dir.exists()
    url, _ = _url(capsys, str(shared_dir), "--start")
    assert (shared_dir / "shared.sock").exists()
    client = redis.Redis.from_url(url)
    try:
        assert client.xadd("s", {"f": "v"}, id="1-1") == b"1-1"
    finally:
        client.close()


def test_refusals_name_the_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    missing = tmp_path / "missing"
    assert main(["url", str(missing)]) == 3
    assert capsys.readouterr().err == f"streamkeep url: {missing}: no such directory\n"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("x")
    for argv in ([str(plain)], [str(plain), "--start"]):
        assert main(["url", *argv]) == 3
        err = capsys.readouterr().err
        assert err.startswith(f"streamkeep url: {plain}: not a streamkeep data directory")
    assert not (plain / "shared.lock").exists()  # --start made nothing there
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["url", str(a_file)]) == 3
    assert capsys.readouterr().err == f"streamkeep url: {a_file}: not a directory\n"
    if os.geteuid() != 0:  # (root reads any directory)
        locked = tmp_path / "locked"
        locked.mkdir()
        (locked / "manifest.json").write_text("{}")
        locked.chmod(0)
        try:
            assert main(["url", str(locked)]) == 3
            assert "not accessible" in capsys.readouterr().err
        finally:
            locked.chmod(stat.S_IRWXU)
    with pytest.raises(SystemExit) as usage:
        main(["url", str(tmp_path), "--db", "-1"])
    assert usage.value.code == 3
    assert "a database number is 0 or more" in capsys.readouterr().err


def test_db_beyond_the_directorys_databases(shared_dir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    shared_dir.mkdir()
    (shared_dir / "manifest.json").write_text("{}")
    assert main(["url", str(shared_dir), "--db", "16"]) == 3
    assert "16 databases (0 to 15)" in capsys.readouterr().err


def test_the_password_of_a_directory_that_asks_for_one(
        shared_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared_dir.mkdir(mode=0o700)
    (shared_dir / "shared.conf").write_text("appendfsync everysec\nrequirepass s3cr:t@x\n")
    url, _ = _url(capsys, str(shared_dir), "--start")
    assert url == f"unix://:s3cr%3At%40x@{shared_dir.absolute()}/shared.sock?db=0"
    client = redis.Redis.from_url(url)
    try:
        assert client.hset("h", "f", "v") == 1 and client.hgetall("h") == {b"f": b"v"}
    finally:
        client.close()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(unix_socket_path=str(shared_dir / "shared.sock")).hget("h", "f")


def test_unix_url_quotes_what_would_end_the_path() -> None:
    assert unix_url("/srv/a b/shared.sock") == "unix:///srv/a b/shared.sock?db=0"
    assert unix_url("/srv/x?#%/shared.sock", 2) == "unix:///srv/x%3F%23%25/shared.sock?db=2"
    parsed = redis.connection.parse_url(unix_url("/srv/x?#%/shared.sock", 2, "p@ss"))
    assert parsed["path"] == "/srv/x?#%/shared.sock" and parsed["db"] == 2
    assert parsed["password"] == "p@ss"


def test_a_socket_path_too_long_for_a_client(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    (deep / "manifest.json").write_text("{}")
    assert main(["url", str(deep)]) == 3
    assert "longer than a Unix socket address may be" in capsys.readouterr().err
