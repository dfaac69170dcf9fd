"""The documentation site as a reader meets it.

The site (mkdocs.yml, docs/) is built with warnings as errors; every internal link and
anchor of the built pages, and every relative link of the README, must resolve; the
README's and the pages' runnable code samples run as written, twice, against a real
appliance (only the address is replaced); the front page and the quick start are
rendered in headless Chromium (Debian's `chromium`) with screenshots saved under
build/docs-screenshots/, and a page with a broken image or an empty body fails.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import redis
from doc_blocks import README, ROOT, blocks, page, with_port

SCREENSHOTS = ROOT / "build" / "docs-screenshots"
README_MAX_LINES = 300
RUNNABLE = ("README.md", "quickstart.md", "concepts/trajectories.md", "python-client.md")
"""Pages whose every python block is a complete program against 127.0.0.1:6379."""
NEEDS = {"torch": "torch", "torchrl": "torchrl", "tensordict": "tensordict"}
"""A sample importing one of these is skipped where the extra is not installed."""


def build_site(dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(dest)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the dev extra (make deps) installs mkdocs")
    dest = tmp_path_factory.mktemp("site")
    r = build_site(dest)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-3000:]}{r.stderr[-5000:]}"
    return dest


class _Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes (a href, img/script src, link href)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(str(a[key]))
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        elif tag in ("img", "script") and a.get("src"):
            self.links.append(str(a["src"]))
            if tag == "img":
                self.images.append(str(a["src"]))
        elif tag == "link" and a.get("href"):
            self.links.append(str(a["href"]))


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(errors="replace"))
    return p


def _internal(link: str) -> bool:
    s = urlsplit(link)
    return not s.scheme and not s.netloc and not link.startswith("//")


def broken_links(site: Path) -> list[str]:
    """Every internal link of the built site whose file or anchor does not exist."""
    pages = {p: _parse(p) for p in site.rglob("*.html")}
    bad = []
    for path, parsed in pages.items():
        if path.name == "404.html":  # links from the site root, wherever it is served
            continue
        for link in parsed.links:
            if not _internal(link):
                continue
            s = urlsplit(link)
            target = (path.parent / unquote(s.path)).resolve() if s.path else path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if not target.exists():
                bad.append(f"{where} (no file)")
            elif s.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(s.fragment) not in ids:
                    bad.append(f"{where} (no anchor #{s.fragment})")
    return bad


def test_site_builds_with_warnings_as_errors_and_every_link_resolves(site: Path) -> None:
    assert (site / "index.html").exists() and (site / "quickstart.html").exists()
    assert broken_links(site) == []


def test_the_link_check_finds_a_broken_link_and_anchor(site: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "extra.html").write_text('<a href="quickstart.html#no-such-part">x</a>'
                                     '<a href="missing.html">y</a><a href="#here" id="here">z</a>')
    assert broken_links(copy) == ["extra.html: quickstart.html#no-such-part (no anchor "
                                  "#no-such-part)", "extra.html: missing.html (no file)"]


def test_readme_links_resolve_to_pages_and_anchors(site: Path) -> None:
    """README.md's relative links: docs/X.md[#a] must be a built page with that anchor,
    anything else a file of the tree."""
    bad = []
    for link in re.findall(r"\]\(([^)\s]+)\)", README.read_text()):
        if not _internal(link):
            continue
        s = urlsplit(link)
        if s.path.startswith("docs/") and s.path.endswith(".md"):
            built = site / (s.path.removeprefix("docs/")[:-3] + ".html")
            if not built.exists():
                bad.append(f"{link} (no page)")
            elif s.fragment and s.fragment not in _parse(built).ids:
                bad.append(f"{link} (no anchor)")
        elif not (ROOT / s.path).exists():
            bad.append(f"{link} (no file)")
    assert bad == []


def test_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert not re.search(r"\bissues? \d", text, re.I), "issue numbers belong in CHANGELOG.md"
    assert not re.search(r"\b(commit|at) [0-9a-f]{7,40}\b", text), "commit hashes in README"
    assert "pip install ." in text and blocks(text), "install and quick start"


def test_every_generated_block_is_in_one_page() -> None:
    """bench/report.py writes its blocks into the pages (the README keeps none): each
    block it knows must sit in exactly one page under docs/."""
    sys.path.insert(0, str(ROOT / "bench"))
    import report

    names = set(re.findall(r'pages\.replace\("([a-z-]+)"', (ROOT / "bench" / "report.py")
                           .read_text())) | {b for b, _ in report.ONE_FILE_BLOCKS.values()}
    assert len(names) > 15, names
    pages = report.Pages(sorted((ROOT / "docs").rglob("*.md")))
    for name in sorted(names):
        assert pages.holder(name).is_relative_to(ROOT / "docs")
    assert "<!-- BEGIN" not in README.read_text()


def _samples() -> list[Any]:
    out = []
    for name in RUNNABLE:
        for i, code in enumerate(blocks(page(name))):
            out.append(pytest.param(name, i, code, id=f"{name}:{i}"))
    return out


@pytest.mark.parametrize(("name", "index", "code"), _samples())
def test_code_sample_runs_as_written_twice(name: str, index: int, code: str,
                                           replay_server: Any) -> None:
    for mod, dist in NEEDS.items():
        if re.search(rf"^(import|from) {mod}\b", code, re.M):
            pytest.importorskip(mod, reason=f"the sample needs {dist}")
    code = with_port(code, replay_server.host, replay_server.port)
    for run in (1, 2):  # a second run meets what the first left behind
        exec(compile(code, f"{name}:python-{index} (run {run})", "exec"), {"__name__": "sample"})
    r = redis.Redis(host=replay_server.host, port=replay_server.port)
    left = [t.decode() for t in r.execute_command("REPLAY.LIST")]
    r.close()
    assert left == [], f"{name}: the sample leaves tables behind: {left}"


def test_quickstart_redis_cli_block_runs(replay_server: Any) -> None:
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is not installed (Debian's redis-tools)")
    (sh,) = [b for b in blocks(page("quickstart.md"), "sh") if "redis-cli" in b]
    for line in sh.splitlines():
        argv = line.split("#")[0].split()
        r = subprocess.run(["redis-cli", "-h", replay_server.host, "-p",
                            str(replay_server.port), *argv[1:]],
                           capture_output=True, text=True, timeout=30, check=False)
        assert r.returncode == 0 and "ERR" not in r.stdout, (line, r.stdout, r.stderr)


# ---- the pages in a browser -----------------------------------------------------------

PROBE = """<script>
window.addEventListener("load", () => {
  const bad = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
                                  .map(i => i.getAttribute("src"));
  const main = document.querySelector("article") || document.body;
  document.body.setAttribute("data-probe",
      JSON.stringify({bad: bad, chars: main.innerText.trim().length}));
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (make deps installs it)")
    return exe


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            "--hide-scrollbars", "--window-size=1280,1600", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def probe(html_file: Path) -> dict[str, Any]:
    """What the loaded page shows: its broken images and the characters of its body."""
    copy = html_file.with_name(f"_probe_{html_file.name}")
    copy.write_text(html_file.read_text().replace("</body>", PROBE + "</body>"))
    try:
        r = _browser("--virtual-time-budget=5000", "--dump-dom", copy.as_uri())
    finally:
        copy.unlink()
    m = re.search(r'<body[^>]*data-probe="([^"]*)"', r.stdout)
    assert m, f"the page did not load in chromium: {r.stderr[-2000:]}"
    return dict(json.loads(html.unescape(m.group(1))))


def test_a_broken_image_and_an_empty_page_are_seen(site: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><article><img src="nowhere.png"></article></body></html>')
    assert probe(bad) == {"bad": ["nowhere.png"], "chars": 0}


@pytest.mark.parametrize("name", ["index", "quickstart", "patterns", "benchmarks"])
def test_page_renders_in_chromium(site: Path, name: str) -> None:
    html_file = site / f"{name}.html"
    seen = probe(html_file)
    assert seen["bad"] == [], f"{name}: broken images {seen['bad']}"
    assert seen["chars"] > 500, f"{name}: the page body is (nearly) empty: {seen}"
    if name in ("index", "quickstart"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        png = SCREENSHOTS / f"{name}.png"
        png.unlink(missing_ok=True)
        r = _browser(f"--screenshot={png}", html_file.as_uri())
        assert png.exists(), r.stderr[-2000:]
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, len(data)
