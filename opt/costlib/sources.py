"""The files a build reads its hardware and models from (:class:`Sources`): a hardware catalog
merged over the bundled one and a model-card file added to the bundled cards (None: the
bundled ones alone)."""

from __future__ import annotations

from dataclasses import dataclass

from opt.common.errors import InputError
from opt.costlib.hardware import Catalog, load_catalog
from opt.costlib.modelcard import CardSet, load_cards


def check_path(value: object, field: str) -> None:
    """InputError naming ``field`` unless ``value`` is None or a path as text."""
    if value is not None and not isinstance(value, str):
        raise InputError(f"must be a path (a string) or None, got {value!r}", field=field)


@dataclass(frozen=True)
class Sources:
    """``catalog``: a hardware catalog file (JSON) merged over the bundled catalog;
    ``models_file``: model cards (a card set, one card or a Hugging Face ``config.json``)
    added to the bundled cards. None: the bundled data alone."""

    catalog: str | None = None
    models_file: str | None = None

    def __post_init__(self) -> None:
        check_path(self.catalog, "catalog")
        check_path(self.models_file, "models_file")

    def load(self) -> tuple[Catalog, CardSet]:
        """The catalog, then the model cards (each file's own InputError when it is bad)."""
        return load_catalog(self.catalog), load_cards(self.models_file)
