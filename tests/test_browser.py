"""The smoke-built book (the `built_book` fixture in conftest.py) in headless Chromium, as a reader sees it.

Every page: no console errors (level SEVERE), nothing wider than the article column (wide and narrow window),
every font a stylesheet declares is there. Every widget page: each image widget's control switches the image.
Pages are served by http.server on localhost (the font check uses fetch, which file:// pages may not).
Needs Debian's chromium and chromedriver (apt-get install chromium chromium-driver) and selenium; the tests
are skipped with the reason when one is missing, before the book is built.
"""
import functools
import http.server
import threading
import time

import pytest

from conftest import WAIT_S, WINDOW

NARROW = (700, 1000)  # the theme's narrow layout (no sidebars): tables and figures must still fit
NOT_PAGES = {"genindex", "search"}
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Resolves once MathJax 3 has typeset the page (at once on pages without math).
MATHJAX_DONE = """
const done = arguments[arguments.length - 1];
const mj = window.MathJax;
if (!mj || !mj.startup || !mj.startup.promise) { done("no MathJax"); return; }
mj.startup.promise.then(() => done("typeset"), (err) => done("MathJax failed: " + err));
"""

# Every element of the article that reaches past the article's right edge without a scrolling box
# (overflow-x auto or scroll) between it and the article; also whether the page itself scrolls sideways.
OVERFLOWING = """
const article = document.querySelector("main article") || document.querySelector("main");
const found = [];
if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) {
  found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide in a `
             + `${document.documentElement.clientWidth} px window`);
}
if (!article) return found;
const limit = article.getBoundingClientRect().right + 1;
const reported = new Set();
function describe(el) {
  const cls = (el.getAttribute("class") || "").trim().split(/\\s+/).slice(0, 3).join(".");
  return el.tagName.toLowerCase() + (cls ? "." + cls : "");
}
for (const el of article.querySelectorAll("*")) {
  const box = el.getBoundingClientRect();
  if (box.width === 0 || box.height === 0 || box.right <= limit) continue;
  let scrolls = false;
  let inside = false;
  for (let p = el.parentElement; p && p !== article; p = p.parentElement) {
    if (reported.has(p)) { inside = true; break; }
    const overflow = getComputedStyle(p).overflowX;
    if ((overflow === "auto" || overflow === "scroll") && p.getBoundingClientRect().right <= limit) {
      scrolls = true;
      break;
    }
  }
  if (scrolls || inside) continue;
  reported.add(el);
  found.push(`${describe(el)} reaches ${Math.round(box.right - limit)} px past the column `
             + `(${Math.round(box.width)} px wide, column ${Math.round(article.getBoundingClientRect().width)} px)`);
}
// Images scale down instead: none may need a scrolling box either.
for (const img of article.querySelectorAll("img")) {
  const box = img.getBoundingClientRect();
  if (box.width === 0 || reported.has(img)) continue;
  for (let p = img.parentElement; p && p !== article.parentElement; p = p.parentElement) {
    if (p !== article && getComputedStyle(p).overflowX === "visible") continue;
    const inner = p.getBoundingClientRect().left + p.clientLeft + p.clientWidth;
    if (box.right > inner + 1) {
      found.push(`${describe(img)} (${Math.round(box.width)} px wide) does not fit ${describe(p)}: `
                 + `${Math.round(box.right - inner)} px hidden or scrolled`);
      break;
    }
  }
}
return found;
"""

# Every font file that a stylesheet of the page declares (@font-face) and the server does not have: the theme's,
# MathJax's and the widget manager's icon fonts must all be vendored. Fonts are only fetched when text uses
# them, so a missing file would otherwise show up only on the page that first needs it.
MISSING_FONTS = """
const done = arguments[arguments.length - 1];
const urls = new Set();
for (const sheet of document.styleSheets) {
  let rules;
  try { rules = sheet.cssRules; } catch (err) { continue; }
  for (const rule of rules) {
    if (!(rule instanceof CSSFontFaceRule)) continue;
    const base = sheet.href || document.baseURI;
    for (const match of rule.style.getPropertyValue("src").matchAll(/url\\(["']?([^"')]+)["']?\\)/g)) {
      if (!match[1].startsWith("data:")) urls.add(new URL(match[1], base).href.split("#")[0].split("?")[0]);
    }
  }
}
Promise.all(Array.from(urls, (url) => fetch(url, {method: "HEAD"}).then((r) => r.ok ? null : `${url} (${r.status})`,
                                                                          (err) => `${url} (${err})`)))
  .then((results) => done(results.filter(Boolean)));
"""

