"""The sliders as a learner uses them: JupyterLab in headless Chromium, driven by Playwright.

nbval runs notebooks without a widget front end, so it cannot see a slider that fails to render
or a callback that raises only when moved. Here a real JupyterLab serves a temporary copy of the
notebooks, Chromium runs all cells, and the sliders are moved by keyboard and by mouse.
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser fixture skips (or, under CI, fails) with how to install it
    expect = sync_playwright = None

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS, FIGURES = ROOT / "notebooks", ROOT / "figures"
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# The README shows the screenshots: the test rewrites them only when asked, so that running the
# tests leaves `git status` clean. SPECMINI_SCREENSHOTS=1 pytest tests/test_browser.py renews them.
SAVE_SCREENSHOTS = os.environ.get("SPECMINI_SCREENSHOTS", "") == "1"
CHROMIUM_FLAGS = [
    "--disable-gpu",
    "--disable-background-networking",  # without these Chromium phones home, which fails offline
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NO_CHROMIUM = "no Chromium found: install it (Debian/Ubuntu: sudo apt-get install chromium)"
NO_PLAYWRIGHT = "Playwright for Python is missing: pip install -r requirements-test.txt"

# Notebook 06 takes a minute or more top to bottom on a 2-core CPU (it builds its target's compiled
# calls), while its sliders are built by the same `slider_panel`
# as 05's and nbval runs its live view: its browser run comes with the screenshots, or
# SPECMINI_BROWSER_ALL=1.
RUN_SLOW = SAVE_SCREENSHOTS or os.environ.get("SPECMINI_BROWSER_ALL", "") == "1"
SLOW = pytest.mark.skipif(not RUN_SLOW, reason="notebook 06 in the browser: SPECMINI_BROWSER_ALL=1")
# Each notebook, the sliders a learner moves (by their description), and the screenshot to save.
CASES = [
    pytest.param(
        "05_speedup_and_best_k.ipynb", ["K", "temperature", "c"], "sliders_05.png", id="05"
    ),
    pytest.param(
        "06_gpt2_tinygrad.ipynb", ["K", "temperature"], "sliders_06.png", id="06", marks=SLOW
    ),
]
RUN_ALL_MS = 420_000  # the most a notebook may take top to bottom in the browser (06: about 90 s)
SLOW_MS = 30_000  # the most one recomputation after a slider move may take


def find_chromium():
    for path in [os.environ.get("CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"]:
        if path and os.access(path, os.X_OK):
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_course(dst, notebooks):
    """The notebooks, with an empty figures/ beside them: what they write stays in the copy."""
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(notebooks, dst / "notebooks", ignore=ignore)
    shutil.copytree(notebooks.parent / "models", dst / "models")  # notebook 06's offline pair
    (dst / "figures").mkdir()
    return dst / "notebooks"


@contextlib.contextmanager
def jupyter_lab(root, tmp):
    """JupyterLab on 127.0.0.1 serving `root`, apart from the user's settings; always stopped."""
    port, token = free_port(), secrets.token_hex(16)
    # What Jupyter reads or writes per user lives in tmp: no settings, kernels or workspaces of
    # the user's can change what the test sees, and nothing is left behind.
    dirs = dict(JUPYTER_CONFIG_DIR="config", JUPYTER_DATA_DIR="data", JUPYTER_RUNTIME_DIR="run")
    dirs.update(JUPYTERLAB_SETTINGS_DIR="settings", JUPYTERLAB_WORKSPACES_DIR="ws", IPYTHONDIR="ip")
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", **{k: str(tmp / v) for k, v in dirs.items()})
    # No news prompt nor update check: offline they fail, and their toasts cover the screenshot.
    quiet = tmp / "settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    quiet.parent.mkdir(parents=True)
    quiet.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    cmd += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    cmd += ["--ServerApp.port_retries=0", "--LabApp.news_url=None"]
    cmd += ["--LabApp.expose_app_in_browser=True"]
    cmd += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    cmd += ["--allow-root"] if os.geteuid() == 0 else []
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(server, f"{url}/api/status?token={token}", tmp / "server.log")
        yield url, token
    finally:
        stop_server(server, url, token)
        log.close()


