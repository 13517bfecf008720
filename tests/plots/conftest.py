"""Helpers of the plot tests: read a figure or a written PNG back as pixels (Agg backend)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest


class Pixels:
    """Read figures and PNG files back as RGB pixels and measure them."""

    @staticmethod
    def rgb(source) -> np.ndarray:
        """The RGB pixels (H × W × 3, floats 0–1) of a PNG file, or of a Figure rendered to
        PNG (the figure is closed)."""
        import matplotlib.image as mimg
        import matplotlib.pyplot as plt

        if isinstance(source, (str, Path)):
            return mimg.imread(str(source))[..., :3]
        buf = io.BytesIO()
        source.savefig(buf, format="png", dpi=60)
        plt.close(source)
        buf.seek(0)
        return mimg.imread(buf)[..., :3]

    @staticmethod
    def drawn(rgb: np.ndarray) -> float:
        """Share of the pixels that are not the white background."""
        return float(np.any(rgb < 0.97, axis=2).mean())

    @staticmethod
    def count(rgb: np.ndarray, colour: str, tol: float = 0.03) -> int:
        """Pixels of ``colour`` (a matplotlib colour spec), within ``tol`` per channel."""
        from matplotlib.colors import to_rgb

        return int(np.all(np.abs(rgb - np.array(to_rgb(colour))) <= tol, axis=2).sum())


@pytest.fixture
def pix() -> Pixels:
    """The pixel helpers, with matplotlib on the Agg backend (skips without matplotlib)."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg", force=True)
    return Pixels()
