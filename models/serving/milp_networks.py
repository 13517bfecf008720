"""The serving MILP's boundary transfers when crossings take different networks (problems.md
§3.1 "Network model": a crossing's network follows the GPU types of its two endpoints, OpWeave
App. B.3 Eq. 39), and their redistribution between different TP degrees
(:func:`add_reshard_terms`, :mod:`opt.serving.crossing`).

With one network :func:`models.serving.milp.add_transfer_constraints` marks each transfer by
(boundary i, sender m, sender's batch b). Here each mark also carries the GPU types of the two
endpoints (ga: sender, gb: receiver), whose network ``n = crossing_network[ga, gb]`` picks the
table row; with ``Z[m, g] = Σ_{j on type g} z[m, j]`` (owner m is on type g):

- ``e[i,m,b,ga,gb] ≥ Σ_{j: b_j=b, g_j=ga} x[i,m,j] − y[i+1,m] + Z[m+1,gb] − 1``: owner m (on
  ga, batch b) sends boundary i to owner m+1 (on gb);
- ``g[i,m,b,ga,gb] ≥ Σ_{j: b_j=b, g_j=gb} x[i+1,m,j] − y[i,m] + Z[m−1,ga] − 1``: owner m (on
  gb, batch b) receives it from m−1 (on ga), NIC-in at its own microbatch;
- ``h[b,ga,gb] ≥ Σ_{j: b_j=b, g_j=gb} x[0,0,j] − y[last,0] + Σ_m Σ_{j: g_j=ga} x[last,m,j] − 1``:
  the token ids reach owner 0 (on gb) from the LM-head owner (on ga);
- ``t[m,b,ga,gb] ≥ Σ_{j: b_j=b, g_j=ga} x[last,m,j] + Z[0,gb] − 1`` (m ≠ 0): owner m sends them.

Every mark is only lower-bounded and appears with non-negative coefficients in ``T ≥ …`` rows,
so at the optimum it is exactly the product of its binaries (as in the one-network model).
"""

from __future__ import annotations

from typing import Any

import pyomo.environ as pyo

from opt.serving.plan import boundary_occurrences


def _gpu_of_choice(co: Any) -> list[int]:
    names = list(co.inst.gpus)
    return [names.index(c.gpu) for c in co.cfg]


def add_transfer_constraints_networks(md: pyo.ConcreteModel, co: Any, tr: Any) -> Any:
    """Fill ``tr`` (the per-owner transfer terms of :mod:`models.serving.milp`) for an
    instance with several networks; K ≥ 2."""
    inst, k, n, ts = co.inst, co.k, co.inst.n_ops, co.ts
    M, batch_vals, last = range(k), co.batch_vals, inst.last_op
    gj = _gpu_of_choice(co)
    G = range(len(inst.gpus))
    pairs = [(a, b) for a in G for b in G]
    cross = inst.crossing_network
    J = range(len(co.bat))
    j_bg = {(b, g): [j for j in co.j_of_b[b] if gj[j] == g] for b in batch_vals for g in G}

    def xbg(mod: pyo.ConcreteModel, i: int, mm: int, b: int, g: int) -> Any:
        return sum(mod.x[i, mm, j] for j in j_bg[b, g])

    def zg(mod: pyo.ConcreteModel, mm: int, g: int) -> Any:
        return sum(mod.z[mm, j] for j in J if gj[j] == g)

    occ = [boundary_occurrences(inst, i) for i in range(n)]
    bidx = [i for i in range(n) if occ[i] > 0]
    idx = [(i, mm, b, a, g) for i in bidx for mm in M for b in batch_vals for a, g in pairs
           if j_bg[b, a]]
    md.e = pyo.Var(idx, bounds=(0, 1))
    md.e_def = pyo.Constraint(idx, rule=lambda mod, i, mm, b, a, g:
                              mod.e[i, mm, b, a, g] >= xbg(mod, i, mm, b, a)
                              - mod.y[(i + 1) % n, mm] + zg(mod, (mm + 1) % k, g) - 1)
    gidx = [(i, mm, b, a, g) for i in bidx for mm in M for b in batch_vals for a, g in pairs
            if j_bg[b, g]]
    md.g = pyo.Var(gidx, bounds=(0, 1))
    md.g_def = pyo.Constraint(gidx, rule=lambda mod, i, mm, b, a, g:
                              mod.g[i, mm, b, a, g] >= xbg(mod, (i + 1) % n, mm, b, g)
                              - mod.y[i, mm] + zg(mod, (mm - 1) % k, a) - 1)
    hidx = [(b, a, g) for b in batch_vals for a, g in pairs if j_bg[b, g]]
    md.h = pyo.Var(hidx, bounds=(0, 1))
    md.h_def = pyo.Constraint(hidx, rule=lambda mod, b, a, g:
                              mod.h[b, a, g] >= xbg(mod, 0, 0, b, g) - mod.y[last, 0]
                              + sum(mod.x[last, mm, j] for mm in M for j in J if gj[j] == a)
                              - 1)
    tidx = [(mm, b, a, g) for mm in M if mm != 0 for b in batch_vals for a, g in pairs
            if j_bg[b, a]]
    md.t = pyo.Var(tidx, bounds=(0, 1))
    md.t_def = pyo.Constraint(tidx, rule=lambda mod, mm, b, a, g:
                              mod.t[mm, b, a, g] >= xbg(mod, last, mm, b, a) + zg(mod, 0, g) - 1)
    for i, mm, b, a, g in gidx:
        nn, mb = int(cross[a, g]), co.mb_of_b[b]
        tr.nic_in[mm] = tr.nic_in[mm] + ts * occ[i] * int(inst.transfer_busy[nn, mb, i]) \
            * md.g[i, mm, b, a, g]
    for b, a, g in hidx:
        nn = int(cross[a, g])
        tr.nic_in[0] = tr.nic_in[0] + ts * int(inst.token_transfer_busy[nn, co.mb_of_b[b]]) \
            * md.h[b, a, g]
    for i, mm, b, a, g in idx:
        nn, mb = int(cross[a, g]), co.mb_of_b[b]
        tr.send[mm] = tr.send[mm] + ts * occ[i] * int(inst.transfer_duration[nn, mb, i]) \
            * md.e[i, mm, b, a, g]
        tr.out_by_b[mm, b] = tr.out_by_b[mm, b] + ts * occ[i] \
            * int(inst.transfer_busy[nn, mb, i]) * md.e[i, mm, b, a, g]
    for mm, b, a, g in tidx:
        nn, mb = int(cross[a, g]), co.mb_of_b[b]
        tr.send[mm] = tr.send[mm] + ts * int(inst.token_transfer_duration[nn, mb]) \
            * md.t[mm, b, a, g]
        tr.out_by_b[mm, b] = tr.out_by_b[mm, b] + ts * int(inst.token_transfer_busy[nn, mb]) \
            * md.t[mm, b, a, g]
    return tr


