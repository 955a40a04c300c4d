#!/usr/bin/env python3
"""Screenshot what a reader sees first on every page of a built book: headless Chromium at 1,400 x 1,000.

    python scripts/first_screens.py OUT [--html book/_build/html] [--only mws_plateau intro] [--full]

Writes OUT/<page>.png (``--full``: the whole page, up to 12,000 px tall) and OUT/first_screens.csv: per page, its
title, the first heading of its verdict box ("The verdict", where the page has one) and whether that box starts
inside the first screen. Pages are served from the files themselves (file://), offline.
"""
from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT, FULL_MAX = 1400, 1000, 12_000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The verdict box's top on the page, in CSS pixels (None without one), and the page's title and height.
MEASURE = """
const box = document.querySelector('.verdict-box');
const top = box ? box.getBoundingClientRect().top + window.scrollY : null;
return [document.title, top, document.documentElement.scrollHeight];
"""


def pages(html: Path, only: list[str] | None) -> list[Path]:
    found = sorted([html / "book" / "intro.html", *html.glob("book/*.html"), *html.glob("book/figures/*.html")])
    found = list(dict.fromkeys(found))
    return [p for p in found if only is None or p.stem in only]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--html", type=Path, default=ROOT / "book" / "_build" / "html")
    parser.add_argument("--only", nargs="+", default=None, help="page names (file stems) to shoot")
    parser.add_argument("--full", action="store_true", help="the whole page, not the first screen")
    args = parser.parse_args(argv)
    args.html = args.html.resolve()  # file:// addresses need an absolute path
    if not (args.html / "book").is_dir():
        raise SystemExit(f"error: no built book at {args.html} (run make book first)")
    args.out.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in [*FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    rows = []
    try:
        for page in pages(args.html, args.only):
            driver.set_window_size(WIDTH, HEIGHT)
            driver.get(page.as_uri())
            for _ in range(20):  # MathJax and the widgets lay the page out after its load event
                title, top, height = driver.execute_script(MEASURE)
                if top is not None or "figures" not in page.parts:
                    break
                time.sleep(0.25)
            if args.full:
                driver.set_window_size(WIDTH, min(int(height) + 200, FULL_MAX))
            driver.save_screenshot(str(args.out / f"{page.stem}.png"))
            rows.append({"page": page.stem, "title": title, "verdict box at (px)": None if top is None else round(top),
                         "in the first screen": top is not None and top < HEIGHT, "page height (px)": height})
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    with open(args.out / "first_screens.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
