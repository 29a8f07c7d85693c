"""The planted-bug switch (aof/planted.py): nothing is planted unless STREAMKEEP_PLANTED_BUGS
names bugs, an unknown name is refused (in the variable and when asked), the variable is read
once at import (so a child process started with it set sees it), and every bug it names is
asked for at a real place in the product code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.aof.planted import ACTIVE, BUGS, ENV, UnknownPlantedBug, planted

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("aof", "engine", "snapshot", "replication")

# What a child process sees: the planted set and the answer to every question.
CHILD = ("import json; from streamkeep.aof.planted import ACTIVE, BUGS, planted\n"
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


def test_every_bug_is_a_real_code_path_in_the_product() -> None:
    """Each name in BUGS is asked for by product code (`planted("name")`), so planting it
    changes what streamkeep does; a name no code asks for would prove nothing."""
    asked: set[str] = set()
    for folder in PRODUCT:
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "planted.py":
                asked |= set(re.findall(r'planted\("([a-z-]+)"\)', path.read_text()))
    assert asked == set(BUGS)
