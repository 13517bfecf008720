"""The viewer page: one self-contained HTML file (no CDN, no server, works from file://).

The page template, stylesheet and scripts are package data (``opt/app/viewer/static``, read with
:mod:`importlib.resources`) inlined into the file with the payload: the header as a JSON script
element, the blob as base64 text (:mod:`opt.app.viewer.payload`). No third-party JS library is
bundled: the lanes and the utilisation chart are hand-written canvas renderers, the DAG is SVG.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from opt.app.viewer.payload import Blob, encode

#: Scripts in load order (each an IIFE on the shared ``window.HV`` namespace).
SCRIPTS = ("data.js", "timeline.js", "chart.js", "dag.js", "placement.js", "app.js")


def _static(name: str) -> str:
    return resources.files("opt.app.viewer").joinpath("static", name).read_text(encoding="utf-8")


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_page(header: dict[str, Any], blob: Blob, *, compress: bool = True) -> str:
    """The page's HTML text for a payload."""
    head_json, b64 = encode(header, blob, compress=compress)
    js = "\n".join(_static(n) for n in SCRIPTS)
    if "</script" in js.lower():
        raise ValueError("a viewer script contains '</script'")
    parts = {"__TITLE__": _escape_html(str(header.get("title", "hetopt view"))),
             "__CSS__": _static("viewer.css"),
             "__HEADER__": head_json.replace("</", "<\\/"),
             "__BLOB__": b64, "__JS__": js}
    page = _static("template.html")
    for key in ("__TITLE__", "__CSS__", "__HEADER__"):
        page = page.replace(key, parts[key])
    # the blob and the scripts last: their text is never scanned for placeholders
    before, after = page.split("__BLOB__", 1)
    mid, end = after.split("__JS__", 1)
    return "".join([before, b64, mid, js, end])


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
        from opt.app.viewer.serving import serving_payload

        header, blob = serving_payload(inst, solution, title=title, **kwargs)
    else:
        from opt.app.viewer.placement import placement_payload

        header, blob = placement_payload(inst, solution, title=title, **kwargs)
    return write_page(header, blob, path, compress=compress)
