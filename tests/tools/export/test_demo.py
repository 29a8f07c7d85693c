"""The export demo (`make export-demo`) replaces its --dir only when it is the demo's own: never
a data directory, nor a directory holding anything else. (Its Spark run: `make export-demo`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools.export import demo
from tests.support.careless import tree_state


def test_a_dir_that_is_not_the_demos_own_is_left_alone(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    before = tree_state(tmp_path)
    for where, said in [(data, "inside the data directory"), (data / "sub", "inside"),
                        (mine, "not a previous demo's"), (mine / "thesis.tex", "not a previous")]:
        assert demo.main(["--dir", str(where)]) == 3
        assert said in capsys.readouterr().err
    assert tree_state(tmp_path) == before
