"""The settings registry behind CONFIG (engine.exec.settings): defaults, validated and canonical
settings, parse_size, output buffer limits, and the redis.conf-style config file (reading it,
errors naming the line as redis-server does, CONFIG REWRITE). CONFIG's subcommands:
tests/engine/commands/test_config.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec.settings import (
    DEFAULT_CONFIG,
    PARAMS,
    parse_config_text,
    parse_size,
    read_config_file,
)
from tests.support.diffutil import err

# --- the registry -----------------------------------------------------------------------------


def test_defaults_come_from_the_registry() -> None:
    engine = Engine()
    assert engine.config == DEFAULT_CONFIG
    assert set(DEFAULT_CONFIG) == set(PARAMS)
    assert engine.config["stream-node-max-entries"] == 100
    assert engine.config["client-output-buffer-limit"]["normal"] == (256 << 20, 64 << 20, 60)


def test_engine_settings_are_validated_and_canonical() -> None:
    engine = Engine(stream_node_max_entries="50", **{"stream-node-max-bytes": "4kb",
                                                     "protected_mode": "no",
                                                     "loglevel": "WARNING"})
    assert engine.config["stream-node-max-entries"] == 50
    assert engine.node_max_entries == 50
    assert engine.config["stream-node-max-bytes"] == 4096
    assert engine.config["protected-mode"] is False
    assert engine.config["loglevel"] == "warning"
    with pytest.raises(ValueError, match="no_such_setting|no-such-setting"):
        Engine(no_such_setting=1)
    with pytest.raises(ValueError, match="couldn't be parsed into an integer"):
        Engine(maxclients="many")
    with pytest.raises(ValueError, match="between 1 and 4294967295"):
        Engine(maxclients=0)
    with pytest.raises(ValueError, match="'yes' or 'no'"):
        Engine(protected_mode="maybe")
    with pytest.raises(ValueError, match="16 databases"):
        Engine(databases=4)


def test_engine_open_validates_the_aof_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="everysec, always, no"):
        Engine.open(str(tmp_path / "a"), appendfsync="sometimes")
    assert not (tmp_path / "a").exists()  # refused before touching the directory
    with Engine.open(str(tmp_path / "b"), appendfsync="ALWAYS",
                     auto_aof_rewrite_min_size="1mb", aof_load_truncated="no") as engine:
        assert engine.config["appendfsync"] == "always"
        assert engine.journal is not None and engine.journal.policy == "always"
        assert engine.config["auto-aof-rewrite-min-size"] == 1 << 20
        assert engine.datadir is not None and engine.datadir.compactor.min_size == 1 << 20
        assert engine.config["aof-load-truncated"] is False
        assert engine.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]


def test_parse_size_moved_to_the_registry() -> None:
    from streamkeep.snapshot.services import compactor

    assert compactor.parse_size is parse_size
    assert parse_size("64mb") == 64 << 20
    assert parse_size("1GB") == 1 << 30
    assert parse_size("512k") == 512_000
    assert parse_size("512kb") == 512 << 10
    assert parse_size(100) == 100
    assert parse_size("mb") == 0  # Redis's memtoull reads no digits as 0
    for bad in ("1.5mb", "-1", "+5", " 1mb", "1x", "0x10"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_output_buffer_limits_are_replaced_never_mutated() -> None:
    default = DEFAULT_CONFIG["client-output-buffer-limit"]
    a, b = Engine(), Engine()
    a.execute("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 2mb 3")
    assert a.config["client-output-buffer-limit"]["normal"] == (1 << 20, 2 << 20, 3)
    assert a.config["client-output-buffer-limit"]["pubsub"] == default["pubsub"]
    assert b.config["client-output-buffer-limit"] is default
    assert default["normal"] == (256 << 20, 64 << 20, 60)
    engine = Engine(client_output_buffer_limit={"normal": (0, 0, 0)})
    assert engine.execute("CONFIG", "GET", "client-output-buffer-limit") == [
        b"client-output-buffer-limit",
        b"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"]


# --- the config file --------------------------------------------------------------------------


def test_read_config_file(tmp_path: Path) -> None:
    path = tmp_path / "streamkeep.conf"
    path.write_text(
        "# a comment\n"
        "\n"
        "   port 7001   \n"
        'requirepass "pa ss\\x41\\n"\n'
        "requirepass 'it\\'s'\n"
        "appendfsync ALWAYS\n"
        "stream-node-max-bytes 8kb\n"
        "client-output-buffer-limit normal 0 0 0\n"
        "client-output-buffer-limit pubsub 1mb 512kb 30\n"
        "bind 127.0.0.1 ::1\n"
        'save ""\n'
        "protected-mode no\n"
    )
    settings = read_config_file(path)
    assert settings == {
        "port": 7001,
        "requirepass": "it's",
        "appendfsync": "always",
        "stream-node-max-bytes": 8192,
        "client-output-buffer-limit": {"normal": (0, 0, 0),
                                       "replica": (256 << 20, 64 << 20, 60),
                                       "pubsub": (1 << 20, 512 << 10, 30)},
        "bind": "127.0.0.1 ::1",
        "save": "",
        "protected-mode": False,
    }
    assert parse_config_text('requirepass "pa ss\\x41\\n"\n')["requirepass"] == "pa ssA\n"
    del settings["port"], settings["bind"]
    engine = Engine(**settings)  # what `streamkeep serve` does with them
    assert engine.config["client-output-buffer-limit"]["pubsub"] == (1 << 20, 512 << 10, 30)


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("port 1\nfoo bar\n", 2, "Bad directive or wrong number of arguments"),
    ("include other.conf\n", 1, "Bad directive or wrong number of arguments"),
    ("maxclients abc\n", 1, "argument couldn't be parsed into an integer"),
    ("# x\nmaxclients 1 2\n", 2, "wrong number of arguments"),
    ('requirepass "a b\n', 1, "Unbalanced quotes in configuration line"),
    ("appendfsync sometimes\n", 1,
     "argument(s) must be one of the following: everysec, always, no"),
    ("protected-mode maybe\n", 1, "argument must be 'yes' or 'no'"),
    ("client-output-buffer-limit normal 1 2\n", 1,
     "Wrong number of arguments in buffer limit configuration."),
])
def test_config_file_errors_name_the_line(tmp_path: Path, text: str, line: int,
                                          reason: str) -> None:
    path = tmp_path / "bad.conf"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        read_config_file(path)
    message = str(info.value)
    assert "*** FATAL CONFIG FILE ERROR" in message
    assert f"Reading the configuration file, at line {line}\n" in message
    assert message.endswith("\n" + reason)


def test_redis_reports_the_same_config_file_errors(tmp_path: Path) -> None:
    """The reasons above are Redis's: the real redis-server refuses these files the same way."""
    import shutil
    import subprocess

    binary = shutil.which("redis-server")
    assert binary is not None
    for text, reason in (("maxclients abc\n", "argument couldn't be parsed into an integer"),
                         ("foo bar\n", "Bad directive or wrong number of arguments"),
                         ('requirepass "a b\n', "Unbalanced quotes in configuration line")):
        path = tmp_path / "r.conf"
        path.write_text(text)
        done = subprocess.run([binary, str(path)], capture_output=True, text=True, timeout=10)
        assert done.returncode != 0
        assert "Reading the configuration file, at line 1" in done.stderr
        assert reason in done.stderr
        with pytest.raises(ValueError, match="at line 1"):
            read_config_file(path)


