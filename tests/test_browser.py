"""The pages in a real browser: headless Chromium at phone and desktop sizes, against a real server.

Checks what only a browser can: hostile node text renders as text and never runs, and the
pages fit a phone screen without horizontal scrolling. scripts/install-test-tools installs chromium and chromedriver;
when they are missing this test fails (it is never skipped). Screenshots of every page at both
sizes go to $KNOWMESH_SCREENS (default /tmp/km-screens), for a person to look at.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By

from knowmesh_mcp.services.import_export import load_documents
from knowmesh_mcp.services.mesh import Mesh
from knowmesh_mcp.store import store_dir

pytestmark = pytest.mark.anyio

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARGUMENTS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=412,915",
)
PAYLOAD = "<script>window.__pwned = 1</script>"
ATTRIBUTE_PAYLOAD = '"><img src=x onerror="window.__pwned = 2">'
PHONE = (412, 915)
DESKTOP = (1280, 900)
SCREENS = Path(os.environ.get("KNOWMESH_SCREENS", "/tmp/km-screens"))
NODE = "python/hostile-venv"
LAYOUT = "return [document.documentElement.scrollWidth, window.innerWidth, document.body.scrollWidth]"


def chromium(tmp_path: Path) -> webdriver.Chrome:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.fail(f"the browser test needs {' and '.join(missing)}: install chromium and chromedriver "
                    "(Debian/Ubuntu: apt-get install chromium chromium-driver)", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(service=ChromeService(executable_path=str(CHROMEDRIVER)), options=options)
    emulate(driver, PHONE)
    return driver


def emulate(driver: webdriver.Chrome, size: tuple[int, int]) -> None:
    """Headless windows are at least 500 px wide: emulate the device itself (a phone also honours <meta viewport>)."""
    phone = size == PHONE
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": size[0], "height": size[1], "deviceScaleFactor": 2 if phone else 1, "mobile": phone})


def browse(base_url: str, tmp_path: Path) -> dict[str, Any]:
    """Blocking selenium calls (run in a worker thread so the in-loop server can answer)."""
    driver = chromium(tmp_path)
    seen: dict[str, Any] = {}
    try:
        driver.set_page_load_timeout(30)
        driver.get(f"{base_url}/nodes")
        seen["index_text"] = driver.find_element(By.TAG_NAME, "body").text
        seen["index_layout"] = driver.execute_script(LAYOUT)
        driver.get(f"{base_url}/nodes/{NODE}")
        seen["node_title"] = driver.title
        seen["node_text"] = driver.find_element(By.TAG_NAME, "body").text
        seen["pwned"] = driver.execute_script("return window.__pwned")
        seen["images"] = driver.execute_script("return document.images.length")
        seen["scripts"] = driver.execute_script("return document.scripts.length")
        seen["node_layout"] = driver.execute_script(LAYOUT)
        seen["steps"] = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "ol.steps > li")]
        driver.save_screenshot(str(tmp_path / "node.png"))
        full = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "format": "png"})
        (tmp_path / "node-full.png").write_bytes(base64.b64decode(full["data"]))
        driver.get(f"{base_url}/nodes?q=ModuleNotFoundError+requests")
        seen["search_pwned"] = driver.execute_script("return window.__pwned")
        seen["search_layout"] = driver.execute_script(LAYOUT)
        driver.get(f"{base_url}/docs/protocol")  # tables and long code blocks
        seen["doc_heading"] = driver.find_element(By.TAG_NAME, "h1").text
        seen["doc_layout"] = driver.execute_script(LAYOUT)
    finally:
        driver.quit()
    return seen


async def test_pages_render_safely_on_a_phone(service: Mesh, base_url: str, make_doc, tmp_path: Path):
    base = make_doc()
    solution = {**base["content"]["solutions"][0],
                "fix": ["python3 -m venv .venv", f".venv/bin/python -m pip install requests  # {PAYLOAD}",
                        "a-very-long-unbroken-token-" + "x" * 160],
                "verify": {"command": ".venv/bin/python -c 'import requests'", "expected": "exit 0"}}
    await service.creation.create_node(make_doc(
        id=NODE,
        title=f"ModuleNotFoundError for requests {PAYLOAD}",
        content={**base["content"], "symptom": f"Import fails. {ATTRIBUTE_PAYLOAD}",
                 "context": "A long path: /" + "/".join(["very-long-directory-name"] * 20), "solutions": [solution]},
    ))

    seen = await anyio.to_thread.run_sync(browse, base_url, tmp_path)

    assert "python" in seen["index_text"] and f"ModuleNotFoundError for requests {PAYLOAD}" in seen["index_text"]
    text = seen["node_text"]
    assert f"ModuleNotFoundError for requests {PAYLOAD}" in text
    assert seen["node_title"] == f"ModuleNotFoundError for requests {PAYLOAD} · Knowmesh"
    assert "<script>" in text and ATTRIBUTE_PAYLOAD in text  # shown as text, literally
    assert seen["steps"][:2] == ["python3 -m venv .venv", f".venv/bin/python -m pip install requests  # {PAYLOAD}"]
    assert "Verify" in text and ".venv/bin/python -c 'import requests'" in text
    assert seen["pwned"] is None and seen["search_pwned"] is None  # nothing ran
    assert seen["images"] == 0 and seen["scripts"] == 0
    assert seen["doc_heading"]
    for name in ("index_layout", "node_layout", "search_layout", "doc_layout"):
        scroll_width, inner_width, body_width = seen[name]
        assert inner_width == PHONE[0], seen[name]  # the phone-sized viewport took effect
        assert scroll_width <= inner_width and body_width <= inner_width, (name, seen[name])  # no sideways scrolling

    screenshot = tmp_path / "node.png"
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- every kind of page, at both sizes -------------------------------------------------------------

HOSTILE = "python/hostile-history"
PAGES = {  # name: path
    "home": "/",
    "ecosystem": "/nodes/python",
    "node": f"/nodes/{HOSTILE}",
    "history": f"/nodes/{HOSTILE}/history",
    "diff": f"/nodes/{HOSTILE}/diff?from=1&to=2",
    "review": "/review",
    "issues": "/issues",
    "issue": "/issues/1",
}
INERT = {"home", "ecosystem", "node", "history", "diff", "review", "issues", "issue"}  # pages showing PAYLOAD


def visit_all(base_url: str, tmp_path: Path) -> dict[tuple[str, tuple[int, int]], dict[str, Any]]:
    """Every page at both sizes: its text, layout, scripts, and screenshots saved to SCREENS."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    driver = chromium(tmp_path)
    seen: dict[tuple[str, tuple[int, int]], dict[str, Any]] = {}
    try:
        driver.set_page_load_timeout(30)
        for size in (DESKTOP, PHONE):
            emulate(driver, size)
            for name, path in PAGES.items():
                driver.get(base_url + path)
                label = f"{name}-{size[0]}x{size[1]}"
                driver.save_screenshot(str(SCREENS / f"{label}.png"))
                full = driver.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "format": "png"})
                (SCREENS / f"{label}-full.png").write_bytes(base64.b64decode(full["data"]))
                seen[(name, size)] = {
                    "text": driver.find_element(By.TAG_NAME, "body").text,
                    "h1": driver.find_element(By.TAG_NAME, "h1").text,
                    "layout": driver.execute_script(LAYOUT),
                    "pwned": driver.execute_script("return window.__pwned"),
                    "scripts": driver.execute_script("return document.scripts.length"),
                    "images": driver.execute_script("return document.images.length"),
                    "canonical": driver.execute_script(
                        "const l = document.querySelector('link[rel=canonical]'); return l && l.href"),
                    "description": driver.execute_script(
                        "const m = document.querySelector('meta[name=description]'); return m && m.content"),
                    "anchors": driver.execute_script(
                        "return [...document.querySelectorAll('h2')].every(h => h.id && "
                        "h.querySelector('a.anchor') && h.querySelector('a.anchor').getAttribute('href') === '#' + h.id)"),
                }
    finally:
        driver.quit()
    return seen


