"""A serving workload refuses out-of-range values with one InputError naming the field, even
for integers too large for a float."""

from __future__ import annotations

import pytest

from opt.common.errors import InputError
from opt.serving.builder import MAX_CONTEXT_TOKENS, ServingWorkload


@pytest.mark.parametrize("context,slo,field", [
    (1, 10 ** 400, "slo"), (1, -(10 ** 400), "slo"), (1, float("nan"), "slo"),
    (MAX_CONTEXT_TOKENS + 1, 0.05, "context"), (10 ** 30, 0.05, "context"), (0, 0.05, "context"),
])
def test_out_of_range_values_name_their_field(context, slo, field):
    with pytest.raises(InputError) as exc:
        ServingWorkload(context, slo)
    assert exc.value.field == field


def test_the_limits_themselves_are_accepted():
    w = ServingWorkload(MAX_CONTEXT_TOKENS, 86_400)
    assert w.context_tokens == MAX_CONTEXT_TOKENS
