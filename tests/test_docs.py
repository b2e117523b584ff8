"""The documentation stays true to the code: ``docs/CLI.md``'s option index is the one ``--help``
shows; comments, docstrings and the docs carry no issue numbers; no tracked file names a
directory of the machine it was written on.

``python -m tests.test_docs`` rewrites the option index of ``docs/CLI.md`` from ``--help``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import tokenize
from pathlib import Path

import click
import pytest

from lomtree_cli.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLI_DOC = ROOT / "docs" / "CLI.md"
BEGIN, END = "<!-- generated: begin -->\n", "<!-- generated: end -->\n"

#: an issue reference: "issue 21", "issues #2, #3", "#23" (not "#:" comments, hex colours or "&#10;")
ISSUE = re.compile(r"\bissues?\s*#?\d+|(?<![\w&#/])#\d+\b", re.IGNORECASE)
#: directories of one machine; spelled in two parts so that this file does not match itself
MACHINE = re.compile("/" + "(?:work|home|Users|root)/|/" + "tmp/")


class _Recorder(click.HelpFormatter):
    """A help formatter that keeps each section's option spellings instead of formatting them."""

    def __init__(self):
        super().__init__()
        self.sections: list = []
        self._title = "Options"

    @contextlib.contextmanager
    def section(self, name):
        self._title = name
        yield
        self._title = "Options"

    def write_dl(self, rows, *args, **kwargs):
        # the spellings, without click's type names (choices and metavars stay)
        self.sections.append((self._title, [re.sub(r" (INTEGER|FLOAT)( RANGE)?$| (TEXT|FILE)$", "", r[0])
                                            for r in rows]))


def _sections(cmd: click.Command, name: str) -> list:
    rec = _Recorder()
    cmd.format_options(click.Context(cmd, info_name=name, **(cmd.context_settings or {})), rec)
    return [(t, names) for t, names in rec.sections if t != "Commands"]


def option_index() -> str:
    """The option index of ``docs/CLI.md``: per command and help section, the spellings ``-h`` lists."""
    out = []
    commands = [("lomtree", main)] + [(f"lomtree {n}", c) for n, c in sorted(main.commands.items(),
                                                                             key=lambda x: ("train", "predict",
                                                                                            "inspect").index(x[0]))]
    for name, cmd in commands:
        sections = _sections(cmd, name)
        spell = lambda names: ", ".join(f"`{n}`" for n in names)  # noqa: E731
        if len(sections) == 1:
            out.append(f"**`{name}`**: {spell(sections[0][1])}\n\n")
            continue
        out.append(f"**`{name}`**\n" + "".join(f"- {t}: {spell(names)}\n" for t, names in sections) + "\n")
    return "".join(out).rstrip("\n") + "\n"


def _doc_parts() -> tuple[str, str, str]:
    text = CLI_DOC.read_text()
    head, rest = text.split(BEGIN)
    body, tail = rest.split(END)
    return head, body, tail


def test_cli_reference_lists_what_help_shows():
    """Every option spelling of ``lomtree [train|predict|inspect] -h``, in its help section, and
    nothing else: an option added, renamed or moved without the reference fails here."""
    assert _doc_parts()[1] == option_index(), "docs/CLI.md is stale: run python -m tests.test_docs"
    index = option_index()
    for needed in ("--reduction [oaa|lomtree|filter|rtree|cpt|table|plt|regression|binary|mtree]", "[Reduction] PLT Options",
                   "--daemon", "--gini-c"):
        assert needed in index


def test_option_index_follows_the_help():
    """The generator reads what click prints: every spelling of the index is in its command's
    ``--help`` text, and every option line of that text is in the index."""
    from click.testing import CliRunner

    blocks = option_index().split("**`lomtree")
    for block in blocks[1:]:
        name = block.split("`**")[0].strip()
        text = CliRunner().invoke(main, [name, "--help"] if name else ["--help"], terminal_width=100).output
        for entry in re.findall(r"`([-\[][^`]*)`", block):
            for flag in entry.split(", "):
                assert flag.split(" ")[0] in text, (name, flag)
        for line in text.splitlines():
            m = re.match(r"^  (-[-\w]+)", line)
            if m:
                assert f"`{m.group(1)}" in block or f", {m.group(1)}" in block, (name, m.group(1))


def test_markdown_links_resolve():
    """Every relative link of the README, docs/ and bench/notes/ names a file of the repository."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "bench/notes").glob("*.md"))]
    links = [(page, t) for page in pages for t in re.findall(r"\]\(([^)#\s]+)", page.read_text()) if "://" not in t]
    broken = [f"{page.relative_to(ROOT)}: {t}" for page, t in links if not (page.parent / t).exists()]
    assert len(links) > 20 and broken == []


def _python_text(path: Path):
    """(line, text) of every comment and string token of a Python file."""
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                yield tok.start[0], tok.string


def _issue_references() -> list:
    found = []
    for d in ("lomtree_cli", "tests", "data_scripts"):
        for path in sorted((ROOT / d).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # its examples of what the pattern catches
            for line, text in _python_text(path):
                if ISSUE.search(text):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {ISSUE.search(text).group(0)}")
    for path in [ROOT / "Makefile", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if ISSUE.search(line) and (path.suffix == ".md" or line.lstrip().startswith("#")):
                found.append(f"{path.relative_to(ROOT)}:{i}: {ISSUE.search(line).group(0)}")
    return found


def test_no_issue_numbers_in_comments_and_docs():
    """Comments say why, not which issue asked: the issue tracker is not part of the repository."""
    assert _issue_references() == []


def test_issue_pattern_catches_references_and_nothing_else():
    for bad in ("(issue #23)", "Issue 21 asked", "issues #2, #3", "see #8", "issue23"):
        assert ISSUE.search(bad), bad
    for fine in ("#: a comment", "'#' starts a comment", "f'{x:#x}'", "&#10;", "tissue 3", "colour #ff00ff"):
        assert not ISSUE.search(fine), fine


def _tracked_files() -> list:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is None or out.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / p for p in out.stdout.decode().split("\0") if p]


def test_no_machine_paths_in_tracked_files():
    """No tracked file names a directory of one machine (a checkout, a home, a temporary file):
    scripts take paths from arguments, ``bench/data`` or ``tempfile``; recorded commands are
    relative to the repository."""
    found = []
    for path in _tracked_files():
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (images)
        for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert found == []


def test_machine_pattern_catches_paths_and_not_tmp_path():
    for bad in ("/" + "work/main/.venv", "/" + "tmp/lt/sector.train", "/" + "home/me/x"):
        assert MACHINE.search(bad), bad
    for fine in ("tmp_path / 'm.lt'", "tempfile.gettempdir()", "bench/data/x", "$TMPDIR/lt", "/dev/null"):
        assert not MACHINE.search(fine), fine


if __name__ == "__main__":
    head, _, tail = _doc_parts()
    CLI_DOC.write_text(head + BEGIN + option_index() + END + tail)
    print(f"rewrote the option index of {CLI_DOC}")
