"""`streamkeep serve` started carelessly: a port out of range (command line or config file),
an address that does not parse, a busy port (exit 1 or 3, one line naming it, and no data
directory made: the port is bound before the directory is opened), a --dir that names a file
(that file named as one, not an errno), and what it logs (the
loglevel applies from the first line; at the default level a SAVE prints no DEBUG lines;
CONFIG SET loglevel still works)."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import redis

from tests.support.careless import assert_refused, run


def test_port_out_of_range_on_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for port in ("99999", "-1", "65536"):
        assert_refused(run("serve", "--dir", data, "--port", port), 3, f"port {port}")
    assert not data.exists()


def test_port_out_of_range_in_the_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "streamkeep.conf"
    conf.write_text("appendfsync no\nport 99999\n")
    data = tmp_path / "data"
    line = assert_refused(run("serve", "--config", conf, "--dir", data), 3, conf, "99999")
    assert f"{conf}:2" in line  # the file and the line
    assert not data.exists()


def test_an_address_that_does_not_parse(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert_refused(run("serve", "--dir", data, "--port", "0", "--bind", "127.0.0.1 no..such"),
                   3, "no..such")
    assert_refused(run("serve", "--dir", data, "--port", "0", "--bind", "300.1.2.3"), 3,
                   "300.1.2.3")
    assert not data.exists()


def test_a_busy_port_is_found_before_the_data_directory_is_made(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = assert_refused(run("serve", "--dir", data, "--port", str(port)), 1,
                              "127.0.0.1", str(port))
    assert "cannot listen" in line
    assert not data.exists()


def test_a_bad_setting_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    data = tmp_path / "data"
    conf = tmp_path / "streamkeep.conf"
    conf.write_text("maxclients many\n")
    assert_refused(run("serve", "--config", conf, "--dir", data), 3, conf, "maxclients")
    assert_refused(run("serve", "--dir", data, "--aof-segment-max-bytes", "10"), 3, "10")
    assert_refused(run("serve", "--dir", data, "--replicaof", "host", "port"), 3,
                   "replicaof")
    assert not data.exists()


def test_a_dir_naming_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("somebody's file")
    for given, named in ((file, file), (file / "data", file)):  # it, or a parent of it
        line = assert_refused(run("serve", "--dir", given, "--port", "0"), 1, given, named)
        assert "a file, not a directory" in line and "Errno" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert file.read_text() == "somebody's file"


def _save_and_shut_down(server, *settings: str) -> str:  # type: ignore[no-untyped-def]
    """CONFIG SET settings, an XADD, a SAVE (a compaction: its steps log at DEBUG), SHUTDOWN;
    everything the server printed."""
    r = server.client()
    if settings:
        r.config_set(*settings)
    r.xadd("s", {"f": "v"})
    r.execute_command("SAVE")
    with contextlib.suppress(redis.ConnectionError):  # (it closes the connection)
        r.execute_command("SHUTDOWN")
    r.close()
    assert server.wait() == 0, server.output()
    return str(server.output())


def test_default_loglevel_prints_no_debug_lines_and_config_set_still_works(
        tmp_path: Path, spawn) -> None:  # type: ignore[no-untyped-def]
    out = _save_and_shut_down(spawn(tmp_path / "data"))
    assert " DEBUG " not in out
    assert " INFO streamkeep.snapshot: compacted" in out
    out = _save_and_shut_down(spawn(tmp_path / "data"), "loglevel", "debug")
    assert " DEBUG streamkeep.snapshot: compaction step" in out


def test_loglevel_warning_applies_from_the_start(tmp_path: Path, spawn) -> None:  # type: ignore[no-untyped-def]
    out = _save_and_shut_down(spawn(tmp_path / "data", "--loglevel", "warning"))
    # Not even "created a new data directory", logged while the directory is opened.
    assert " INFO " not in out and " DEBUG " not in out
    assert "listening on" in out
