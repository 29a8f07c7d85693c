"""The planted-bug switch (tools/crashbench/planted.py): nothing is planted unless
STREAMKEEP_PLANTED_BUGS names bugs, an unknown name is refused (in the variable and when asked),
the variable is read once at import (so a child process started with it set sees it), every
bug it names has a mutant there, and the product's code names none of them (they reach it only
through the file layer the bench opens engines on)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.tools.crashbench.planted import (
    ACTIVE,
    BUGS,
    ENGINE_BUGS,
    ENV,
    FILE_LAYER_BUGS,
    PlantedFS,
    UnknownPlantedBug,
    planted,
)

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("aof", "engine", "snapshot", "replication")

# What a child process sees: the planted set and the answer to every question.
CHILD = ("import json; from streamkeep.tools.crashbench.planted import ACTIVE, BUGS, planted\n"
         "print(json.dumps([sorted(ACTIVE), sorted(b for b in BUGS if planted(b))]))")


def run_child(value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if value is not None:
        env[ENV] = value
    return subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", [None, "", " ", " , ,"], ids=["unset", "empty", "blank",
                                                              "commas"])
def test_unset_or_empty_plants_nothing(value: str | None) -> None:
    done = run_child(value)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], []]


def test_a_child_started_with_the_variable_set_sees_it() -> None:
    done = run_child(" ack-before-fsync ,star-id-reuse")
    assert done.returncode == 0, done.stderr
    both = ["ack-before-fsync", "star-id-reuse"]
    assert json.loads(done.stdout) == [both, both]


def test_every_bug_can_be_planted() -> None:
    done = run_child(",".join(sorted(BUGS)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [sorted(BUGS), sorted(BUGS)]


def test_an_unknown_name_in_the_variable_is_refused_at_import() -> None:
    """A typo would otherwise plant nothing and let the bench's proof pass silently."""
    done = run_child("ack-before-fsync,ack-before-fsnyc")
    assert done.returncode != 0
    assert "UnknownPlantedBug" in done.stderr and "ack-before-fsnyc" in done.stderr


def test_asking_for_an_unknown_bug_is_refused() -> None:
    with pytest.raises(UnknownPlantedBug, match="no-such-bug"):
        planted("no-such-bug")


def test_this_process_answers_from_its_own_variable() -> None:
    assert ACTIVE <= BUGS
    assert {bug for bug in BUGS if planted(bug)} == ACTIVE


def test_every_bug_has_a_mutant() -> None:
    """Each name in BUGS is one of the file layer's bugs (PlantedFS, whose docstring says what
    each does) or one of the engine's: a name no mutant implements would prove nothing."""
    assert FILE_LAYER_BUGS | ENGINE_BUGS == BUGS and not FILE_LAYER_BUGS & ENGINE_BUGS
    assert all(f"- {bug}:" in (PlantedFS.__doc__ or "") for bug in FILE_LAYER_BUGS)


def test_the_product_names_no_planted_bug() -> None:
    """Reading the product's code never means reading the crash bench's mutants: no module of
    it names a planted bug, and only the seam's docstring (aof/fs.py) says that they exist (the
    mutants wrap the file layer and the command table from tools/crashbench/planted.py)."""
    named = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py*")):
            if path.suffix not in (".py", ".pyx", ".pyi"):
                continue
            text = path.read_text()
            if path == ROOT / "aof" / "fs.py":  # the seam says where they come in, once
                docstring = text.split('"""')[1]
                assert "tools/crashbench/planted" in docstring
                text = text.replace(docstring, "")
            found = {bug for bug in BUGS if bug in text} | (
                {"planted"} if re.search(r"planted|PLANTED", text) else set())
            if found:
                named.append(f"{path.relative_to(ROOT)}: {sorted(found)}")
    assert not named, named