def add_reshard_terms(md: pyo.ConcreteModel, co: Any, tr: Any) -> Any:
    """Add the crossings' redistribution (:mod:`opt.serving.crossing`) to ``tr`` (K ≥ 2): a
    crossing between owners of different TP degrees costs the sender its all-gather
    ``reshard_out[c, b̂, i]`` (on the path and its NIC-out) and the receiver its scatter
    ``reshard_in[c, b̂, i]`` (its NIC-in). With ``Q[m, t] = Σ_{j: tp_j = t} z[m, j]`` (owner m
    has TP degree t):

    - ``ro[i,m,j] ≥ x[i,m,j] − y[i+1,m] − Q[m+1, tp_j]``: owner m on choice j sends boundary i
      to an owner of another TP degree;
    - ``ri[i,m,j] ≥ x[i+1,m,j] − y[i,m] − Q[m−1, tp_j]``: owner m on choice j receives it from
      one.

    Both only lower-bounded with non-negative coefficients in ``T ≥ …`` rows (as the transfer
    marks), created only where the table is non-zero."""
    inst, k, n, ts = co.inst, co.k, co.inst.n_ops, co.ts
    if k < 2 or not inst.has_reshard:
        return tr
    J = range(len(co.bat))
    cfg_idx = [inst.config_index(c.id) for c in co.cfg]
    mb = [co.mb_of_b[b] for b in co.bat]
    tp = [c.tp for c in co.cfg]
    occ = [boundary_occurrences(inst, i) for i in range(n)]

    def q(mod: pyo.ConcreteModel, mm: int, t: int) -> Any:
        return sum(mod.z[mm % k, jj] for jj in J if tp[jj] == t)

    out = {(i, mm, j): occ[i] * int(inst.reshard_out[cfg_idx[j], mb[j], i])
           for i in range(n) for mm in range(k) for j in J}
    inn = {(i, mm, j): occ[i] * int(inst.reshard_in[cfg_idx[j], mb[j], i])
           for i in range(n) for mm in range(k) for j in J}
    ro_idx = [key for key, v in out.items() if v > 0]
    ri_idx = [key for key, v in inn.items() if v > 0]
    md.ro = pyo.Var(ro_idx, bounds=(0, 1))
    md.ro_def = pyo.Constraint(ro_idx, rule=lambda mod, i, mm, j:
                               mod.ro[i, mm, j] >= mod.x[i, mm, j] - mod.y[(i + 1) % n, mm]
                               - q(mod, mm + 1, tp[j]))
    md.ri = pyo.Var(ri_idx, bounds=(0, 1))
    md.ri_def = pyo.Constraint(ri_idx, rule=lambda mod, i, mm, j:
                               mod.ri[i, mm, j] >= mod.x[(i + 1) % n, mm, j] - mod.y[i, mm]
                               - q(mod, mm - 1, tp[j]))
    for i, mm, j in ro_idx:
        term = ts * out[i, mm, j] * md.ro[i, mm, j]
        tr.send[mm] = tr.send[mm] + term
        tr.out_by_b[mm, co.bat[j]] = tr.out_by_b[mm, co.bat[j]] + term
    for i, mm, j in ri_idx:
        tr.nic_in[mm] = tr.nic_in[mm] + ts * inn[i, mm, j] * md.ri[i, mm, j]
    return tr