def test_config_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "streamkeep.conf"
    path.write_text(
        "# keep this comment\n"
        "maxclients 50\n"
        "stream-node-max-entries 10\n"
        "stream-node-max-entries 20\n"
        "requirepass old\n"
    )
    engine = Engine(config_file=str(path), **read_config_file(path))
    assert engine.config["stream-node-max-entries"] == 20
    assert engine.execute("CONFIG", "SET", "maxclients", "60", "requirepass", "",
                          "stream-node-max-bytes", "8kb", "appendfsync", "no") == "OK"
    assert engine.execute("CONFIG", "REWRITE") == "OK"
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == "# keep this comment"
    assert lines[1] == "maxclients 60"  # rewritten in place
    assert lines[2] == "stream-node-max-entries 20"
    assert "requirepass" not in text  # set to nothing: its lines go
    assert "# Generated by CONFIG REWRITE" in lines
    assert "stream-node-max-bytes 8kb" in lines and "appendfsync no" in lines
    assert text.count("stream-node-max-entries") == 1
    reread = read_config_file(path)
    for name in ("maxclients", "stream-node-max-entries", "stream-node-max-bytes",
                 "appendfsync"):
        assert reread[name] == engine.config[name]
    # A second rewrite changes nothing.
    engine.execute("CONFIG", "REWRITE")
    assert path.read_text() == text


SAVE_FILES = [
    "save 3600 1\nsave 300 100\n",  # lines add up
    'save "60 10"\n',  # one argument: split
    'save 3600 1\nsave ""\nsave 60 1\n',  # "" clears the earlier lines' points
    "save 3600 1\nsave\n",  # none added
    "save\n",
    "save 1 99999999999\nmaxclients 50\n",
]