def wait_for_server(server, status_url, log, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"jupyter lab exited early:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(status_url, timeout=2):
                return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


def stop_server(server, url, token):
    """Ask politely (the server then shuts its kernels down), then insist."""
    try:
        shutdown = urllib.request.Request(f"{url}/api/shutdown?token={token}", method="POST")
        urllib.request.urlopen(shutdown, timeout=5).close()
        server.wait(timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# --- the page ----------------------------------------------------------------------------------

NOTEBOOK_READY = """(name) => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const kernel = panel && panel.sessionContext && panel.sessionContext.session?.kernel;
    return !!kernel && panel.context.path.endsWith(name) && panel.context.isReady
        && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""
KERNEL_IDLE = """() => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel;
    return !!kernel && kernel.status === 'idle';
}"""
SHUTDOWN_KERNEL = "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.shutdown()"
RUN_ALL = """() => { window.ranAll = undefined;
    window.jupyterapp.commands.execute('notebook:run-all-cells').then((ok) => window.ranAll = ok);
}"""
ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets.flatMap((cell, i) =>
    cell.model.type !== 'code' ? [] : cell.model.outputs.toJSON()
        .filter((out) => out.output_type === 'error')
        .map((out) => `cell ${i + 1}: ${out.ename}: ${out.evalue}`))"""


def open_notebook(page, url, token, name):
    page.goto(f"{url}/lab/tree/{name}?reset&token={token}")
    page.wait_for_function(NOTEBOOK_READY, arg=name, timeout=60_000)
    return page.locator(".jp-NotebookPanel:visible")


def run_all(page, panel):
    """Run all cells, as Run > Run All Cells does, and wait until the kernel is done."""
    page.evaluate(RUN_ALL)
    page.wait_for_function("() => window.ranAll !== undefined", timeout=RUN_ALL_MS)
    page.wait_for_function(KERNEL_IDLE, timeout=SLOW_MS)


def assert_no_errors(page, panel, when="after running all cells"):
    errors = page.evaluate(ERRORS)  # error outputs in the cells' models
    stderr = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    errors += panel.locator(stderr, has_text="Traceback").all_text_contents()  # also in widgets
    assert not errors, f"{when}, cells show errors:\n" + "\n".join(e[-2000:] for e in errors)
    broken = panel.get_by_text("Error displaying widget")
    assert broken.count() == 0, f"{when}, a widget failed: {broken.first.text_content()}"


def slider(panel, description):
    """The slider whose label reads `description`: a learner finds it the same way."""
    label = panel.page.get_by_text(description, exact=True)
    found = panel.locator(".widget-slider").filter(has=label)
    expect(found, f"one slider labelled {description!r}").to_have_count(1, timeout=SLOW_MS)
    return found


def has_class(name):
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def interactive_box(slider_):
    """The innermost widget box that holds both the slider and an output area."""
    return slider_.locator(f"xpath=ancestor::div[.//div[{has_class('widget-output')}]][1]")


SHOWN = """(box) => {
    const outputs = [...box.querySelectorAll('.widget-output .jp-OutputArea-output')];
    const kinds = ['accepted', 'corrected', 'bonus', 'plain'].map((kind) => `.tok-${kind}`);
    const tokens = [...box.querySelectorAll(kinds.join(', '))];
    return {
        rounds: tokens.map((t) => `${t.className}:${t.textContent}`).join(' '),
        text: outputs.map((o) => o.textContent).join('\\n'),
        images: [...box.querySelectorAll('.widget-output img')].map((i) => i.src).join(' '),
    };
}"""


def shown(box):
    """What the box's outputs show: the coloured rounds, the text, the images (the plot)."""
    return box.evaluate(SHOWN)


def value(slider_):
    """The readout and the handle's value for assistive technology. noUiSlider rounds
    aria-valuenow to one decimal (0.15 reads 0.1), so the full value is aria-valuetext's."""
    readout = slider_.locator(".widget-readout").text_content().strip()
    return readout, slider_.get_by_role("slider").get_attribute("aria-valuetext")


def settle(page, box, timeout=SLOW_MS):
    """Wait until the kernel is idle and the outputs stop changing."""
    deadline, last = time.monotonic() + timeout / 1000, None
    while time.monotonic() < deadline:
        page.wait_for_function(KERNEL_IDLE, timeout=timeout)
        now = shown(box)
        if now == last:
            return now
        last = now
        page.wait_for_timeout(300)
    raise AssertionError("the outputs kept changing")


def move(page, slider_, box, how):
    """Move a slider by a key or by a drag; return its value and outputs before and after."""
    before, shown_before = value(slider_), settle(page, box)
    handle = slider_.get_by_role("slider")
    if how == "drag":  # from wherever the handle is to a fifth of the track
        track, knob = slider_.locator(".noUi-target").bounding_box(), handle.bounding_box()
        y = knob["y"] + knob["height"] / 2
        page.mouse.move(knob["x"] + knob["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(track["x"] + track["width"] * 0.2, y, steps=8)
        page.mouse.up()
    else:
        handle.focus()
        page.keyboard.press(how)
    deadline = time.monotonic() + SLOW_MS / 1000
    while shown(box) == shown_before and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return before, value(slider_), shown_before, settle(page, box)


def check_sliders(page, url, token, name, descriptions, screenshot=None):
    """Open `name`, run all cells, move each slider three ways; assert what it drives changes."""
    panel = open_notebook(page, url, token, name)
    run_all(page, panel)
    assert_no_errors(page, panel)
    for description in descriptions:
        slider_ = slider(panel, description)
        slider_.scroll_into_view_if_needed()  # off screen, JupyterLab may skip rendering it
        box = interactive_box(slider_)
        expect(box, f"an output beside the {description!r} slider").to_have_count(1)
        assert settle(page, box)["rounds"], f"{name}: no coloured rounds beside {description!r}"
        for how in ["ArrowRight", "End", "drag"]:
            before, after, was, now = move(page, slider_, box, how)
            where = f"{name}: {description!r} moved by {how}, {before[0]} -> {after[0]}"
            assert_no_errors(page, panel, where)
            assert after != before, f"{where}: the slider did not move"
            assert float(after[0]) == pytest.approx(float(after[1])), f"{where}: {after}"
            assert now != was, f"{where}: the output did not change:\n{now['text'][:2000]}"
            assert now["rounds"], f"{where}: the coloured rounds are gone:\n{now['text'][:2000]}"
            print(f"{where}: changed {[part for part in now if now[part] != was[part]]}")
    if screenshot:  # the cell's output, as a learner sees it: no focus ring, no hover
        cell = slider(panel, descriptions[0]).locator(
            f"xpath=ancestor::div[{has_class('jp-Cell')}][1]"
        )
        shot = cell.locator(".jp-Cell-outputWrapper")
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.mouse.move(0, 0)
        shot.scroll_into_view_if_needed()
        shot.screenshot(path=screenshot)


# --- pytest --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    chromium = find_chromium()
    missing = NO_PLAYWRIGHT if sync_playwright is None else None if chromium else NO_CHROMIUM
    if missing and CI:  # CI installs the browser: missing there, it is a failure
        pytest.fail(missing)
    if missing:
        pytest.skip(missing)
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    args = CHROMIUM_FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=args)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def lab():
    with tempfile.TemporaryDirectory(prefix="specmini-lab-") as tmp:
        tmp = Path(tmp)
        root = copy_course(tmp, NOTEBOOKS)
        with jupyter_lab(root, tmp) as (url, token):
            yield url, token


@pytest.mark.parametrize("name, descriptions, screenshot", CASES)
def test_sliders_drive_the_outputs(browser, lab, name, descriptions, screenshot, tmp_path):
    url, token = lab
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        shot = (FIGURES if SAVE_SCREENSHOTS else tmp_path) / screenshot
        check_sliders(page, url, token, name, descriptions, shot)
    finally:
        with contextlib.suppress(Exception):  # the next notebook gets the CPU to itself
            page.evaluate(SHUTDOWN_KERNEL)
        page.close()
