"""`streamkeep aof stats DIR --html FILE` over a real data directory (several segments, a
compaction's snapshot, strings and streams, a transaction), opened in a real browser: the
timeline draws each command's records and bytes per bucket of the JSON, the log's segments
and its snapshot on the same axis; the effects per record and the tables hold the JSON's
numbers; no console error, nothing fetched, not blank. The refusals come before the AOF is
read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.browser import open_browser


def stats(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep", "aof", "stats", *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("aof") / "data"
    with Engine.open(str(directory), aof_segment_max_bytes=32 << 10) as engine:
        for i in range(2000):
            engine.execute("XADD", f"s{i % 3}", "*", "f", "v" * (i % 40))
            if i % 9 == 0:
                engine.execute("SET", f"k{i}", "v")
            if i == 800:
                engine.compact(wait=True)
        engine.execute("XGROUP", "CREATE", "s0", "g", "0")
        engine.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "STREAMS", "s0", ">")
        engine.execute("MULTI")
        engine.execute("SET", "a", "1")
        engine.execute("INCR", "a")
        engine.execute("EXEC")
    return directory


def test_the_page_draws_the_json(data: Path, tmp_path: Path) -> None:
    page = tmp_path / "aof.html"
    proc = stats(str(data), "--json", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["segments"]) > 1 and doc["snapshot_created_ms"] is not None
    with open_browser() as browser:
        browser.open(page)
        assert browser.console_errors() == [] and browser.resources() == []
        charts = {c["id"]: c for c in browser.charts()}
        timeline = charts["aof-timeline"]
        assert timeline["drawn"] == timeline["series"]
        commands = {n for b in doc["timeline"]["buckets"] for n in b["commands"]}
        for name in commands:
            slug = name.lower().replace(" ", "-").replace(".", "-")
            marks = sum(1 for b in doc["timeline"]["buckets"] if name in b["commands"])
            assert timeline["drawn"][f"records-{slug}"] == marks, name
            assert timeline["drawn"][f"bytes-{slug}"] == marks, name
        assert timeline["drawn"]["segments"] == len(doc["segments"])
        assert timeline["drawn"]["snapshot"] == 1
        texts = " ".join(timeline["texts"])
        assert "time (UTC)" in texts and "log size (MiB)" in texts
        effects = charts["aof-effects"]
        assert effects["drawn"]["records-by-effects"] == len(doc["effects_per_record"])
        assert effects["drawn"]["effects-by-command"] == len(doc["commands"])
        tables = browser.tables()
        assert {c[0]["text"]: [c[1]["value"], c[2]["value"], c[3]["value"]]
                for c in tables["commands"]} == {
            name: [row["effects"], row["records"], row["bytes"]]
            for name, row in doc["commands"].items()}
        assert {int(c[0]["value"]): c[1]["value"] for c in tables["effects-per-record"]} == {
            int(n): count for n, count in doc["effects_per_record"].items()}
        assert [c[4]["value"] for c in tables["segments"]] == [
            s["records"] for s in doc["segments"]]
        assert sum(doc["effects_per_record"].values()) == doc["records"]
        assert browser.screenshot_colours() > 20


# The page's summary line: label -> the number shown.
SUMMARY = """
return Object.fromEntries(Array.from(document.querySelectorAll('p.summary span')).map(s =>
  [s.firstChild.textContent.replace(/: $/, ''), s.querySelector('b').textContent]));
"""
HEADERS = """
return Object.fromEntries(Array.from(document.querySelectorAll('table')).map(t =>
  [t.id, Array.from(t.querySelectorAll('thead th')).map(th => th.textContent)]));
"""


def test_the_header_and_the_tables_count_the_same_bytes(data: Path, tmp_path: Path) -> None:
    """The header's byte count and the segments table's agree (the records as framed in the
    segments: header 95,747 beside files of 95,843 used to be both just "bytes"), the files'
    own size is shown and named apart, and no byte count is a bare "bytes"."""
    page = tmp_path / "aof.html"
    proc = stats(str(data), "--json", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    with open_browser() as browser:
        browser.open(page)
        header = browser.script(SUMMARY)
        headers = browser.script(HEADERS)
        tables = browser.tables()
    named = {n: i for i, n in enumerate(headers["segments"])}
    records = "records' bytes (framed)"
    records_in_table = sum(row[named[records]]["value"] for row in tables["segments"])
    files_in_table = sum(row[named["file size (bytes)"]]["value"] for row in tables["segments"])
    assert int(header[records].replace(",", "")) == records_in_table == doc["bytes"]
    assert int(header["segment files' bytes"].replace(",", "")) == files_in_table == sum(
        s["size"] for s in doc["segments"]) > records_in_table  # (their headers too)
    assert "bytes" not in header
    assert all(h != "bytes" for columns in headers.values() for h in columns), headers


def test_html_refused_before_reading(data: Path, tmp_path: Path) -> None:
    proc = stats(str(data), "--html", str(data / "aof.html"))
    assert proc.returncode == 3 and proc.stdout == ""
    assert "inside the streamkeep data directory" in proc.stderr
    existing = tmp_path / "aof.html"
    existing.write_text("kept")
    proc = stats(str(data), "--html", str(existing))
    assert proc.returncode == 3 and proc.stdout == "" and existing.read_text() == "kept"
    proc = stats(str(data), "--html", str(existing), "--force", "--json")
    assert proc.returncode == 0 and existing.read_text().startswith("<!DOCTYPE html>")
