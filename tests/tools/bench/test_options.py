"""tools/bench/options.py: the bench's command line, its help (examples, exit codes) and the
exit codes main returns; the CLI reaches the bench, never the other way round."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamkeep.tools import bench
from streamkeep.tools import main as cli
from streamkeep.tools.bench import options


def test_help_shows_examples_output_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for part in ("examples:", "streamkeep bench --quick", "--json", "--quiet", "exit codes:",
                 "stderr: progress"):
        assert part in out, out
    for code in (options.EXIT_OK, options.EXIT_TARGET_MISSED, options.EXIT_USAGE):
        assert f"\n  {code}  " in out
    assert max(len(line) for line in options.EPILOG.splitlines()) < 80  # raw: not re-wrapped
    listed = " ".join(out.split())  # argparse wraps the list of sections
    for section in bench.SECTIONS:
        assert any(name in listed for name in section.names), f"--help omits {section.name}"


def test_usage_error_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--sections", "nope"], ["nope"], ["--no-such-option"]):
        with pytest.raises(SystemExit) as exc:
            bench.main(argv)
        assert exc.value.code == options.EXIT_USAGE
    assert "unknown bench section(s) nope" in capsys.readouterr().err


def test_settings_from_options() -> None:
    quick = options.settings(options.build_parser().parse_args(["--quick", "server"]))
    assert (quick.n, quick.short, quick.sections, quick.repeat) == (
        options.QUICK_N, True, ["server"], 1)
    full = options.settings(options.build_parser().parse_args(
        ["--repeat", "3", "--no-redis", "--json", "--quiet", "--strict"]))
    assert (full.n, full.short, full.sections) == (options.FULL_N, False, None)
    assert (full.repeat, full.use_redis, full.json, full.quiet, full.strict) == (
        3, False, True, True, True)


def test_the_bench_does_not_import_the_cli() -> None:
    code = ("import sys, streamkeep.tools.bench.cli; "
            "print('streamkeep.tools.main' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
