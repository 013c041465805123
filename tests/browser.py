"""Headless Chromium driven by Selenium, for the tests that look at a page as a person does: Debian's
chromium and chromium-driver, which make test installs (tools/system_packages.sh; the --html report, Phoenix's UI)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextmanager
def headless_chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A Chrome WebDriver on a ``width`` x ``height`` window, with the browser console logged."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    assert not missing, f"{missing} missing: apt-get install -y chromium chromium-driver (make test does)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