def _redis_reads(binary: str, workdir: Path, text: str) -> tuple[bytes, list[str]]:
    """What the real redis-server makes of a config file: CONFIG GET save, and the `save`
    lines CONFIG REWRITE writes back (the server stopped before returning)."""
    import subprocess
    import time

    import redis

    conf, sock = workdir / "redis.conf", workdir / "redis.sock"
    conf.write_text(text)
    proc = subprocess.Popen([binary, str(conf), "--port", "0", "--unixsocket", str(sock),
                             "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(unix_socket_path=str(sock))
        for _ in range(2000):  # until it answers (or it exits: the assertion below)
            assert proc.poll() is None, f"redis-server refused {text!r}"
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.01)
        shown = client.config_get("save")["save"].encode()
        client.execute_command("CONFIG", "REWRITE")
        client.close()
    finally:
        proc.kill()
        proc.wait()
    return shown, [line for line in conf.read_text().splitlines() if line.startswith("save")]


@pytest.mark.parametrize("text", SAVE_FILES)
def test_config_file_save_lines_as_redis_reads_and_rewrites_them(tmp_path: Path,
                                                                  text: str) -> None:
    """`save` in a config file and CONFIG REWRITE, against the real redis-server: the file's
    lines add up, `save ""` clears them, REWRITE writes one line per save point (`save ""` for
    none, always written)."""
    import shutil

    binary = shutil.which("redis-server")
    assert binary is not None
    (tmp_path / "redis").mkdir()
    shown, rewritten = _redis_reads(binary, tmp_path / "redis", text)
    path = tmp_path / "streamkeep.conf"
    path.write_text(text)
    engine = Engine(config_file=str(path), **read_config_file(path))
    assert engine.execute("CONFIG", "GET", "save") == [b"save", shown]
    assert engine.execute("CONFIG", "REWRITE") == "OK"
    assert [line for line in path.read_text().splitlines() if line.startswith("save")] \
        == rewritten
    assert Engine(**read_config_file(path)).config["save"] == engine.config["save"]


def test_config_rewrite_writes_save_even_with_none() -> None:
    """No save points (streamkeep's default; Redis's is "3600 1 300 100 60 10000"): REWRITE
    writes `save ""` all the same, as Redis does, so the file says there are none."""
    from streamkeep.engine.exec.settings import rewrite_config_text

    engine = Engine()
    assert engine.execute("CONFIG", "GET", "save") == [b"save", b""]
    assert 'save ""\n' in rewrite_config_text("maxclients 50\n", engine)
    engine.execute("CONFIG", "SET", "save", "900 1 60 100")
    assert rewrite_config_text("save 5 5\nmaxclients 10000\n", engine) == (
        "save 900 1\nmaxclients 10000\n# Generated by CONFIG REWRITE\nsave 60 100\n")


@pytest.mark.parametrize("text", ["save 3600\n", 'save "60 10" 5\n', 'save 3600 1 ""\n',
                                  "save 0 1\n"])
def test_config_file_save_errors_are_redis_s(tmp_path: Path, text: str) -> None:
    import shutil
    import subprocess

    binary = shutil.which("redis-server")
    assert binary is not None
    path = tmp_path / "r.conf"
    path.write_text(text)
    done = subprocess.run([binary, str(path)], capture_output=True, text=True, timeout=10)
    assert done.returncode != 0
    assert done.stderr.endswith(f">>> '{text.strip()}'\nInvalid save parameters\n")
    with pytest.raises(ValueError) as info:
        read_config_file(path)
    assert str(info.value).endswith(f">>> '{text.strip()}'\nInvalid save parameters")


def test_config_rewrite_without_a_file(backend: Any) -> None:
    assert err(backend(Engine()), "CONFIG", "REWRITE") == (
        "ERR The server is running without a config file")


def test_monitoring_settings_parse_print_and_rewrite() -> None:
    """slowlog-*, latency-* as Redis's: latency-tracking-info-percentiles is several numbers
    (CONFIG SET gives them in one argument, a config file as several; "" is none), printed
    as %f trimmed; io-threads holds streamkeep's only value."""
    from streamkeep.engine.exec.settings import parse_config_text, rewrite_config_text

    assert parse_config_text("latency-tracking-info-percentiles 50 99.5\nslowlog-max-len 5\n") \
        == {"latency-tracking-info-percentiles": (50.0, 99.5), "slowlog-max-len": 5}
    engine = Engine()
    assert engine.execute("CONFIG", "GET", "latency-tracking-info-percentiles") == [
        b"latency-tracking-info-percentiles", b"50 99 99.9"]
    engine.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "1 2.5",
                   "slowlog-log-slower-than", "5")
    text = rewrite_config_text("", engine)
    assert "latency-tracking-info-percentiles 1 2.5\n" in text
    engine.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "")
    text = rewrite_config_text("", engine)
    assert 'latency-tracking-info-percentiles ""\n' in text
    assert parse_config_text(text)["latency-tracking-info-percentiles"] == ()
    with pytest.raises(ReplyError):
        engine.execute("CONFIG", "SET", "io-threads", "4")
    assert engine.execute("CONFIG", "SET", "maxmemory", "0") == "OK"
