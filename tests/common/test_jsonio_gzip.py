"""gzip in opt.common.jsonio: ISA-L (``isal``, extra ``fast``) for large payloads, zlib
otherwise; both write standard gzip and every corrupt stream is one InputError."""

from __future__ import annotations

import gzip
import os

import pytest

from opt.common import jsonio
from opt.common.errors import InputError
from opt.common.jsonio import FAST_GZIP_BYTES, gunzip, gzip_bytes, read_json, write_json

CODECS = ("isal", "zlib")


@pytest.fixture(params=CODECS)
def codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with ISA-L (installed by the test extra) and without it."""
    if request.param == "isal":
        assert jsonio._isal() is not None, "the test extra installs isal"
    else:
        monkeypatch.setattr(jsonio, "_isal", lambda: None)
    return request.param


def _payload(size: int) -> bytes:
    """``size`` bytes of JSON-like text that compresses (not one repeated byte)."""
    row = b'{"task":%d,"device":%d,"start":%d,"end":%d},'
    out = bytearray(b"[")
    i = 0
    while len(out) < size:
        out += row % (i, i % 5, i * 37, i * 37 + 11)
        i += 1
    return bytes(out[:size])


def test_large_payload_is_standard_gzip(codec: str) -> None:
    data = _payload(FAST_GZIP_BYTES + 4096)
    packed = gzip_bytes(data)
    assert gzip.decompress(packed) == data
    assert gunzip(packed) == data


def test_small_payload_never_uses_isal(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("isal used for a small payload")

    monkeypatch.setattr(jsonio, "_isal", refuse)
    data = _payload(10_000)
    assert gzip.decompress(gzip_bytes(data)) == data


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_gzip_is_one_input_error(tmp_path: os.PathLike, codec: str,
                                          damage: str) -> None:
    path = tmp_path / "x.json.gz"  # type: ignore[operator]
    write_json({"rows": list(range(5000))}, path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        for i in range(20, min(60, len(raw) - 8)):
            raw[i] ^= 0x5A
    else:
        raw = bytearray(b"not a gzip stream at all")
    path.write_bytes(bytes(raw))
    with pytest.raises(InputError) as err:
        read_json(path)
    assert "cannot read" in str(err.value) and "x.json.gz" in str(err.value)
