"""`agentbreaker report`: the page of a stuck session and of a healthy one, opened in a real
headless browser (Debian's chromium). The screenshot must show the halt marker (its own color,
#c8007a, found by Pillow where the page's DOM says the marker is) for the stuck session, from
each kind of source (a `run --report` file, a replayed recording, a hook session id), and no
marker for the healthy one.

$CHROMIUM names the browser (default: chromium). Each run gets a new empty profile folder and
no network: the page is self-contained."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from PIL import Image

from conftest import healthy_events, run, stuck_events, write_agent
from test_metrics_cli import hook_session

CHROMIUM = os.environ.get("CHROMIUM", "chromium")
HALT_RGB = (0xC8, 0x00, 0x7A)
WINDOW = (1200, 1000)
# body { padding: 24px }: where the chart's SVG begins on the page.
PAGE_PAD = 24


def browser(tmp_path: Path, page: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} not found (make test-observability installs Debian's chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    args = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
        "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--force-device-scale-factor=1",
        f"--window-size={WINDOW[0]},{WINDOW[1]}", *mode, page.resolve().as_uri(),
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def screenshot(tmp_path: Path, page: Path) -> Path:
    png = page.with_suffix(".png")
    r = browser(tmp_path, page, f"--screenshot={png}")
    assert png.exists(), r.stderr[-2000:]
    return png


def dom(tmp_path: Path, page: Path) -> str:
    r = browser(tmp_path, page, "--dump-dom")
    assert "<svg" in r.stdout, r.stderr[-2000:]
    return r.stdout


def halt_pixels(png: Path) -> List[Tuple[int, int]]:
    img = Image.open(png).convert("RGB")
    w, h = img.size
    px = img.load()
    assert px is not None
    out = []
    for y in range(h):
        for x in range(w):
            r, g, b = px[x, y]
            if abs(r - HALT_RGB[0]) <= 6 and g <= 8 and abs(b - HALT_RGB[2]) <= 6:
                out.append((x, y))
    return out


def marker(dom_text: str) -> Dict[str, str]:
    m = re.search(r'<g id="halt-marker"([^>]*)>', dom_text)
    assert m, "no halt marker in the DOM"
    return dict(re.findall(r'data-([a-z0-9]+)="([^"]*)"', m.group(1)))


def check_halted_page(tmp_path: Path, page: Path, step: int) -> None:
    text = dom(tmp_path, page)
    assert 'data-outcome="halted"' in text
    attrs = marker(text)
    assert attrs["reason"] == "repeated_step" and attrs["step"] == str(step), attrs
    pixels = halt_pixels(screenshot(tmp_path, page))
    assert len(pixels) > 300, f"only {len(pixels)} pixels of the halt color"
    # The bar: the columns where the halt color runs tall.
    by_x: Dict[int, int] = {}
    for x, _ in pixels:
        by_x[x] = by_x.get(x, 0) + 1
    height = float(attrs["y1"]) - float(attrs["y0"])
    bar = [x for x, n in by_x.items() if n >= height - 2]
    assert bar, f"no column of the halt color {height:.0f} px tall: {sorted(by_x.items())[:20]}"
    center = (min(bar) + max(bar)) / 2
    expected = PAGE_PAD + float(attrs["x"])
    assert abs(center - expected) <= 2, (center, expected)
    # Every pixel of that color belongs to the marker (the bar and its label beside it).
    assert all(abs(x - expected) <= 260 for x, _ in pixels)


def check_healthy_page(tmp_path: Path, page: Path) -> None:
    text = dom(tmp_path, page)
    assert 'data-outcome="ran"' in text and "halt-marker" not in text
    assert halt_pixels(screenshot(tmp_path, page)) == []


def report(tmp_path: Path, source: str, name: str, *extra: str) -> Path:
    page = tmp_path / f"{name}.html"
    r = run(["report", source, "-o", str(page), *extra])
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    # Self-contained: nothing to fetch.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script" not in html
    return page


def test_run_report_pages(tmp_path: Path, config_file: Path) -> None:
    for name, events, code in [("stuck", stuck_events(), 3), ("healthy", healthy_events(), 0)]:
        folder = tmp_path / name
        folder.mkdir()
        agent = write_agent(folder, events, delay=0.01)
        out = folder / "run.json"
        r = run(["run", "-q", "--config", str(config_file), "--format", "events", "--report",
                 str(out), "--", *agent])
        assert r.returncode == code, r.stderr
        assert json.loads(out.read_text())["trace"]["entries"]
        page = report(tmp_path, str(out), name)
        if name == "stuck":
            check_halted_page(tmp_path, page, step=4)
            keep = os.environ.get("AGENTBREAKER_OBS_ARTIFACTS")
            if keep:  # to look at the page and its screenshot
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(page, keep)
                shutil.copy(page.with_suffix(".png"), keep)
        else:
            check_healthy_page(tmp_path, page)


def test_replayed_recording_page(tmp_path: Path, config_file: Path) -> None:
    rec = tmp_path / "stuck.jsonl"
    rec.write_text("".join(json.dumps(e) + "\n" for e in stuck_events()))
    page = report(tmp_path, str(rec), "replayed", "--config", str(config_file),
                  "--format", "events")
    check_halted_page(tmp_path, page, step=4)


def test_hook_session_page(tmp_path: Path) -> None:
    state = tmp_path / "state"
    hook_session(tmp_path, "stuck-hook", ["make check"] * 5, state, tmp_path / "m.prom")
    page = report(tmp_path, "stuck-hook", "hook", "--state-dir", str(state))
    check_halted_page(tmp_path, page, step=4)
