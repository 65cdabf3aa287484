"""`gpuplan ui` in a real browser: headless Chromium (Debian's package) loads every page, clicks through to a run
and back, and a job named `<script>...` or `<img onerror=...>` (and a log that prints a script) never runs.

One browser and one dashboard for the module: Chromium starts in ~3 s on these machines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support import browser
from support.uihelp import IMG_NAME, LOG_SCRIPT, SCRIPT_NAME, Books, Dashboard, dashboard

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not browser.available(), reason="chromium and chromium-driver are not installed "
                                                                 "(scripts/test-services.sh installs them)")]


@pytest.fixture(scope="module")
def books(ui_books: Books) -> Books:
    return ui_books


@pytest.fixture(scope="module")
def ui(books: Books) -> Iterator[Dashboard]:
    with dashboard(books) as running:
        yield running


@pytest.fixture(scope="module")
def page(ui: Dashboard) -> Iterator[Any]:
    with browser.chromium() as driver:
        yield driver


def _inert(driver: Any) -> None:
    """Nothing injected ran, and no element came from a name: no <script>, no <img> in the document."""
    from selenium.webdriver.common.by import By

    assert driver.execute_script("return window.pwned === undefined")
    assert driver.find_elements(By.TAG_NAME, "script") == []
    assert driver.find_elements(By.TAG_NAME, "img") == []


def test_every_page_loads_and_nothing_from_the_database_runs(ui: Dashboard, page: Any) -> None:
    from selenium.webdriver.common.by import By

    for path, heading in (("/runs", "Runs"), ("/books", "Books"), ("/accuracy", "Estimate accuracy"),
                          ("/plan?model=llama-2-7b&tokens=140B&deadline=72h", "Plan explorer")):
        page.get(ui.url.rstrip("/") + path)
        assert page.find_element(By.TAG_NAME, "h1").text == heading, path
        assert page.find_elements(By.CSS_SELECTOR, "svg.chart") or path == "/runs", path
        _inert(page)
    names = [cell.text for cell in page.find_elements(By.CSS_SELECTOR, "td.name")]  # the plan page: no names
    assert names == []


def test_the_runs_page_shows_hostile_names_as_text_and_clicks_through_to_a_run(books: Books, ui: Dashboard,
                                                                               page: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    page.get(ui.url.rstrip("/") + "/runs?refresh=off")
    shown = {cell.text for cell in page.find_elements(By.CSS_SELECTOR, "td.name")}
    assert {SCRIPT_NAME, IMG_NAME, "plain-failing"} <= shown
    _inert(page)
    row = next(r for r in page.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
               if r.find_element(By.CSS_SELECTOR, "td.name").text == SCRIPT_NAME)
    run_id = row.find_element(By.CSS_SELECTOR, "a.run-link").text
    row.find_element(By.CSS_SELECTOR, "a.run-link").click()
    WebDriverWait(page, 30).until(expected_conditions.url_to_be(f"{ui.url.rstrip('/')}/runs/{run_id}"))
    assert page.find_element(By.CSS_SELECTOR, "h1 span.name").text == SCRIPT_NAME
    assert LOG_SCRIPT in page.find_element(By.CSS_SELECTOR, "pre.log").text
    assert len(page.find_elements(By.CSS_SELECTOR, "svg.chart polyline.curve")) == 2
    cost = books.cli_json("status", run_id)["cost_usd"]
    assert page.find_element(By.ID, "cost").text == f"${cost:,.4f}"
    _inert(page)
    page.find_element(By.LINK_TEXT, "Books").click()
    WebDriverWait(page, 30).until(expected_conditions.url_to_be(f"{ui.url.rstrip('/')}/books"))
    total = books.cli_json("report")["total"]["cost_usd"]
    assert page.find_element(By.ID, "total").text == f"${total:,.2f}"


def test_the_filters_narrow_the_runs_as_the_cli_does(books: Books, ui: Dashboard, page: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import Select, WebDriverWait

    page.get(ui.url.rstrip("/") + "/runs?refresh=off")
    Select(page.find_element(By.NAME, "project")).select_by_visible_text("alpha")
    Select(page.find_element(By.NAME, "state")).select_by_visible_text("succeeded")
    page.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(page, 30).until(expected_conditions.url_contains("project=alpha"))
    shown = [a.text for a in page.find_elements(By.CSS_SELECTOR, "a.run-link")]
    expected = [r["run_id"] for r in books.cli_json("runs", "--project", "alpha", "--state", "succeeded")]
    assert shown == expected and len(shown) == 2
