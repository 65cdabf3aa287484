"""The documentation site builds strictly (a broken link, a missing page or any other warning fails), works
offline (no web fonts, no CDN), and lists every page in its navigation; the README stays a short front door."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTERNAL_ASSET = re.compile(r"""<(?:link|script|img)\b[^>]*\b(?:href|src)=["'](?:https?:)?//""", re.IGNORECASE)


# Pages another contributor adds without touching mkdocs.yml or any .nav.yml: a new section, and a page in a
# folder whose .nav.yml orders the others. The build below has them too: they must be in the nav, strictly.
ADDED_PAGES = {"newsection/added.md": "# Added later\n\nA new section.\n",
               "concepts/zz-added.md": "# Also added later\n\nA page the folder's .nav.yml does not name.\n"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built strictly from the repository's docs plus ADDED_PAGES (a copy; the docs are not touched)."""
    work = tmp_path_factory.mktemp("docs-build")
    shutil.copytree(REPO / "docs", work / "docs")
    for name, text in ADDED_PAGES.items():
        (work / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (work / "docs" / name).write_text(text)
    config = (REPO / "mkdocs.yml").read_text()
    config = config.replace("docs_dir: docs", f"docs_dir: {work / 'docs'}")
    config = config.replace("  - scripts/docsite/hooks.py", f"  - {REPO / 'scripts' / 'docsite' / 'hooks.py'}")
    (work / "mkdocs.yml").write_text(config)
    out = work / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(work / "mkdocs.yml"), "--site-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def test_the_site_builds_strictly_with_the_generated_references(site: Path) -> None:
    for page in ("index.html", "getting-started/index.html", "reference/cli/index.html",
                 "reference/job-spec/index.html", "reference/config/index.html", "reference/errors/index.html",
                 "troubleshooting/index.html"):
        assert (site / page).is_file(), page
    assert "gpuplan launch" in (site / "reference" / "cli" / "index.html").read_text()


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    offenders = [str(p.relative_to(site)) for p in site.rglob("*.html") if EXTERNAL_ASSET.search(p.read_text())]
    assert not offenders, f"pages that load fonts/scripts/images from the network: {offenders[:5]}"
    assert "fonts.googleapis.com" not in "".join(p.read_text() for p in site.rglob("*.css"))


def test_every_page_is_in_the_navigation_even_one_added_without_editing_the_config(site: Path) -> None:
    nav = (site / "index.html").read_text()
    for name in ADDED_PAGES:
        assert (site / name.removesuffix(".md") / "index.html").is_file(), name
        assert f'href="{name.removesuffix(".md")}/"' in nav, f"{name} is not in the nav"
    for md in (REPO / "docs").rglob("*.md"):
        rel = md.relative_to(REPO / "docs")
        url = "" if rel.as_posix() == "index.md" else (
            f"{rel.parent.as_posix()}/" if rel.name == "index.md" else f"{rel.with_suffix('').as_posix()}/")
        assert url == "" or f'href="{url}"' in nav, f"{rel} is not in the nav"


def test_the_readme_is_short_and_says_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "make demo" in readme and "make test" in readme
