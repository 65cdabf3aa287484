#!/usr/bin/env python3
"""Screenshots of `gpuplan ui` for the docs (docs/ui/*.png), taken in headless Chromium over the demo's books.

    make demo && make ui-screenshots        # or: python scripts/ui_screenshots.py --db sqlite:///.demo/gpuplan.db

Starts the dashboard on a free loopback port against that database, opens each main page with Debian's
chromium/chromedriver (Selenium, never Selenium Manager's downloads) and saves the page at its full height.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {  # file name -> path; the first run of the list stands in for "a run"
    "runs": "/runs?refresh=off",
    "run": None,
    "books": "/books",
    "accuracy": "/accuracy",
    "plan": "/plan?model=llama-2-7b&tokens=140B&deadline=72h",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=f"sqlite:///{ROOT / '.demo' / 'gpuplan.db'}", help="the books to show")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui", help="where the PNGs go")
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    env = {**os.environ, "GPUPLAN_DB": args.db}
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "ui", "--no-browser", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    url = proc.stdout.readline().split()[2].rstrip("/")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={args.width},900", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for name, path in PAGES.items():
            if path is None:
                driver.get(url + "/runs?refresh=off")
                links = driver.find_elements(By.CSS_SELECTOR, "a.run-link")
                if not links:
                    continue
                path = links[-1].get_attribute("href").removeprefix(url)
            driver.get(url + path)
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(args.width, min(max(int(height), 600), 4000))
            target = args.out / f"{name}.png"
            driver.save_screenshot(str(target))
            print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    finally:
        driver.quit()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
