"""The README is documentation users run: its example must work and its command table must be
the command table."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from streamkeep.tools.docs import BEGIN, END, command_table_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_command_table_is_generated_from_the_table() -> None:
    text = README.read_text()
    section = text[text.index(BEGIN):text.index(END) + len(END)]
    assert section == command_table_markdown(), "run: streamkeep commands, paste into README"


def test_readme_embedded_example_runs() -> None:
    example = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert example is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example.group(1), "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    assert printed[0].startswith("{'pending': 1,")
    assert printed[-1] == (
        "NOGROUP No such key 'orders' or consumer group 'nope' in XREADGROUP with GROUP option"
    )


def test_readme_durability_example_runs(tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if 'Engine.open("./data"' in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    from streamkeep import Engine

    with Engine.open("./data") as db:
        assert db.execute("XLEN", "jobs") == 1


def test_readme_snapshot_reader_example_runs(tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "current_snapshot(" in b)
    monkeypatch.chdir(tmp_path)
    from streamkeep import Engine

    with Engine.open("./data") as db:
        for i in range(250):
            db.execute("XADD", "jobs", "*", "n", str(i))
        db.execute("XGROUP", "CREATE", "jobs", "workers", "0")
        db.execute("XREADGROUP", "GROUP", "workers", "w1", "COUNT", "3", "STREAMS", "jobs", ">")
        assert db.compact(wait=True) is not None
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)
    assert scope["info"].key == b"jobs" and scope["entry"].fields == (b"n", b"249")
    assert scope["group"].name == b"workers"


def test_readme_work_queue_tutorial_runs(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(b for b in blocks if "StreamQueue(engine" in b)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)
    # the crashed worker took cat.png; it came back after the visibility timeout
    assert sorted(scope["handled"]) == sorted(
        [b"cat.png", *(f"dog-{i}.png".encode() for i in range(20))])
    poison = scope["poison"]
    assert poison.deliveries == 3 and poison.fields == {b"image": b"corrupt.png"}
    assert poison.consumer in (b"alice", b"bob")
    assert poison.error == b"ValueError: cannot decode corrupt.png"
    assert capsys.readouterr().out.startswith("21\n")
