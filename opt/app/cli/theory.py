"""``hetopt theory het|hom|verify|plot``: OpWeave's closed forms (Theorems 3.1/3.2, CAD)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from opt.app.cli.helpers import print_json
from opt.app.cli.parser import Handler
from opt.app.cli.sources import cards, catalog
from opt.app.plots.common import plot_cad_regions, plot_het_gain, plot_hom_gain
from opt.common.errors import InputError
from opt.common.extras import require
from opt.common.report import table
from opt.theory import verify
from opt.theory.gains import GpuGroup, het_report, hom_report, min_gpus


def _print_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.json:
        print_json(report)
    else:
        print(table(["quantity", "value"], [[k, v] for k, v in report.items()], digits=5))


def cmd_het(args: argparse.Namespace) -> int:
    """``theory het``: eta and the gain bound of two GPU types; with a model, the gain at a
    context and its peak."""
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
    cat = catalog(args)
    card = cards(args)[args.model]
    dev = cat.device(args.gpu)
    gpus = args.group_size if args.group_size is not None else min_gpus(dev, card)
    _print_report(args, hom_report(GpuGroup(dev, gpus, args.price), card, args.context,
                                   args.kv_dtype))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``theory verify``: the claims checked numerically (exit 1 if any fails)."""
    if args.detailed:  # the P3 solvers: loaded only for this variant, as a command's module
        return Handler("opt.app.cli.theory_detailed", "cmd_verify_detailed")(args)
    results = verify.verify_closed_forms(samples=args.samples, seed=args.seed)
    cad = verify.cad_feasibility()
    if args.json:
        print_json({"samples": args.samples, "seed": args.seed,
                    "claims": [r.to_dict() for r in results], "cad_feasibility": cad})
    else:
        print(table(["claim", "samples", "pass", "fail", "worst margin", "statement"],
                    [[r.claim, r.samples, r.passed, r.failed, r.worst_margin,
                      verify.CLAIMS.get(r.claim, "")] for r in results], digits=3))
        print()
        print("CAD feasible (ordered catalog GPU pairs, groups sized to hold the weights):")
        print(table(["model", "pairs", "mu=1", "mu=2", "mu=4"],
                    [[s["model"], s["pairs"], s["feasible_mu1"], s["feasible_mu2"],
                      s["feasible_mu4"]] for s in verify.cad_feasibility_summary(cad)]))
        failed = [r.claim for r in results if r.failed]
        print(f"\n{'FAILED: ' + ', '.join(failed) if failed else 'all claims hold'}")
    return 1 if any(r.failed for r in results) else 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``theory plot``: G_hom, G_het and CAD feasibility as three PNGs."""
    require("plot", "theory plot")

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
