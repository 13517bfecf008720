"""The README and the docs as a user meets them: the README's short tour runs as written, its
Python example runs, the options of every documented command exist, every relative link
resolves (anchors to a heading of the target), and nothing cites a path outside the
repository.

The tour runs in a temporary folder that looks like a fresh checkout (a symlink per top-level
entry of the repository, so relative paths such as ``instances/data/...`` resolve and every
file the tour writes lands in the temporary folder), with ``hetopt`` and ``python`` on the
``PATH`` as this interpreter. The "Longer runs" are not run; their options are checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: seconds per tour command: the README promises "within a minute on 2 cores"; a shared,
#: loaded machine gets five times that
TOUR_BUDGET_S = 300.0
#: the time limit of the tour's solves in the default run: each still runs its method and
#: writes its files; the ``slow`` twin runs the README's own limits (10 s each)
QUICK_TIME_LIMIT_S = 4
#: what no tracked file may cite: folders beside or above the repository
OUTSIDE = re.compile(r"\.\./shared/|/work/|reference-data\.md|reference-cases")

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def section(text: str, heading: str) -> str:
    """The body of the markdown section ``heading`` (up to the next heading of any level)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and not _in_fence(lines, i)), len(lines))
    return "".join(lines[start + 1:end])


def _in_fence(lines: list[str], i: int) -> bool:
    return sum(line.startswith("```") for line in lines[:i]) % 2 == 1


def shell_commands(text: str) -> list[str]:
    """The commands of every ```sh block of ``text``: continuation lines joined, comment-only
    lines dropped (a command keeps its trailing comment; the shell ignores it)."""
    out = []
    for lang, body in _FENCE.findall(text):
        if lang != "sh":
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        out += [line for line in joined.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    return out


def python_blocks(text: str) -> list[str]:
    return [body for lang, body in _FENCE.findall(text) if lang == "python"]


def _words(command: str) -> list[str]:
    return shlex.split(command, comments=True)


# ---- the tour ------------------------------------------------------------------------------

TOUR = shell_commands(section(README.read_text(), "## A short tour"))
LONGER = shell_commands(section(README.read_text(), "### Longer runs"))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A temporary folder that reads like a fresh checkout, and the environment to run in it."""
    work = tmp_path_factory.mktemp("tour")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv", "results") and not entry.name.startswith("."):
            (work / entry.name).symlink_to(entry)
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, argv in (("hetopt", f'"{sys.executable}" -m opt'), ("python", f'"{sys.executable}"')):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return work, env


def test_tour_is_parsed():
    assert len(TOUR) >= 20 and all(c.startswith("hetopt ") for c in TOUR)
    assert LONGER and all(c.startswith(("hetopt ", "python benchmarks/")) for c in LONGER)


def quick(command: str, limit_s: int) -> str:
    """``command`` with its ``--time-limit`` lowered to ``limit_s`` (if it is higher)."""
    return re.sub(r"--time-limit (\d+)", lambda m: f"--time-limit {min(int(m[1]), limit_s)}",
                  command)


def test_quick_lowers_only_the_time_limit():
    assert quick("hetopt solve x --time-limit 10 -o r.json  # 10 s", 4) == \
        "hetopt solve x --time-limit 4 -o r.json  # 10 s"
    assert quick("hetopt solve x --time-limit 2", 4) == "hetopt solve x --time-limit 2"
    assert sum("--time-limit" in c for c in TOUR) >= 4


@pytest.mark.parametrize("limit_s", [pytest.param(QUICK_TIME_LIMIT_S, id="quick"),
                                     pytest.param(None, id="as-written",
                                                  marks=pytest.mark.slow)])
def test_short_tour_runs_as_written(checkout, limit_s):
    """Each command in order (later ones read what earlier ones wrote): exit 0 within the
    budget, and every ``-o``/``--out``/``--export`` file it names exists afterwards. The
    default run lowers the solves' time limits to :data:`QUICK_TIME_LIMIT_S`; the ``slow``
    twin runs every command exactly as written."""
    work, env = checkout
    for command in (TOUR if limit_s is None else [quick(c, limit_s) for c in TOUR]):
        try:
            proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, text=True,
                                  capture_output=True, timeout=TOUR_BUDGET_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"over {TOUR_BUDGET_S:.0f} s: {command}")
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        words = _words(command)
        for flag in ("-o", "--out", "--export"):
            if flag in words:
                target = work / words[words.index(flag) + 1]
                assert target.exists(), (command, target)


def test_readme_python_example_runs(tmp_path):
    """The README's Python example (needs the façade ``opt.api``)."""
    (example,) = python_blocks(section(README.read_text(), "## From Python"))
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, text=True,
                          capture_output=True, timeout=TOUR_BUDGET_S,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["OPTIMAL", "73", "73.0"]


# ---- every documented command's options exist ----------------------------------------------

def _help_target(words: list[str]) -> tuple[str, ...] | None:
    """The command whose ``--help`` lists the options of ``words``: ``hetopt`` and its
    subcommand words (positionals after them are harmless before ``--help``), or a benchmark
    script; None for anything else (``sh``, ``pip``, placeholders)."""
    if words[0] == "hetopt":
        head = []
        for w in words:
            if w.startswith("-"):
                break
            head.append(w)
        return tuple(head)
    if words[0] == "python" and len(words) > 1 and words[1].startswith("benchmarks/"):
        return ("python", words[1])
    return None


@cache
def _help_text(target: tuple[str, ...]) -> str:
    argv = ([sys.executable, "-m", "opt", *target[1:]] if target[0] == "hetopt"
            else [sys.executable, *target[1:]])
    proc = subprocess.run([*argv, "--help"], cwd=ROOT, text=True, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, (target, proc.stderr[-1000:])
    return proc.stdout


def _documented_commands() -> list[tuple[str, str]]:
    out = []
    for path in (README, *DOCS):
        for command in shell_commands(path.read_text()):
            try:
                words = _words(command)
            except ValueError:
                continue
            if words and _help_target(words) and "..." not in words:
                out.append((path.name, command))
    return out


@pytest.mark.parametrize("doc,command", _documented_commands(),
                         ids=[f"{d}:{c[:60]}" for d, c in _documented_commands()])
def test_documented_options_exist(doc, command):
    """Every ``--option`` of a documented ``hetopt`` or ``python benchmarks/…`` command is one
    its ``--help`` lists (a misspelt option exits 2 for the reader)."""
    words = _words(command)
    options = {w.split("=")[0] for w in words if w.startswith("--")}
    if not options:
        return  # nothing to check (and some scripts take positionals only, no --help)
    text = _help_text(_help_target(words))
    missing = sorted(o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])",
                                                          text))
    assert not missing, (doc, command, missing)


# ---- links and citations -------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lstrip("#").strip()).lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())
    return {_slug(line) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    text = _FENCE.sub("", doc.read_text())
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, (doc.name, broken)


def test_nothing_cites_a_path_outside_the_repository():
    """Sources are cited as paper, section, figure or table — never as a file beside the
    repository (``../shared/…``), which a reader of the repository does not have."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, text=True, capture_output=True,
                           check=True).stdout.split()
    hits = []
    for name in files:
        if not name.endswith((".md", ".py", ".json", ".toml", ".sh", ".txt", ".cfg")):
            continue
        path = ROOT / name
        if path.name == Path(__file__).name or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{name}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)
