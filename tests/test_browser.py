"""The pages in a real browser: headless Chromium on a phone-sized window, against a real server.

Checks what only a browser can: hostile node text renders as text and never runs, and the
pages fit a phone screen without horizontal scrolling. scripts/install-test-tools installs chromium and chromedriver;
when they are missing this test fails (it is never skipped).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By

from knowmesh_mcp.service import Service

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
    # Headless windows are at least 500 px wide: emulate the phone itself (which also honours <meta viewport>).
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 2, "mobile": True})
    return driver


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


async def test_pages_render_safely_on_a_phone(service: Service, base_url: str, make_doc, tmp_path: Path):
    base = make_doc()
    solution = {**base["content"]["solutions"][0],
                "fix": ["python3 -m venv .venv", f".venv/bin/python -m pip install requests  # {PAYLOAD}",
                        "a-very-long-unbroken-token-" + "x" * 160],
                "verify": {"command": ".venv/bin/python -c 'import requests'", "expected": "exit 0"}}
    await service.create_node(make_doc(
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
