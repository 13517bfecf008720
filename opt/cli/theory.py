"""``hetopt theory het|hom|verify|plot``: OpWeave's closed forms (Theorems 3.1/3.2, CAD)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from opt.cli.common import cards, catalog, print_json
from opt.common.errors import InputError
from opt.common.extras import require
from opt.common.report import table


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``theory`` group and its four commands."""
    t = sub.add_parser("theory", help="OpWeave's closed forms (Theorems 3.1/3.2): het, hom, "
                                      "verify, plot")
    tsub = t.add_subparsers(dest="what", required=True)
    _add_het_parser(tsub, common)
    _add_hom_parser(tsub, common)
    _add_verify_parser(tsub, common)
    _add_plot_parser(tsub, common)


def _add_het_parser(tsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    h = tsub.add_parser("het", parents=[common], help="two GPU types: eta, bound, crossing/peak")
    h.add_argument("--gpu1", required=True)
    h.add_argument("--gpu2", required=True)
    h.add_argument("--price1", type=float, help="$ per GPU-hour of gpu1 (default: catalog)")
    h.add_argument("--price2", type=float, help="$ per GPU-hour of gpu2 (default: catalog)")
    h.add_argument("--model")
    h.add_argument("--context", type=float, help="mean context length s, tokens")
    h.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    h.set_defaults(func=cmd_het)


def _add_hom_parser(tsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    o = tsub.add_parser("hom", parents=[common], help="one GPU type: colocated vs disaggregated")
    o.add_argument("--gpu", required=True)
    o.add_argument("--gpus", type=int, help="GPUs per group (default: fewest that hold weights)")
    o.add_argument("--price", type=float, help="$ per GPU-hour (default: catalog)")
    o.add_argument("--model", required=True)
    o.add_argument("--context", type=float, required=True, help="mean context length s, tokens")
    o.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    o.set_defaults(func=cmd_hom)


def _add_verify_parser(tsub: argparse._SubParsersAction,
                       common: argparse.ArgumentParser) -> None:
    s = tsub.add_parser("verify", parents=[common],
                        help="check Theorems 3.1/3.2 and CAD numerically (exit 1 if any fails)")
    s.add_argument("--samples", type=int, default=2000,
                   help="random GPU types / pairs (default %(default)s)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--detailed", action="store_true",
                   help="re-check the claims with the detailed cost model (P3 plans)")
    s.add_argument("--models", nargs="+", metavar="M", help="--detailed: models (default all)")
    s.add_argument("--gpus", nargs="+", default=["H100", "A100", "L40S"], metavar="GPU",
                   help="--detailed: GPU types; pairs of them for G_het")
    s.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384, 65536, 262144],
                   metavar="S", help="--detailed: contexts in tokens")
    s.add_argument("--slo-ms", type=float, default=10000.0,
                   help="--detailed: TPOT SLO (default loose: the theorems have none)")
    s.add_argument("--out", default="results/verify-detailed",
                   help="--detailed: results folder (resumable)")
    s.add_argument("--fresh", action="store_true", help="--detailed: recompute cached results")
    s.set_defaults(func=cmd_verify)