# SHA-256 of the bytes of the image shown (the visible img.widget-image) in the given widget area.
SHOWN_IMAGE = """
const [area, done] = arguments;
const shown = Array.from(area.querySelectorAll("img.widget-image")).filter((img) => img.offsetParent !== null);
if (shown.length !== 1) { done(`${shown.length} images shown`); return; }
fetch(shown[0].src).then((r) => r.arrayBuffer()).then((bytes) => crypto.subtle.digest("SHA-256", bytes))
  .then((hash) => done(Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("")))
  .catch((err) => done("could not read the image: " + err));
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(browser, built_book):
    """(base URL, html folder, book pages relative to it) with the built book served on localhost."""
    html, _ = built_book
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pages = sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                   if p.relative_to(html).parts[0] not in ("_static", "_sources") and p.stem not in NOT_PAGES)
    yield f"http://127.0.0.1:{server.server_address[1]}", html, pages
    server.shutdown()
    server.server_close()
    thread.join()


def widget_views(driver) -> int:
    return len(driver.find_elements("css selector", 'script[type="application/vnd.jupyter.widget-view+json"]'))


def load(driver, url: str) -> None:
    """Open url and wait until MathJax has typeset it and the widget manager has drawn every widget."""
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(url)
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script("return document.readyState") == "complete")
    status = driver.execute_async_script(MATHJAX_DONE)
    assert not status.startswith("MathJax failed"), f"{url}: {status}"
    views = widget_views(driver)
    if views:
        WebDriverWait(driver, WAIT_S).until(
            lambda d: len(d.find_elements("css selector", ".widget-subarea > .jupyter-widgets")) >= views,
            f"{url}: the widget manager drew fewer than {views} widgets")
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.execute_script("return Array.from(document.images).every((img) => img.complete)"),
        f"{url}: images still loading")
    time.sleep(0.3)  # late requests (icon fonts) and their errors


def severe(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture(scope="module")
def visits(browser, site):
    """{page: (console errors, overflow at the normal window, overflow at the narrow one, missing fonts)},
    every page loaded once."""
    base, _, pages = site
    browser.get_log("browser")  # anything logged before
    results = {}
    for page in pages:
        browser.set_window_size(*WINDOW)
        load(browser, f"{base}/{page}")
        errors = severe(browser)
        fonts = browser.execute_async_script(MISSING_FONTS)
        wide = browser.execute_script(OVERFLOWING)
        browser.set_window_size(*NARROW)
        time.sleep(0.3)
        narrow = browser.execute_script(OVERFLOWING)
        errors += severe(browser)
        results[page] = errors, wide, narrow, fonts
    browser.set_window_size(*WINDOW)
    return results


def test_book_has_pages(site):
    _, _, pages = site
    assert "book/intro.html" in pages and any(p.startswith("book/figures/") for p in pages), pages


def test_no_console_errors(visits):
    failures = {page: errors for page, (errors, *_) in visits.items() if errors}
    assert not failures, "console errors:\n" + "\n".join(
        f"{page}:\n" + "\n".join(f"    {message}" for message in errors) for page, errors in failures.items())


@pytest.mark.parametrize("width", ["wide", "narrow"])
def test_nothing_wider_than_the_column(visits, width):
    column = {"wide": 1, "narrow": 2}[width]
    failures = {page: result[column] for page, result in visits.items() if result[column]}
    assert not failures, f"cut off at the page edge ({width} window):\n" + "\n".join(
        f"{page}:\n" + "\n".join(f"    {item}" for item in found[:8]) for page, found in failures.items())


def test_every_declared_font_exists(visits):
    failures = {page: result[3] for page, result in visits.items() if result[3]}
    assert not failures, "fonts declared but missing (not vendored?):\n" + "\n".join(
        f"{page}:\n" + "\n".join(f"    {url}" for url in missing[:8]) for page, missing in failures.items())


def shown_image(driver, area) -> str:
    digest = driver.execute_async_script(SHOWN_IMAGE, area)
    assert len(digest) == 64, digest
    return digest


def move_control(area) -> str:
    """Move the first control in a widget area with two or more choices one step; its kind, or "" if none."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    for select in map(Select, area.find_elements("css selector", "select")):
        if len(select.options) > 1:
            select.select_by_index(1 if select.first_selected_option.get_attribute("index") == "0" else 0)
            return "dropdown"
    for handle in area.find_elements("css selector", ".noUi-handle"):
        if float(handle.get_attribute("aria-valuemax") or 0) > float(handle.get_attribute("aria-valuenow") or 0):
            handle.click()
            handle.send_keys(Keys.ARROW_RIGHT)
            return "slider"
    return ""


def test_widget_controls_switch_the_image(browser, site):
    """Every image widget (a control jslinked to a Stack of images) on every widget page: one step of the
    control shows another image, which fits the column, and nothing is logged as an error."""
    from selenium.webdriver.support.ui import WebDriverWait
    base, html, pages = site
    widget_pages = [p for p in pages if WIDGET_STATE in (html / p).read_text()]
    if not widget_pages:
        pytest.skip("no page with widgets in this build")
    browser.get_log("browser")
    moved = []
    for page in widget_pages:
        load(browser, f"{base}/{page}")
        for number, area in enumerate(browser.find_elements("css selector", ".widget-subarea")):
            if not area.find_elements("css selector", "img.widget-image"):
                continue
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", area)
            before = shown_image(browser, area)
            kind = move_control(area)
            if not kind:
                continue  # a single image: nothing to switch
            WebDriverWait(browser, 10).until(lambda d: shown_image(d, area) != before,
                                             f"{page}: moving widget {number}'s {kind} did not change the image")
            image, column = browser.execute_script(
                "const img = Array.from(arguments[0].querySelectorAll('img.widget-image')).find(i => i.offsetParent);"
                "const article = document.querySelector('main article') || document.querySelector('main');"
                "return [img.getBoundingClientRect().width, article.getBoundingClientRect().width];", area)
            assert 0 < image <= column + 1, f"{page}: widget {number}'s image: {image} px wide, column {column} px"
            moved.append(f"{page} #{number} ({kind})")
        errors = severe(browser)
        assert not errors, f"{page}: console errors while using the widgets: {errors}"
    assert moved, f"no widget with a control of two or more choices over images on {widget_pages}"
