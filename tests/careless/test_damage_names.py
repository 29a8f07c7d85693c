"""One judgement of a segment's end, shared: a segment cut inside what the synced watermark says
was fsynced (inside a record, or at a record boundary) is damage to synced data for `aof
verify`, `aof stats` and `aof dump` alike, and opening the directory refuses it; a record cut
short past the fsynced bytes is a torn tail for all three, and opening cuts it (saved beside
the segment)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import run, tree_state
from tests.support.inspect_util import record_offsets


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory of one segment whose every record was fsynced (appendfsync always:
    the synced watermark covers the whole segment)."""
    data = tmp_path_factory.mktemp("synced") / "data"
    with Engine.open(str(data), appendfsync="always", auto_aof_rewrite_percentage=0) as db:
        for i in range(20):
            db.execute("XADD", "s", f"{i + 1}-0", "field", f"value {i}")
    return data


def _copy(synced: Path, tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    shutil.copytree(synced, data)
    return data, data / "segment-000001.aof"


KINDS = ("torn-tail", "damage-in-synced", "damage-before-valid")


def _three_views(data: Path) -> dict[str, tuple[int, str | None]]:
    """(exit status, the kind of damage named) from `aof verify --json`, `aof stats --json`
    and `aof dump --format json` of `data` (for the last two: the kind their line names, or
    the line itself if it names none)."""
    verify = run("aof", "verify", "--json", data)
    problems = json.loads(verify.out)["problems"]
    assert len(problems) == 1, problems
    stats = run("aof", "stats", "--json", data)
    doc = json.loads(stats.out)
    kind = doc.get("damage_kind")
    assert kind is None or kind in doc["damage"] and kind in stats.err, (doc["damage"], kind)
    dump = run("aof", "dump", "--format", "json", data)
    named = [k for k in KINDS if k in dump.err]
    return {"verify": (verify.code, problems[0]["kind"]),
            "stats": (stats.code, kind or doc["damage"]),
            "dump": (dump.code, named[0] if len(named) == 1 else dump.err.strip())}


@pytest.mark.parametrize("where", ["inside a record", "at a record boundary"])
def test_a_segment_cut_inside_fsynced_data_is_the_same_damage_to_all_three(
        synced: Path, tmp_path: Path, where: str) -> None:
    data, segment = _copy(synced, tmp_path)
    size = segment.stat().st_size
    cut = size - 30 if where == "inside a record" else record_offsets(segment)[-1]
    os.truncate(segment, cut)
    views = _three_views(data)
    assert views == {"verify": (2, "damage-in-synced"), "stats": (2, "damage-in-synced"),
                     "dump": (2, "damage-in-synced")}, views
    before = tree_state(data)
    with pytest.raises(Exception, match="fsynced") as refused:  # what opening does: refuse
        Engine.open(str(data)).close()
    assert type(refused.value).__name__ == "AOFCorruptError"
    assert tree_state(data) == before


def test_a_torn_tail_past_the_fsynced_bytes_is_a_torn_tail_to_all_three(
        synced: Path, tmp_path: Path) -> None:
    data, segment = _copy(synced, tmp_path)
    size = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(b"\x40\x00\x00\x00torn")  # a record's frame cut short, past the watermark
    views = _three_views(data)
    assert views == {"verify": (1, "torn-tail"), "stats": (2, "torn-tail"),
                     "dump": (2, "torn-tail")}, views
    Engine.open(str(data)).close()  # what opening does: cut it (saved beside the segment)
    assert segment.stat().st_size == size
    assert (data / f"segment-000001.aof.cut-{size}").exists()


# --- paths of the wrong kind ------------------------------------------------------------------
