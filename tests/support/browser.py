"""A headless Chromium driven by Selenium: Debian's `chromium` and `chromium-driver` (scripts/test-services.sh).

The driver is named explicitly and Selenium Manager is told to stay offline, so nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def available() -> bool:
    return bool(shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER))


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium session (a selenium WebDriver), quit at the end of the block."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never fetch a browser or a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions",
                "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
