"""``ragtrace report --html`` as a person sees it: the page in a real headless Chromium (Debian's
chromium and chromium-driver, which make test installs), driven by Selenium.

The page must render with no console errors and fetch nothing, its charts' axis labels must not
overlap, nothing may run off the page, hovering a run's point must show its trace and value, and a
click on a run must open its chunks. A screenshot of the whole page goes to out/html-report.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser import headless_chromium
from ragtrace._internal.names import PROXY_METRICS

from .helpers import write_known

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "out" / "html-report.png"
pytestmark = pytest.mark.heavy

# Every tick label of every chart axis, and the pairs of one axis whose boxes overlap.
_OVERLAPS = """
const found = [];
for (const chart of document.querySelectorAll('.js-plotly-plot')) {
  for (const axis of ['xtick', 'ytick']) {
    const boxes = [...chart.querySelectorAll('g.' + axis + ' text')].map(t => [t.textContent, t.getBoundingClientRect()])
      .filter(([text, box]) => text && box.width > 0);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const [a, p] = boxes[i], [b, q] = boxes[j];
      if (p.left < q.right - 0.5 && q.left < p.right - 0.5 && p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5)
        found.push([chart.id, axis, a, b]);
    }
  }
}
return found;
"""
_TICKS = "return [...document.querySelectorAll('#' + arguments[0] + ' g.' + arguments[1] + ' text')].map(t => t.textContent);"


@pytest.fixture
def json_decoder() -> str:
    """Overrides conftest's per-decoder parametrisation: the page is the same either way (test_compiled.py)."""
    return "auto"


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as driver:
        yield driver


@pytest.fixture
def page(cli, tmp_path, browser):
    path = tmp_path / "known.jsonl"
    write_known(path)
    html = tmp_path / "report.html"
    assert cli("report", "--html", html, path).code == 0
    browser.get(html.as_uri())
    browser.find_element("id", "chart-time")  # the page has loaded
    return browser


def test_report_page_in_chromium(page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(page, 60).until(lambda d: d.execute_script("return document.querySelectorAll('.js-plotly-plot .main-svg').length") > 0)
    charts = page.execute_script("return [...document.querySelectorAll('.js-plotly-plot')].map(c => c.id)")
    assert charts == ["chart-proxies", "chart-time", "chart-positions", "chart-by-version", "chart-by-route", "chart-by-pipeline", "chart-by-top_k"]
    errors = [entry for entry in page.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert page.execute_script(_OVERLAPS) == []
    # whole counts on the histogram's y axis, each once (no "0, 1, 2, 2, 3")
    counts = page.execute_script(_TICKS, "chart-proxies", "ytick")
    assert counts and len(counts) == len(set(counts)) and all(c.replace(",", "").isdigit() for c in counts), counts
    assert page.execute_script(_TICKS, "chart-by-version", "xtick") == ["v1", "v2"]
    # nothing runs off the page: not the runs table with its trace ids, not the legends
    assert page.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    legends = page.execute_script("return [...document.querySelectorAll('#chart-proxies g.legend text')].map(t => t.textContent)")
    assert legends == list(PROXY_METRICS)  # whole names, none cut off

    # hover a listed run's point: its trace id and value
    points = page.find_elements("css selector", "#chart-time .scatterlayer .trace:last-child path.point")
    assert len(points) == 3  # the three measurable runs
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", points[0])
    ActionChains(page).move_to_element(points[0]).perform()
    WebDriverWait(page, 10).until(lambda d: d.find_elements("css selector", "#chart-time .hovertext"))
    hover = page.find_element("css selector", "#chart-time .hovertext").text
    assert "trace " in hover and "recall_proxy 0.000" in hover, hover

    # click that point: the worst run's chunks open, in rank order, with why the others did not land
    ActionChains(page).move_to_element(points[0]).click().perform()
    detail = page.find_element("id", "run-0-chunks")
    WebDriverWait(page, 10).until(lambda d: detail.is_displayed())
    rows = [[cell.text for cell in row.find_elements("tag name", "td")] for row in detail.find_elements("css selector", ":scope table tbody tr")]
    assert rows == [
        ["1", "d1", "1", "", ""],
        ["2", "d2", "2", "", ""],
        ["3", "d3", "-", "", "never offered to the assembly"],
        ["4", "d4", "-", "", "never offered to the assembly"],
    ], rows
    # a click on a row toggles its chunks
    second = page.find_element("id", "run-1")
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", second)
    second.click()
    assert page.find_element("id", "run-1-chunks").is_displayed()
    second.click()
    assert not page.find_element("id", "run-1-chunks").is_displayed()

    SCREENSHOT.parent.mkdir(exist_ok=True)
    height = page.execute_script("return document.documentElement.scrollHeight")
    page.set_window_size(1280, height)
    page.execute_script("window.scrollTo(0, 0)")
    assert page.save_screenshot(str(SCREENSHOT))
    assert page.execute_script(_OVERLAPS) == []  # at the full height too
