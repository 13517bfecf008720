"""Static placement policies (DOPS Table 1, problems.md §6): the class of every task is read back from
the schedule's assignment and compared with the policy's definition, written out here again
independently of ``heuristics.placement.static_policies``."""

import json
import re

import numpy as np
import pytest

import instances
from heuristics.placement.list_scheduler import (
    DeviceClasses,
    heft,
    list_schedule,
    priority_order,
    upward_rank,
)
from heuristics.placement.static_policies import POLICIES, class_of_assignment, static_schedule
from opt.app.cli import main
from opt.common.errors import InputError, UnknownNameError
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.validator import validate_placement
from solvers import solve
from solvers.registry import names

ATTENTION = {"attn_norm", "q_proj", "k_proj", "v_proj", "o_proj", "kv_write", "qk", "softmax",
             "sv"}
CORE_ATTN = {"qk", "softmax", "sv", "kv_write"}
EXPERT = re.compile(r"expert\d+_(gate|up|act|down)")


def linear(kind):
    m = EXPERT.fullmatch(kind)
    return kind in {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                    "down_proj"} or (m is not None and m.group(1) != "act")


def ffn(kind):
    return kind in {"gate_proj", "up_proj", "act", "down_proj"} or bool(EXPERT.fullmatch(kind))


#: policy → is the task (kind, phase) meant for PIM?
ON_PIM = {
    "pd": lambda kind, phase: phase == 1,
    "af": lambda kind, phase: kind in ATTENTION,
    "pd+linear": lambda kind, phase: phase == 1 and linear(kind),
    "pd+attn": lambda kind, phase: phase == 1 and kind in CORE_ATTN,
    "pd+ffn": lambda kind, phase: phase == 1 and ffn(kind),
}


def _build(catalog, cards, model, platform="HP32", prefill=16, decode=2, tp=1):
    return build_placement(cards[model], catalog.platform(platform), catalog,
                           Workload(prefill, decode, 1), BuildOptions(layers=1, tp=tp))


@pytest.fixture(scope="module")
def llm_instances(catalog, cards):
    return {"llama": _build(catalog, cards, "llama-2-7b"),
            "mixtral": _build(catalog, cards, "mixtral-8x7b"),
            "llama-tp2": _build(catalog, cards, "llama-2-7b", tp=2)}


def test_registered_as_methods():
    assert set(POLICIES) == set(ON_PIM)
    assert set(POLICIES) <= set(names("placement"))


@pytest.mark.parametrize("policy", list(ON_PIM))
@pytest.mark.parametrize("name", ["llama", "mixtral", "llama-tp2"])
def test_policy_places_exactly_its_classes(llm_instances, name, policy):
    inst = llm_instances[name]
    res = solve(inst, policy)  # certified: the schedule is valid
    assert res.status == "FEASIBLE" and res.method == policy
    assert res.lower_bound <= res.objective
    sol = static_schedule(inst, policy)
    assert validate_placement(inst, sol).makespan == res.objective  # deterministic
    got = class_of_assignment(inst, sol)
    classes = np.array([d.device_class for d in inst.devices])
    on_pim = 0
    for t, (kind, phase) in enumerate(zip(inst.kind, inst.phase.tolist())):
        want = "pim" if ON_PIM[policy](kind, phase) else "npu"
        legal_classes = set(classes[inst.legal[t]])
        where = f"{inst.task_ids[t]} ({kind}, phase {phase}) under {policy}"
        if want in legal_classes:
            assert got[t] == want, where
        else:  # not legal on the policy's class: kv_write pinned, router/embed/... on NPU, host
            assert got[t] in legal_classes and got[t] != want, where
            if kind == "kv_write":
                assert got[t] == "pim"
            elif kind.startswith("allreduce"):
                assert got[t] == "cpu"
            else:
                assert want == "pim" and kind in {"router", "combine", "embed", "lm_head"}
        on_pim += got[t] == "pim"
    assert 0 < on_pim < inst.n_tasks


def test_pd_prefill_on_npu_decode_on_pim(llm_instances):
    inst = llm_instances["llama"]
    sol = static_schedule(inst, "pd")
    got = class_of_assignment(inst, sol)
    pim_legal = inst.legal[:, [d.device_class == "pim" for d in inst.devices]].any(axis=1)
    pre, dec = inst.is_prefill(), inst.is_decode()
    kv = np.array([k == "kv_write" for k in inst.kind])
    assert (got[pre & ~kv] == "npu").all()
    assert (got[dec & pim_legal] == "pim").all()
    assert (got[dec & ~pim_legal] == "npu").all()  # embed, lm_head
    assert sorted({k for k, p in zip(inst.kind, pim_legal) if not p}) == ["embed", "lm_head"]


