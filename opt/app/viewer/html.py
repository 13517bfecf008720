"""The viewer page: one self-contained HTML file (no CDN, no server, works from file://).

The page template, stylesheet and scripts are package data (``opt/app/viewer/static``, read with
:mod:`importlib.resources`) inlined into the file with the payload: the header as a JSON script
element, the blob as base64 text (:mod:`opt.app.viewer.payload`). No third-party JS library is
bundled: the lanes and the utilisation chart are hand-written canvas renderers, the DAG is SVG.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from importlib import resources
from pathlib import Path
from typing import Any

from opt.app.viewer.payload import Blob, encode
from opt.app.viewer.placement import placement_payload
from opt.app.viewer.serving import serving_payload

#: Scripts in load order (each an IIFE on the shared ``window.HV`` namespace).
SCRIPTS = ("data.js", "timeline.js", "chart.js", "dag.js", "placement.js", "app.js")


def _static(name: str) -> str:
    return resources.files("opt.app.viewer").joinpath("static", name).read_text(encoding="utf-8")


#: The page's Content-Security-Policy: nothing remote, no inline event handler,
#: no script but the page's own (``{script}``: the sha256 source of its one inline script);
#: styles inline; images, fetch and workers only from data:/blob: URLs (the payload decoder).
CSP = ("default-src 'none'; script-src {script}; style-src 'unsafe-inline'; "
       "img-src data: blob:; connect-src data: blob:; base-uri 'none'; form-action 'none'")

#: The template's placeholders, replaced in one pass (text put in is never scanned again)
PLACEHOLDER = re.compile(r"__(TITLE|CSP|CSS|HEADER|BLOB|JS)__")


def script_source(js: str) -> str:
    """The CSP source that admits exactly the inline script ``js``."""
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode()
    return f"'sha256-{digest}'"


def json_in_script(text: str) -> str:
    """JSON text safe inside a ``<script type="application/json">`` element: every ``<`` is
    ``\\u003c`` (no ``</script>``, no ``<!--``), the same JSON value."""
    return text.replace("<", "\\u003c")


def render_page(header: dict[str, Any], blob: Blob, *, compress: bool = True) -> str:
    """The page's HTML text for a payload. Every string from the files is text: the title is
    HTML-escaped, the header is JSON with ``<`` escaped, the blob is base64; the scripts put
    them in the page as text (``textContent``, canvas, or ``HV.esc`` before ``innerHTML``)."""
    head_json, b64 = encode(header, blob, compress=compress)
    js = "\n".join(_static(n) for n in SCRIPTS)
    if "</script" in js.lower():
        raise ValueError("a viewer script contains '</script'")
    parts = {"TITLE": html.escape(str(header.get("title", "hetopt view"))),
             "CSP": CSP.format(script=script_source(js)), "CSS": _static("viewer.css"),
             "HEADER": json_in_script(head_json), "BLOB": b64, "JS": js}
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], _static("template.html"))


def write_page(header: dict[str, Any], blob: Blob, path: str | Path, *,
               compress: bool = True) -> int:
    """Write the page to ``path``; returns its size in bytes."""
    text = render_page(header, blob, compress=compress)
    data = text.encode("utf-8")
    Path(path).write_bytes(data)
    return len(data)


def write_view(inst: Any, solution: dict[str, Any], path: str | Path, *,
               title: str | None = None, compress: bool = True, **kwargs: Any) -> int:
    """Write the view of a P1 schedule or a P3 plan (``inst.problem`` tells which); returns
    the file size. Validates the schedule (placement) / plan structure (serving) first."""
    if getattr(inst, "problem", "placement") == "serving":
        header, blob = serving_payload(inst, solution, title=title, **kwargs)
    else:
        header, blob = placement_payload(inst, solution, title=title, **kwargs)
    return write_page(header, blob, path, compress=compress)
