"""A real headless browser for the HTML reports: Debian's chromium through its chromedriver
(selenium), as `make chromium` installs them.

`open_browser()` yields a `Browser` that loads a file (no server: the report must open as a
file), reads the browser's console, counts what each chart drew, reads the tables and takes a
screenshot. chromedriver runs in a process group of its own, with the browser's processes
under it: on the way out, however the test ended, the driver is asked to quit and the whole
group is then killed and waited for, so no browser process outlives a test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"

# Per chart (<figure class="chart">): its title, its series as the page recorded them, and
# what the SVG holds for each: marks tagged `C-NAME.<i>`, or one `C-NAME` collection with a
# <use> (or <path>, defs aside) per mark.
COUNT_MARKS = """
return Array.from(document.querySelectorAll('figure.chart')).map(fig => {
  const svg = fig.querySelector('svg');
  const chart = svg ? svg.getAttribute('data-chart') : null;
  const series = JSON.parse(fig.getAttribute('data-series'));
  const drawn = {};
  for (const name of Object.keys(series)) {
    const key = chart + '-' + name;
    let n = svg.querySelectorAll('[id^="' + key + '."]').length;
    const group = svg.querySelector('[id="' + key + '"]');
    if (group) {
      const uses = group.querySelectorAll('use').length;
      n += uses || Array.from(group.querySelectorAll('path'))
        .filter(p => !p.closest('defs')).length;
    }
    drawn[name] = n;
  }
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return {id: fig.id, title: fig.getAttribute('data-title'), series: series, drawn: drawn,
          width: box.width, height: box.height,
          texts: svg ? Array.from(svg.querySelectorAll('text')).map(t => t.textContent) : []};
});
"""

# Every table: its id and, per row, each cell's text and exact value (data-value).
READ_TABLES = """
return Array.from(document.querySelectorAll('table')).map(t => ({
  id: t.id,
  rows: Array.from(t.querySelectorAll('tbody tr')).map(tr =>
    Array.from(tr.querySelectorAll('td')).map(td => ({
      text: td.textContent, value: td.hasAttribute('data-value') ?
        Number(td.getAttribute('data-value')) : null,
      href: td.querySelector('a') ? td.querySelector('a').getAttribute('href') : null})))
}));
"""


# Per chart: every <text> of its SVG that does not lie wholly inside the SVG's viewBox (what
# the browser would cut off), with its box in the viewBox's units.
TEXTS_OUTSIDE = """
return Array.from(document.querySelectorAll('figure.chart svg')).map(svg => {
  const vb = svg.viewBox.baseVal;
  const outside = [];
  for (const t of svg.querySelectorAll('text')) {
    const b = t.getBBox();
    const toSvg = svg.getScreenCTM().inverse().multiply(t.getScreenCTM());
    const corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height],
                     [b.x + b.width, b.y + b.height]].map(([x, y]) => {
      const p = svg.createSVGPoint(); p.x = x; p.y = y; return p.matrixTransform(toSvg); });
    const xs = corners.map(p => p.x), ys = corners.map(p => p.y);
    const box = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
    if (box[0] < vb.x - 0.5 || box[1] < vb.y - 0.5 || box[2] > vb.x + vb.width + 0.5 ||
        box[3] > vb.y + vb.height + 0.5)
      outside.push({text: t.textContent, box: box});
  }
  return {id: svg.closest('figure').id, viewBox: [vb.x, vb.y, vb.width, vb.height],
          outside: outside};
});
"""


def chromium_missing() -> str | None:
    """Why the browser cannot run here (skip reason), or None."""
    if not os.access(CHROMEDRIVER, os.X_OK) or shutil.which("chromium") is None:
        return "Debian's chromium and chromium-driver are not installed (make chromium)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make dev)"
    return None


class Browser:
    def __init__(self, driver: Any) -> None:
        self.driver = driver

    def open(self, path: Path) -> None:
        self.driver.get(path.resolve().as_uri())
        # the document is static: loaded means complete
        deadline = time.monotonic() + 60
        while self.driver.execute_script("return document.readyState") != "complete":
            if time.monotonic() > deadline:
                pytest.fail(f"{path} did not finish loading")
            time.sleep(0.05)

    def console_errors(self) -> list[dict[str, Any]]:
        """The console's messages at level SEVERE (errors, failed loads) so far."""
        return [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]

    def charts(self) -> list[dict[str, Any]]:
        return list(self.driver.execute_script(COUNT_MARKS))

    def tables(self) -> dict[str, list[list[dict[str, Any]]]]:
        return {t["id"]: t["rows"] for t in self.driver.execute_script(READ_TABLES)}

    def script(self, code: str) -> Any:
        return self.driver.execute_script(code)

    def texts_outside(self) -> dict[str, list[dict[str, Any]]]:
        """Chart id -> the texts of its SVG that lie partly or wholly outside its viewBox."""
        return {c["id"]: c["outside"] for c in self.driver.execute_script(TEXTS_OUTSIDE)}

    def resources(self) -> list[str]:
        """Every resource the page fetched other than itself (a self-contained page: none)."""
        names = self.driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        return [str(n) for n in names]

    def screenshot_colours(self) -> int:
        """How many distinct colours the visible part of the page shows (a blank page: 1)."""
        from PIL import Image

        png = self.driver.get_screenshot_as_png()
        image = Image.open(io.BytesIO(png)).convert("RGB")
        return len(image.getcolors(maxcolors=1 << 20) or [])


@contextlib.contextmanager
def open_browser(width: int = 1200, height: int = 1600) -> Iterator[Browser]:
    reason = chromium_missing()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="streamkeep-test-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", f"--user-data-dir={profile}",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, log_output=os.devnull,
                      popen_kw={"start_new_session": True})
    driver = None
    try:
        driver = webdriver.Chrome(options=options, service=service)
        yield Browser(driver)
    finally:
        try:
            if driver is not None:
                driver.quit()
        finally:
            _kill_group(service)
            shutil.rmtree(profile, ignore_errors=True)


def _kill_group(service: Any) -> None:
    """chromedriver's process group (the browser's processes are in it) killed and reaped."""
    process = getattr(service, "process", None)
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.wait(10)
    # The browser's processes (chromedriver's children, reparented once it is reaped) are
    # killed too, but a big one takes a while to exit on a busy machine: wait for them, so
    # that nothing of the group is alive when the caller looks.
    deadline = time.monotonic() + 10
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def group_members(pgid: int) -> list[int]:
    """The pids of the live processes in process group `pgid`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())
