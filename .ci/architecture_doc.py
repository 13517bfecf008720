"""Regenerate the module tables of docs/architecture.md from the modules' docstrings.

The tables sit between ``<!-- modules:begin -->`` and ``<!-- modules:end -->``; everything else
in the file is hand-written. ``--check`` exits 1 when the file is out of date (run in CI).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"
PACKAGES = ("opt", "models", "heuristics", "solvers", "instances")
#: words after which a full stop does not end a sentence ("DOPS Fig. 7", "J. Scheduling",
#: "e.g. x"); a single capital letter (an initial) never ends one either
ABBREVIATIONS = frozenset({"Fig", "Figs", "Eq", "Eqs", "Sec", "Tab", "J", "Proc", "Trans",
                           "Vol", "No", "al", "e.g", "i.e", "cf", "vs", "approx", "resp"})
_STOP = re.compile(r"\.\s")


def first_sentence(para: str) -> str:
    """``para`` up to its first full stop that ends a sentence (abbreviations skipped)."""
    for m in _STOP.finditer(para):
        word = para[:m.start()].rsplit(" ", 1)[-1].lstrip("(\"'`")
        if word in ABBREVIATIONS or (len(word) == 1 and word.isupper()):
            continue
        return para[:m.start() + 1]
    return para


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line ('' when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    return first_sentence(para).replace("|", "\\|")


def tables() -> str:
    out: list[str] = []
    for pkg in PACKAGES:
        dirs = sorted({p.parent for p in (ROOT / pkg).rglob("*.py")})
        for d in dirs:
            rel = d.relative_to(ROOT).as_posix()
            init = d / "__init__.py"
            out.append(f"\n### `{rel}/`" + (f" — {summary(init)}" if init.exists() and
                                                summary(init) else ""))
            out.append("\n| module | holds |\n|---|---|")
            for p in sorted(d.glob("*.py")):
                if p.name == "__init__.py":
                    continue
                out.append(f"| `{p.relative_to(ROOT).as_posix()}` | {summary(p)} |")
    return "\n".join(out).lstrip("\n") + "\n"


def render(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{tables()}{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: markers {BEGIN} / {END} missing")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python .ci/architecture_doc.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