async def test_every_page_fits_both_sizes_and_hostile_text_stays_inert(service: Mesh, base_url: str, make_doc,
                                                                         tmp_path: Path):
    await service.documents.import_documents(load_documents([store_dir() / "starter"]), summary="Starter corpus")
    base = make_doc()
    await service.creation.create_node(make_doc(
        id=HOSTILE, title=f"Hostile history {PAYLOAD}", error="RuntimeError: hostile history widget broke",
        content={**base["content"], "symptom": f"Breaks. {ATTRIBUTE_PAYLOAD}",
                 "root_cause": "A long path: /" + "/".join(["very-long-directory-name"] * 12),
                 "solutions": base["content"]["solutions"][:1]},
    ), agent={"id": "agent-author"})
    await service.articles.patch_article(HOSTILE, base_revision=1, agent={"id": "agent-editor"}, summary=f"Sharpen {PAYLOAD}",
                                ops=[{"op": "set", "path": "/content/root_cause", "value": f"Two interpreters {PAYLOAD}"},
                                     {"op": "set", "path": "/content/solutions/venv-macos/fix/-",
                                      "value": "a-very-long-unbroken-token-" + "x" * 160}])
    for agent in ("agent-s1", "agent-s2", "agent-s3", "agent-f1"):
        await service.outcomes.report_outcome({"node": HOSTILE, "solution": "venv-macos", "env": {"os": "macos-15",
                                      "runtime": "python-3.12", "pkg_manager": "pip"}, "agent": {"id": agent},
                                      "outcome": "failed" if agent == "agent-f1" else "solved",
                                      "reason": "Still broken." if agent == "agent-f1" else None,
                                      "evidence": {"exit_code": 0}})
    unsolved = make_doc(id="python/hostile-open", title=f"Open {PAYLOAD}", error="RuntimeError: hostile open gizmo",
                        content={**base["content"], "solutions": []})
    await service.creation.create_node(unsolved)
    await service.issues.file_issue({"title": f"Pages {PAYLOAD}", "body": f"Body {ATTRIBUTE_PAYLOAD}", "endpoint": "/review"})

    seen = await anyio.to_thread.run_sync(visit_all, base_url, tmp_path)

    for (name, size), page in seen.items():
        where = (name, size)
        scroll_width, inner_width, body_width = page["layout"]
        assert inner_width == size[0], where  # the emulated size took effect
        assert scroll_width <= inner_width and body_width <= inner_width, (where, page["layout"])  # no sideways scroll
        assert page["pwned"] is None and page["scripts"] == 0 and page["images"] == 0, where  # nothing ran or loaded
        assert page["canonical"] and page["canonical"].startswith(base_url), where
        assert page["description"], where
        assert page["anchors"], where  # every h2 carries its anchor
        if name in INERT:
            assert "<script>" in page["text"], where  # the payload is shown, literally, as text
        label = f"{name}-{size[0]}x{size[1]}"
        for suffix in ("", "-full"):
            shot = SCREENS / f"{label}{suffix}.png"
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5_000, shot

    home = seen[("home", DESKTOP)]
    assert home["h1"] == "Knowmesh" and "Open problems" in home["text"] and f"Open {PAYLOAD}" in home["text"]
    assert "python" in seen[("ecosystem", PHONE)]["h1"]
    node = seen[("node", PHONE)]["text"]
    assert "Worked for 3 agents on macos · python 3 · pip, failed for 1." in node
    assert "Status: draft" in node and "Answer state:" in node
    assert f"Sharpen {PAYLOAD}" in seen[("history", DESKTOP)]["text"]
    diff = seen[("diff", PHONE)]["text"]
    assert f"+ Two interpreters {PAYLOAD}" in diff and "/content/root_cause changed" in diff
    review = seen[("review", DESKTOP)]["text"]
    assert "items need attention" in review and "Never verified" in review and "Next page" in review
    assert f"Pages {PAYLOAD}" in seen[("issues", PHONE)]["text"]
    assert ATTRIBUTE_PAYLOAD in seen[("issue", PHONE)]["text"]
