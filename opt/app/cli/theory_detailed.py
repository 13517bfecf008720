"""``theory verify --detailed`` (:mod:`opt.app.cli.theory`): OpWeave's claims re-checked with
the detailed cost model on P3 serving plans. A module of its own, loaded through
:class:`opt.app.cli.parser.Handler` when the option is given: the plain ``theory`` commands
load neither the P3 solvers nor scipy."""

from __future__ import annotations

import argparse

from opt.app.cli.helpers import print_json
from opt.app.cli.sources import cards, catalog
from opt.app.reproduction.detailed_gains import DETAILED_CLAIMS, verify_detailed, worst_rows
from opt.common.report import table


def cmd_verify_detailed(args: argparse.Namespace) -> int:
    """``theory verify --detailed``: the claims re-checked on P3 plans."""
    res = verify_detailed(catalog=catalog(args), cards=cards(args), models=args.models,
                          gpus=args.gpu_types, contexts=args.contexts, slo_s=args.slo_ms / 1e3,
                          out=args.out, resume=not args.fresh, progress=not args.json)
    if args.json:
        print_json({"claims": [{**c.to_dict(), "statement": DETAILED_CLAIMS[c.claim]}
                               for c in res["claims"]], "hom": res["hom"], "het": res["het"]})
    else:
        print(table(["claim", "samples", "hold", "fail", "worst margin", "statement"],
                    [[c.claim, c.samples, c.passed, c.failed, c.worst_margin,
                      DETAILED_CLAIMS[c.claim]] for c in res["claims"]], digits=3))
        print("\nworst G_hom against M/(M - M_w) of the colocated group:")
        print(table(["model", "GPU", "context", "tp", "G_hom", "closed form", "limit"],
                    [[r["model"], r["gpu"], r["context"], r["tp"], r["g_hom"],
                      r["closed_g_hom"], r["limit"]]
                     for r in worst_rows(res["hom"], "g_hom", "limit")], digits=4))
        print("\nlargest G_het against (1 + sqrt(eta))/2:")
        print(table(["model", "GPUs", "context", "G_het", "bound"],
                    [[r["model"], r["gpus"], r["context"], r["g_het"], r["bound"]]
                     for r in worst_rows(res["het"], "g_het", "bound")], digits=4))
        print(f"\nresults cached in {args.out}/ (rerun resumes; --fresh recomputes); "
              f"D3.1a/D3.2a failing would be a bug, the other claims are idealisations "
              f"checked against the detailed model (docs/bounds.md)")
    return 0 if res["structural_ok"] else 1
