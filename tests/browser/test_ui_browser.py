"""`retold ui` in a real browser: headless Chromium, driven by Selenium, against the demo store.

``make test-browser`` runs these (``make test`` leaves the ``browser`` marker out). A missing
Chromium or chromedriver fails the run with the package to install; it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui_harness import UiServer, chromium, demo_store

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """Chromium on `retold ui --allow-admin` over a fresh demo store."""
    tmp = tmp_path_factory.mktemp("browser")
    store = tmp / "memory.sqlite"
    demo_store(store)
    with UiServer(store, "--allow-admin", "--operator", "browser-test") as server:
        driver = chromium(Path(tmp) / "profile")
        driver.implicitly_wait(5)
        try:
            yield driver, server.url.rstrip("/")
        finally:
            driver.quit()


def by_text(driver: Any, text: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.PARTIAL_LINK_TEXT, text)


def body(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


def load(driver: Any, go: Any) -> None:
    """Click (or submit) ``go`` and wait until the next page has replaced this one.

    A click returns before a form's navigation has always finished; reading the page then
    meets the old document's elements ("stale element reference").
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    go()
    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(old))
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_the_home_page_and_a_record_with_its_evidence(browser: tuple[Any, str]) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser
    driver.get(base + "/")
    assert driver.title == "Scopes · retold ui"
    page = body(driver)
    assert "user:u1" in page and "Aditya prefers detailed answers with examples." in page
    row = driver.find_element(By.XPATH, "//tr[td[contains(., 'Aditya prefers detailed answers')]]")
    load(driver, row.find_element(By.TAG_NAME, "a").click)
    assert driver.find_element(By.TAG_NAME, "mark").text == "I now prefer detailed answers with examples"
    page = body(driver)
    assert "supersedes" in page and "Aditya prefers concise answers." in page
    assert "record.created" in page and "Forget…" in page


def test_a_search_through_the_form_shows_its_stages_and_replays_the_gate(browser: tuple[Any, str]) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser
    driver.get(base + "/")
    load(driver, by_text(driver, "Search as").click)
    driver.find_element(By.NAME, "agent").send_keys("planner")
    driver.find_element(By.NAME, "user").send_keys("u1")
    driver.find_element(By.NAME, "queries").send_keys("how detailed should answers be")
    load(driver, driver.find_element(By.CSS_SELECTOR, "button[type=submit]:not(header button)").click)
    page = body(driver)
    assert "agent planner for user u1" in page
    assert "Aditya prefers detailed answers with examples." in page  # the result a person reads
    assert "dense 0." in page and ">= 0.33 (semantic)" in page  # why it passed the gate
    assert "step 1: dense" in page and "gated out" in page  # why the others did not
    for stage in ("Stage 1 · Channels", "Stage 2 · Fusion (RRF) and gate decisions", "Stage 3 · Dedup",
                  "Stage 4 · Rerank", "Stage 5 · Budget", "Timings"):  # fmt: skip
        assert stage in page
    # The answer stands out of the other matches too: raise that floor with its type's.
    floors = (("dense.semantic", "0.95"), ("standout_floor", "0.95"), ("lexical_min_matched_terms", "9"))
    for name, value in floors:
        field = driver.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    load(driver, driver.find_element(By.XPATH, "//button[text()='Replay']").click)
    page = body(driver)
    assert "0 candidate(s) pass under these floors; 1 decision(s) change." in page
    assert "passed gated out" in page and "< 0.95 (semantic)" in page


def test_plots_and_acting_as_another_principal(browser: tuple[Any, str]) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser
    driver.get(base + "/plots")
    titles = [
        t.get_attribute("textContent") for t in driver.find_elements(By.CSS_SELECTOR, "svg.plot > title")
    ]
    assert len(titles) == 3 and any("latency" in t for t in titles) and any("Gate pass" in t for t in titles)
    box = driver.find_element(By.NAME, "as")
    box.send_keys("stranger/u9")
    load(driver, box.submit)
    page = body(driver)
    assert "acting as stranger/u9" in page and "Aditya" not in page
    driver.get(base + "/?as=planner/u1")
    assert "Aditya prefers detailed answers with examples." in body(driver)


def test_forgetting_a_record_behind_its_confirmation_form(browser: tuple[Any, str]) -> None:
    from selenium.webdriver.common.by import By

    driver, base = browser
    driver.get(base + "/scopes/user/u1?status=provisional")
    load(driver, driver.find_element(By.XPATH, "//tr[td[contains(., 'night shifts')]]//a").click)
    load(driver, by_text(driver, "Forget").click)
    assert "Forget record" in body(driver) and "browser-test" in body(driver)
    driver.find_element(By.NAME, "reason").send_keys("the user asked")
    driver.find_element(By.NAME, "confirm").click()
    load(driver, driver.find_element(By.XPATH, "//button[text()='Forget']").click)
    page = body(driver)
    assert "Forgotten" in page and "deleted" in page
    assert "browser-test" in page and "the user asked" in page  # the audited event, with its actor
