"""``theory hom|het --context``: a mean context outside (0, 10 M tokens] is refused with one
line naming ``--context`` and the value, never turned into a cost per token."""

from __future__ import annotations

import math

import pytest

from opt.app.cli.parser import main
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.theory.gains import GpuGroup, het_report, hom_report

CARD = bundled_cards()["llama-2-7b"]
H100 = bundled_catalog().device("H100")
A100 = bundled_catalog().device("A100")


@pytest.mark.parametrize("context", [1e300, 1e12, 10_000_001, math.inf, -1.0, 0.0])
def test_a_context_outside_the_range_is_refused(context):
    with pytest.raises(InputError, match="mean context") as exc:
        hom_report(GpuGroup(H100, 1), CARD, context)
    assert exc.value.field == "--context"
    with pytest.raises(InputError, match="mean context"):
        het_report(GpuGroup(H100, 1), GpuGroup(A100, 1), CARD, context)


def test_the_longest_context_in_range_is_a_finite_cost():
    r = hom_report(GpuGroup(H100, 8), CARD, 10_000_000)
    assert math.isfinite(r["cpt_hom_usd_per_mtok"]) and r["cpt_hom_usd_per_mtok"] > 0


def test_theory_hom_context_1e12_is_one_line_exit_2(capsys):
    code = main(["theory", "hom", "--model", "llama-2-7b", "--gpu", "H100",
                 "--context", "1e12"])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--context" in err[0] and "1e+12" in err[0]
    assert "usd" not in captured.out.lower()
