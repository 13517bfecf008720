"""KV cache against memory (problems.md §1.4, 'KV against memory'): each KV home's weight capacity
is its memory minus its share of the cache at the end of the workload."""

from __future__ import annotations

import pytest

from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement


def _build(model: str, platform: str, workload: Workload, **opts):
    cat = bundled_catalog()
    return build_placement(bundled_cards()[model], cat.platform(platform), cat, workload,
                           BuildOptions(**opts))


def test_each_home_gives_up_its_share_of_the_final_cache():
    wl = Workload(1024, 1024, 16)
    inst = _build("llama-2-7b", "HP32", wl, layers=2)
    card = bundled_cards()["llama-2-7b"]
    memory = bundled_catalog().device("AiM").memory_bytes
    total = card.kv_bytes(2048) * 16 * 2 / card.layers  # fp16 KV, 2 of 32 layers
    reserved = inst.meta["kv_reserved_bytes"]
    assert set(reserved) == {"PIM0", "PIM1"}
    for dev in inst.devices:
        if dev.name in reserved:
            assert reserved[dev.name] == pytest.approx(total / 2, abs=1)  # 16 + 16 heads
            assert dev.weight_capacity == memory - reserved[dev.name]
        else:
            assert dev.weight_capacity == bundled_catalog().device("Ascend-910B").memory_bytes


def test_a_longer_context_leaves_less_room_for_weights():
    short = _build("llama-2-13b", "HP64", Workload(128, 8, 16), layers=4)
    long = _build("llama-2-13b", "HP64", Workload(2048, 8, 16), layers=4)
    cap = {d.name: d.weight_capacity for d in short.devices}
    assert all(d.weight_capacity < cap[d.name] for d in long.devices if d.device_class == "pim")


def test_kv_that_does_not_fit_its_home_is_rejected():
    with pytest.raises(InputError) as err:
        _build("llama-2-7b", "HP32", Workload(60000, 1, 16), layers=32)
    assert err.value.field == "workload" and "exceeds its memory" in str(err.value)


def test_kv_memory_off_is_the_former_model():
    """``kv_memory=False`` leaves every device its whole memory (and writes no reservation), so
    a layout whose one KV home cannot hold the cache still builds — for task counts."""
    wl = Workload(1024, 1024, 16)
    with pytest.raises(InputError):
        _build("llama-2-7b", "HP64", wl, layers=32, kv_layout="single")
    inst = _build("llama-2-7b", "HP64", Workload(16, 2, 16), layers=2, kv_memory=False)
    assert "kv_reserved_bytes" not in inst.meta
    memory = bundled_catalog().device("AiM").memory_bytes
    assert all(d.weight_capacity == memory for d in inst.devices if d.device_class == "pim")