def _add_plot_parser(tsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = tsub.add_parser("plot", parents=[common],
                        help="plot G_hom, G_het and CAD feasibility (PNG; needs hetopt[plot])")
    s.add_argument("--out", required=True, metavar="DIR", help="directory for the three PNGs")
    s.add_argument("--gpu1", default="H100", help="GPU of the G_hom plot and first G_het type")
    s.add_argument("--gpu2", default="H20", help="second G_het type (default %(default)s)")
    s.add_argument("--price1", type=float, help="$ per GPU-hour of gpu1 (default: catalog)")
    s.add_argument("--price2", type=float,
                   help="$ per GPU-hour of gpu2 (default: catalog, else the tight price "
                        "c1/c2 = sqrt(b1 F1/(b2 F2)))")
    s.add_argument("--model", default="qwen3-235b-a22b", help="model of the G_het plot")
    s.set_defaults(func=cmd_plot)


def _print_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.json:
        print_json(report)
    else:
        print(table(["quantity", "value"], [[k, v] for k, v in report.items()], digits=5))


def cmd_het(args: argparse.Namespace) -> int:
    """``theory het``: eta and the gain bound of two GPU types; with a model, the gain at a
    context and its peak."""
    from opt.theory.gains import GpuGroup, het_report

    cat = catalog(args)
    card = cards(args)[args.model] if args.model else None
    if args.context is not None and card is None:
        raise InputError("--context needs --model", source="<argument>", field="context")
    g1 = GpuGroup(cat.device(args.gpu1), price_usd_per_hour=args.price1)
    g2 = GpuGroup(cat.device(args.gpu2), price_usd_per_hour=args.price2)
    if card is None:  # eta and the bound need no prices
        g1 = GpuGroup(g1.device, price_usd_per_hour=args.price1 or g1.device.price_usd_per_hour or 1.0)
        g2 = GpuGroup(g2.device, price_usd_per_hour=args.price2 or g2.device.price_usd_per_hour or 1.0)
        report = het_report(g1, g2)
        report = {k: report[k] for k in ("gpu1", "gpu2", "eta", "bound")}
    else:
        report = het_report(g1, g2, card, args.context, args.kv_dtype)
    _print_report(args, report)
    return 0


def cmd_hom(args: argparse.Namespace) -> int:
    """``theory hom``: colocated vs disaggregated serving on one GPU type."""
    from opt.theory.gains import GpuGroup, hom_report, min_gpus

    cat = catalog(args)
    card = cards(args)[args.model]
    dev = cat.device(args.gpu)
    gpus = args.gpus or min_gpus(dev, card)
    _print_report(args, hom_report(GpuGroup(dev, gpus, args.price), card, args.context,
                                   args.kv_dtype))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``theory verify``: the claims checked numerically (exit 1 if any fails)."""
    from opt.theory.verify import (
        CLAIMS,
        cad_feasibility,
        cad_feasibility_summary,
        verify_closed_forms,
    )

    if args.detailed:
        return _verify_detailed(args)
    results = verify_closed_forms(samples=args.samples, seed=args.seed)
    cad = cad_feasibility()
    if args.json:
        print_json({"samples": args.samples, "seed": args.seed,
                    "claims": [r.to_dict() for r in results], "cad_feasibility": cad})
    else:
        print(table(["claim", "samples", "pass", "fail", "worst margin", "statement"],
                    [[r.claim, r.samples, r.passed, r.failed, r.worst_margin,
                      CLAIMS.get(r.claim, "")] for r in results], digits=3))
        print()
        print("CAD feasible (ordered catalog GPU pairs, groups sized to hold the weights):")
        print(table(["model", "pairs", "mu=1", "mu=2", "mu=4"],
                    [[s["model"], s["pairs"], s["feasible_mu1"], s["feasible_mu2"],
                      s["feasible_mu4"]] for s in cad_feasibility_summary(cad)]))
        failed = [r.claim for r in results if r.failed]
        print(f"\n{'FAILED: ' + ', '.join(failed) if failed else 'all claims hold'}")
    return 1 if any(r.failed for r in results) else 0


def _verify_detailed(args: argparse.Namespace) -> int:
    """``theory verify --detailed``: the claims re-checked on P3 plans (solvers, lazily)."""
    from solvers.serving.detailed_gains import DETAILED_CLAIMS, verify_detailed, worst_rows

    res = verify_detailed(catalog=catalog(args), cards=cards(args), models=args.models,
                          gpus=args.gpus, contexts=args.contexts, slo_s=args.slo_ms / 1e3,
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


def cmd_plot(args: argparse.Namespace) -> int:
    """``theory plot``: G_hom, G_het and CAD feasibility as three PNGs."""
    require("plot", "theory plot")
    from opt.plots.common import plot_cad_regions, plot_het_gain, plot_hom_gain

    cat, crds = catalog(args), cards(args)
    out = Path(args.out)
    results = {
        "hom_gain": plot_hom_gain(out / "hom_gain.png", gpu=args.gpu1, catalog=cat, cards=crds),
        "het_gain": plot_het_gain(out / "het_gain.png", gpu1=args.gpu1, gpu2=args.gpu2,
                                  model=args.model, price2=args.price2, price1=args.price1,
                                  catalog=cat, cards=crds),
        "cad_regions": plot_cad_regions(out / "cad_regions.png", catalog=cat, cards=crds),
    }
    if args.json:
        print_json(results)
    else:
        for r in results.values():
            print(r["path"])
    return 0