@pytest.mark.parametrize("model,tp", [("llama-2-7b", 1), ("mixtral-8x7b", 1), ("llama-2-7b", 2)])
def test_no_pim_every_policy_is_heft_on_the_npu(catalog, cards, model, tp):
    inst = _build(catalog, cards, model, platform="HP0", tp=tp)
    npu = np.array([[dev.device_class == "npu" for dev in inst.devices]])
    ref = list_schedule(inst, priority_order(inst, upward_rank(inst)), insertion=True,
                        classes=DeviceClasses(np.zeros(inst.n_tasks, np.int64), npu, "npu"))
    for policy in POLICIES:
        sol = static_schedule(inst, policy)
        assert sol["assignment"] == ref["assignment"], policy
        assert validate_placement(inst, sol).makespan == validate_placement(inst, ref).makespan


HAND_WRITTEN = [n for n in instances.names("placement")  # no operator kinds to narrow on
                if instances.info(n).optimum is not None and not any(instances.load(n).kind or ())]


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_bundled_instances_policies_at_least_optimum(name):
    inst, opt = instances.load(name), instances.info(name).optimum
    ref = validate_placement(inst, heft(inst)).makespan
    for policy in POLICIES:
        res = solve(inst, policy)
        assert res.objective >= opt, policy
        assert res.objective == ref  # no kinds or phases: nothing to narrow, plain HEFT


def test_unknown_policy():
    inst = instances.load("heft-topcuoglu-2002")
    with pytest.raises(UnknownNameError, match="unknown static policy 'pdx'.*pd\\+ffn"):
        static_schedule(inst, "pdx")


def test_cli_solve_with_a_policy(capsys):
    assert main(["solve", "heft-topcuoglu-2002", "--method", "pd+attn", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "pd+attn" and out["status"] == "FEASIBLE"
    assert out["objective"] >= 73
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    helptext = capsys.readouterr().out
    for m in ("heft", "pd", "af", "pd+linear", "pd+attn", "pd+ffn"):
        assert m in helptext


def _with_capacity(inst, npu_cap, pim_cap=None):
    """``inst`` with the NPU's (and, when given, every PIM's) weight capacity in bytes."""
    import dataclasses

    devices = tuple(dataclasses.replace(
        d, weight_capacity=npu_cap if d.device_class == "npu" else
        (pim_cap if pim_cap is not None else d.weight_capacity)) for d in inst.devices)
    return dataclasses.replace(inst, devices=devices)


@pytest.mark.parametrize("load_timing", ["at_use", "prefetch"])
@pytest.mark.parametrize("policy", list(ON_PIM))
def test_a_full_npu_evicts_instead_of_leaving_the_class(catalog, cards, policy, load_timing):
    """LRU residency is the platform's rule (DOPS §6.1): with room on the NPU
    for only its two largest blocks, every policy still puts its NPU-class prefill tasks on the
    NPU (evicting), where before it spilled prefill GEMMs onto PIM."""
    base = build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(16, 2, 1), BuildOptions(layers=2, block_span=1,
                                                            load_timing=load_timing))
    big = np.sort(base.block_bytes)[-2:].sum()
    inst = _with_capacity(base, int(big))
    sol = static_schedule(inst, policy)
    met = validate_placement(inst, sol)
    assert met.evictions > 0
    got = class_of_assignment(inst, sol)
    npu_legal = inst.legal[:, [d.device_class == "npu" for d in inst.devices]].any(axis=1)
    pre = inst.is_prefill()
    for t in np.flatnonzero(pre & npu_legal):
        want = "pim" if ON_PIM[policy](inst.kind[t], 0) else "npu"
        if want == "npu":
            assert got[t] == "npu", inst.task_ids[t]


def test_a_block_larger_than_the_class_is_refused(catalog, cards):
    base = build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(16, 2, 1), BuildOptions(layers=1))
    inst = _with_capacity(base, int(base.block_bytes.max()) - 1)
    with pytest.raises(InputError, match=r"policy 'pd' cannot keep task .* in its device "
                                         r"class: block .* is larger than every such device"):
        static_schedule(inst, "pd")
