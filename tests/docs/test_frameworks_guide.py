"""The frameworks guide's pydocket worker line, run as written in the directory that holds the
guide's `tasks.py`: `--tasks tasks:tasks` must import that module. pydocket is not in the suite's
environment (tests/support/framework_suites.py runs pydocket's own suite in a venv of its own),
so a stand-in `docket` package takes its place: a `worker` command that imports the `--tasks`
collection (`module:attribute`) and lists it, as pydocket's does before it works, and a `docket`
console script made the way pip makes one. What is under test is where the import looks: a
console script puts its own directory on the import path, `python -m` the current one."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

from streamkeep import Engine
from tests.support.doc_examples import PAGES, blocks

GUIDE = PAGES / "guides" / "frameworks.md"

STAND_IN = {
    "docket/__init__.py": '''
        class Docket:  # what tasks.py imports; the worker line never enqueues
            pass
    ''',
    "docket/__main__.py": '''
        from docket.cli import app

        app()
    ''',
    "docket/cli.py": '''
        import argparse
        import importlib
        import sys


        def app() -> None:
            parser = argparse.ArgumentParser(prog="docket")
            parser.add_argument("command", choices=["worker"])
            parser.add_argument("--docket", required=True)
            parser.add_argument("--url", required=True)
            parser.add_argument("--tasks", action="append", required=True)
            args = parser.parse_args()
            for spec in args.tasks:
                module, _, attribute = spec.partition(":")
                collection = getattr(importlib.import_module(module), attribute)
                print("tasks:", ", ".join(task.__name__ for task in collection))
            sys.exit(0)
    ''',
}


def _guide_blocks() -> tuple[str, str]:
    """The guide's tasks.py (the python block of its pydocket section) and the worker line."""
    text = GUIDE.read_text()
    section = text[text.index("### pydocket"):]
    found = blocks(section)
    module = next(b.body for b in found if b.lang == "python")
    worker = next(line for b in found if b.lang == "sh" for line in b.body.splitlines()
                  if "worker" in line)
    return module, worker


def test_the_pydocket_worker_line_imports_the_guides_tasks_module(tmp_path: Path) -> None:
    module, worker = _guide_blocks()
    app = tmp_path / "app"
    app.mkdir()
    (app / "tasks.py").write_text(module)
    Engine.open(str(app / "jobs")).close()  # a data directory for `streamkeep url ./jobs`
    site = tmp_path / "site"
    for name, code in STAND_IN.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(code).lstrip())
    scripts = tmp_path / "bin"
    scripts.mkdir()
    console_script = scripts / "docket"  # as pip writes a console_scripts entry point
    console_script.write_text(f"#!{sys.executable}\nimport sys\nfrom docket.cli import app\n"
                              "sys.exit(app())\n")
    console_script.chmod(0o755)
    (scripts / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(site),  # the stand-in installed: site-packages, not the cwd
               PATH=os.pathsep.join([str(scripts), str(Path(sys.executable).parent),
                                     env.get("PATH", "")]))
    done = subprocess.run(["bash", "-c", f"set -e -o pipefail\n{worker}"], cwd=app, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{worker}\n{done.stdout}{done.stderr}"
    assert done.stdout.strip() == "tasks: resize", done.stdout
    assert "python -m docket worker" in worker, shlex.split(worker)
