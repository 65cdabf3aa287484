"""mkdocs hooks (mkdocs.yml `hooks:`): the reference pages generated from the code, and section contents.

- on_files adds docs/reference/{cli,job-spec,config,errors}.md, rendered from the Click commands, the job
  spec's JSON schema, the config file's validator and the source's error classes: they are never written by
  hand nor committed, so they cannot drift from the code.
- on_page_markdown replaces the marker `<!-- section-pages -->` on a section's index page with a list of the
  other pages in its folder, and `<!-- pages: GLOB -->` with links to the pages of the folder whose names
  match GLOB (`<!-- pages: aws-*.md -->`), so a page another contributor adds under docs/<section>/ is linked
  (and in the nav, through awesome-nav's folder walk) without anyone editing mkdocs.yml or the linking page,
  and a page not written yet is no broken link.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_reference
import config_reference
import error_reference
import spec_reference

GENERATED: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_reference.render_cli_reference,
    "reference/job-spec.md": spec_reference.render_spec_reference,
    "reference/config.md": config_reference.render_config_reference,
    "reference/errors.md": error_reference.render_error_reference,
}
MARKER = re.compile(r"^<!-- (?:section-pages|pages: (?P<glob>[^>]+?)) -->$", re.MULTILINE)
HEADING = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for src_uri, render in GENERATED.items():
        existing = files.get_file_from_path(src_uri)
        if existing is not None:  # a hand-written copy would drift: the generated page wins
            files.remove(existing)
        files.append(File.generated(config, src_uri, content=render()))
    return files


def page_title(file: File) -> str:
    """A page's first `# ` heading, else its file name as words."""
    match = HEADING.search(file.content_string)
    if match:
        return match.group(1).replace("`", "")
    return PurePosixPath(file.src_uri).stem.replace("-", " ").capitalize()


def section_pages(page: Page, files: Files, glob: str | None = None) -> list[str]:
    """Markdown links to the other pages of `page`'s folder and to its subfolders' index pages (with `glob`:
    only the pages of the folder whose file names match it)."""
    folder = PurePosixPath(page.file.src_uri).parent
    links = []
    for file in sorted(files.documentation_pages(), key=lambda f: f.src_uri):
        path = PurePosixPath(file.src_uri)
        if file is page.file:
            continue
        if glob is not None:
            wanted = path.parent == folder and path.match(glob)
        else:
            wanted = path.parent == folder or (path.parent.parent == folder and path.name in ("index.md", "README.md"))
        if wanted:
            links.append(f"- [{page_title(file)}]({path.relative_to(folder)})")
    return links


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return MARKER.sub(lambda m: "\n".join(section_pages(page, files, m["glob"])) or "(none yet)", markdown)
