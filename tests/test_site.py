"""The built site, opened in a real browser: pages load without a console error or a missing file,
and the search finds what the pages hold.

``make test`` builds the site first (``make docs``); the browser is a headless Chromium (Debian's
``chromium``, which ``.ci/run`` installs) driven by Playwright over a server on 127.0.0.1.
"""

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[1] / "docs" / "_build" / "html"
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SITE / "index.html").is_file(), reason=f"the site is not built in {SITE}: run make docs "
                       "(make test builds it first)"),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to open the site with: apt-get install chromium"),
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reports what failed; the server's log is noise
        pass


@pytest.fixture(scope="module")
def site_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def open_page(browser, url: str):
    """Open ``url`` and return the page with what went wrong on it: console errors, uncaught
    exceptions, and requests that failed or answered 4xx/5xx."""
    page = browser.new_page()
    problems = []
    page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"failed: {request.url}"))
    page.on("response", lambda response: problems.append(f"{response.status}: {response.url}")
            if response.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page, problems


@pytest.mark.parametrize("path, holds", [
    ("index.html", "which aggregation strategy copes best"),
    ("tutorials/partitions.html", "Heterogeneity and plots"),
    ("reference/api.html", "fedsim.Algorithm"),
    ("gallery/plot_dirichlet.html", "Dirichlet label skew"),
])
def test_a_page_loads_without_an_error(browser, site_url, path, holds):
    page, problems = open_page(browser, f"{site_url}/{path}")
    assert holds in page.inner_text("body")
    images = page.eval_on_selector_all("img", "images => images.map(image => [image.src, image.naturalWidth])")
    assert all(width > 0 for _, width in images), images  # every figure drawn, none broken
    assert not problems, problems
    page.close()


def test_the_api_page_documents_the_algorithm_hooks(browser, site_url):
    page, problems = open_page(browser, f"{site_url}/reference/api.html")
    for name in ("fedsim.Algorithm", "fedsim.Algorithm.local_terms", "fedsim.Algorithm.aggregate", "fedsim.RunConfig"):
        assert page.locator(f"[id='{name}']").count() == 1, name
    assert not problems, problems
    page.close()


def test_every_gallery_page_shows_its_figure(browser, site_url):
    index, problems = open_page(browser, f"{site_url}/gallery/index.html")
    examples = index.eval_on_selector_all(".sphx-glr-thumbcontainer a", "links => links.map(link => link.href)")
    assert len(set(examples)) >= 10 and not problems, (examples, problems)
    for url in sorted(set(examples)):
        page, problems = open_page(browser, url)
        drawn = page.eval_on_selector_all("img.sphx-glr-single-img, img.sphx-glr-multi-img",
                                          "images => images.map(image => image.naturalWidth)")
        assert drawn and all(width > 0 for width in drawn) and not problems, (url, drawn, problems)
        page.close()
    index.close()


def test_the_search_finds_dirichlet(browser, site_url):
    page, problems = open_page(browser, f"{site_url}/search.html?q=Dirichlet")
    page.wait_for_selector("ul.search li", timeout=30_000)
    found = page.eval_on_selector_all("ul.search li a", "links => links.map(link => link.getAttribute('href'))")
    assert any("tutorials/partitions" in href for href in found), found
    assert any("gallery/plot_dirichlet" in href for href in found), found
    assert not problems, problems
    page.close()
