"""Reading the package's bundled files: a JSON (or gzip-compressed ``.json.gz``) resource
through the package's loader (:func:`pkgutil.get_data`, so it works from an installed wheel),
every error one :class:`~opt.common.errors.InputError` naming the file."""

from __future__ import annotations

import gzip
import json
import pkgutil
from typing import Any

from opt.common.errors import InputError


def read_json(relpath: str, missing: str = "file not found") -> Any:
    """Parse the resource ``relpath`` of the ``instances`` package; ``missing``: the message
    when it does not exist."""
    source = f"instances/{relpath}"
    try:
        data = pkgutil.get_data("instances", relpath)
        if data is None:  # a loader that cannot read files (none of Python's own)
            raise OSError("the package's loader reads no files")
        if relpath.endswith(".gz"):
            data = gzip.decompress(data)
        return json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(missing, source=source) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                         source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
