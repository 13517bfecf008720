"""The checks of ``hetopt bench``: invariants (pass / fail) and paper figures (reproduced /
differs), with the verdict always computed from the numbers.

* An **invariant** is a correctness property (B&B ≤ every baseline, the validator accepts,
  CP-SAT = MILP, a known optimum matched). Its verdict is ``pass`` or ``fail``; a ``fail``
  makes ``hetopt bench`` exit non-zero.
* A **paper figure** compares ours with a published value or range (``paper``) under a stated
  :class:`Tolerance`, and names its ``source``. Its verdict is ``reproduced`` when ours lies
  within the tolerance of the paper value, else ``differs``. A ``differs`` does not fail the
  bench, but it must carry a one-line ``reason`` that names the modelling choice and points to
  the doc section with the evidence (it must mention a ``.md`` file); a paper figure without a
  source or a tolerance, or a ``differs`` without such a reason, is a :class:`ValueError` at
  construction.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

INVARIANT, PAPER = "invariant", "paper"
KINDS = (INVARIANT, PAPER)
PASS, FAIL, REPRODUCED, DIFFERS = "pass", "fail", "reproduced", "differs"
VERDICTS = (PASS, FAIL, REPRODUCED, DIFFERS)

#: A paper value: one number, or a range (low, high) whose open side is None.
PaperValue = float | tuple[float | None, float | None]


def _real(x: Any) -> bool:
    """A finite real number (not a bool; numpy scalars count)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


@dataclass(frozen=True)
class Tolerance:
    """How far ours may lie from the paper's value: ``amount`` is a fraction of the paper value
    when ``relative`` (0.05 = ±5 %), else an absolute distance in the figure's unit."""

    amount: float
    relative: bool = True

    def __post_init__(self) -> None:
        if not _real(self.amount) or self.amount < 0:
            raise ValueError(f"tolerance must be a finite number >= 0, got {self.amount!r}")
        if not isinstance(self.relative, bool):
            raise ValueError(f"tolerance.relative must be a bool, got {self.relative!r}")

    def slack(self, value: float) -> float:
        """The allowed distance around ``value`` (its unit)."""
        return abs(value) * self.amount if self.relative else self.amount

    def admits(self, ours: float, low: float | None, high: float | None) -> bool:
        """Whether ``ours`` lies in [low − slack, high + slack] (None: that side is open)."""
        return ((low is None or ours >= low - self.slack(low))
                and (high is None or ours <= high + self.slack(high)))

    def __str__(self) -> str:
        if self.amount == 0:
            return "exact"
        return f"±{100 * self.amount:g} % rel" if self.relative else f"±{self.amount:g} abs"


def paper_bounds(paper: PaperValue) -> tuple[float | None, float | None]:
    """(low, high) of a paper value: a number is the range [x, x]."""
    if isinstance(paper, tuple):
        return paper
    return paper, paper


def paper_text(paper: PaperValue | None) -> str:
    """A paper value for tables: ``2.23``, ``1.89–2.43``, ``≥ 1``, ``≤ 3``."""
    if paper is None:
        return ""
    low, high = paper_bounds(paper)
    if low == high:
        return f"{low:g}"
    if high is None:
        return f"≥ {low:g}"
    if low is None:
        return f"≤ {high:g}"
    return f"{low:g}–{high:g}"


def _paper_value(paper: Any) -> PaperValue:
    """Validate a paper value (a number or a (low, high) pair; lists from JSON become tuples)."""
    if _real(paper):
        return float(paper)
    if isinstance(paper, (list, tuple)) and len(paper) == 2:
        low, high = paper
        if all(v is None or _real(v) for v in (low, high)) and (low, high) != (None, None) \
                and (low is None or high is None or low <= high):
            return (None if low is None else float(low), None if high is None else float(high))
    raise ValueError(f"paper value must be a number or a (low, high) range, got {paper!r}")


@dataclass(frozen=True)
class Check:
    """One check of a bench case (build with :func:`invariant` or :func:`paper_figure`).

    ``ours``: our value; invariants: ``expected`` (what the property requires, for the
    reader) and ``passed`` (its outcome); paper figures: ``paper``, ``tolerance``, ``source``
    and ``reason`` (why ours differs; shown when the verdict is ``differs``). An invariant may
    name a ``source`` and a ``tolerance`` too (e.g. a published count within 1 %)."""

    kind: str
    name: str
    ours: Any
    expected: Any = None
    passed: bool | None = None
    paper: PaperValue | None = None
    tolerance: Tolerance | None = None
    source: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"check kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a check needs a name")
        if self.tolerance is not None and not isinstance(self.tolerance, Tolerance):
            raise ValueError(f"{self.name}: tolerance must be a Tolerance")
        for key in ("source", "reason"):
            text = getattr(self, key)
            if not isinstance(text, str) or "\n" in text:
                raise ValueError(f"{self.name}: {key} must be one line of text")
        if self.kind == INVARIANT:
            self._check_invariant()
        else:
            self._check_paper()

    def _check_invariant(self) -> None:
        if not isinstance(self.passed, bool):
            raise ValueError(f"invariant {self.name!r}: passed must be a bool")
        if self.paper is not None:
            raise ValueError(f"invariant {self.name!r} has a paper value: make it a paper "
                             f"figure")

    def _check_paper(self) -> None:
        if self.passed is not None or self.expected is not None:
            raise ValueError(f"paper figure {self.name!r}: its verdict comes from paper, "
                             f"ours and tolerance, not from passed/expected")
        object.__setattr__(self, "paper", _paper_value(self.paper))
        if self.tolerance is None:
            raise ValueError(f"paper figure {self.name!r} states no tolerance")
        if not self.source.strip():
            raise ValueError(f"paper figure {self.name!r} names no source")
        if self.ours is not None and not _real(self.ours):
            raise ValueError(f"paper figure {self.name!r}: ours must be a number or None, "
                             f"got {self.ours!r}")
        if self.ours is not None:
            object.__setattr__(self, "ours", float(self.ours))
        if self.verdict == DIFFERS and ".md" not in self.reason:
            raise ValueError(f"paper figure {self.name!r} differs (ours {self.ours}, paper "
                             f"{paper_text(self.paper)}, {self.tolerance}) without a reason "
                             f"naming the modelling choice and its doc section (*.md)")

    @property
    def verdict(self) -> str:
        """``pass``/``fail`` (invariants) or ``reproduced``/``differs`` (paper figures)."""
        if self.kind == INVARIANT:
            if self.tolerance is not None and _real(self.expected):  # within(): the numbers
                ok = _real(self.ours) and self.tolerance.admits(self.ours, self.expected,
                                                                self.expected)
                return PASS if ok else FAIL
            return PASS if self.passed else FAIL
        assert self.tolerance is not None and self.paper is not None
        ok = _real(self.ours) and self.tolerance.admits(self.ours, *paper_bounds(self.paper))
        return REPRODUCED if ok else DIFFERS

    @property
    def failed(self) -> bool:
        """A failed invariant (the only verdict that fails the bench)."""
        return self.verdict == FAIL

    def shown_reason(self) -> str:
        """The reason, when the verdict needs one (``differs``)."""
        return self.reason if self.verdict == DIFFERS else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the verdict included, for readers; :meth:`from_dict` recomputes it)."""
        tol = self.tolerance
        return {"kind": self.kind, "name": self.name, "ours": self.ours,
                "expected": self.expected, "passed": self.passed,
                "paper": list(self.paper) if isinstance(self.paper, tuple) else self.paper,
                "tolerance": None if tol is None else {"amount": tol.amount,
                                                       "relative": tol.relative},
                "source": self.source, "reason": self.reason, "verdict": self.verdict}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Check:
        """Inverse of :meth:`to_dict`; a stored verdict that the numbers do not give is a
        :class:`ValueError` (the file is not ours, or was edited)."""
        d = dict(d)
        verdict = d.pop("verdict", None)
        tol = d.pop("tolerance", None)
        check = cls(**d, tolerance=None if tol is None else Tolerance(**tol))
        if check.kind == INVARIANT and check.passed != (check.verdict == PASS):
            raise ValueError(f"check {check.name!r}: stored passed={check.passed}, the numbers "
                             f"give {check.verdict!r}")
        if verdict != check.verdict:
            raise ValueError(f"check {check.name!r}: stored verdict {verdict!r}, the numbers "
                             f"give {check.verdict!r}")
        return check


def invariant(name: str, ours: Any, expected: Any, passed: Any, *, source: str = "",
              tolerance: Tolerance | None = None) -> Check:
    """A correctness property: ``passed`` is its outcome (any truthy value)."""
    return Check(INVARIANT, name, ours, expected=expected, passed=bool(passed), source=source,
                 tolerance=tolerance)


def within(name: str, ours: float, expected: float, tolerance: Tolerance, *,
           source: str = "") -> Check:
    """An invariant that ours equals ``expected`` within ``tolerance`` (verdict from them)."""
    return invariant(name, ours, expected, _real(ours) and tolerance.admits(ours, expected,
                                                                            expected),
                     source=source, tolerance=tolerance)


def paper_figure(name: str, ours: float | None, paper: Any, tolerance: Tolerance, source: str,
                 reason: str = "") -> Check:
    """A published figure compared with ours (verdict from the numbers; see the module)."""
    return Check(PAPER, name, ours, paper=paper, tolerance=tolerance, source=source,
                 reason=reason)


#: The default tolerance of a reproduced ratio (speed-ups, cost ratios): ±5 % relative.
RATIO = Tolerance(0.05)
#: Exact agreement (counts, integers).
EXACT = Tolerance(0.0)


# ---- exact methods: proofs under deterministic limits, the clock's outcomes as notes ----------

#: statuses of a run that its limit, not a proof, ended
LIMITED = ("FEASIBLE", "TIME_LIMIT_NO_SOLUTION")


def stopped_by_clock(result: Any) -> bool:
    """Whether the wall clock decided ``result`` (a :class:`opt.common.result.Result`): it
    ended at its limit (:data:`LIMITED`) and that limit was wall-clock time — not CP-SAT's
    deterministic time (``stats["deterministic"]``, false also when CP-SAT's wall-clock
    backstop stopped it first) — or a serving search ran out of time
    (``stats["search"]["timed_out"]``). Such an outcome differs between a quiet and a loaded
    machine: it may be noted, never failed."""
    search = result.stats.get("search")
    if isinstance(search, dict):  # a serving search: FEASIBLE also means "optimal in its space"
        return bool(search.get("timed_out"))
    return result.status in LIMITED and not result.stats.get("deterministic", False)


def agrees(name: str, result: Any, optimum: float, *, source: str = "",
           rel: float = 0.0) -> tuple[Check, str]:
    """What an exact method's result says about a known ``optimum`` whatever the clock did:
    an invariant that passes when the run did not fail (status not ERROR / INFEASIBLE), its
    objective is ≥ the optimum and its lower bound ≤ it (each when present) and, when it
    claims OPTIMAL, its objective equals the optimum (``rel``: relative slack, for costs in
    floating point); and a note (else ``""``) when it did not prove the optimum within its
    limit."""
    obj, lb, status = result.objective, result.lower_bound, result.status
    eps = rel * abs(optimum)
    ok = (status not in ("ERROR", "INFEASIBLE")
          and (obj is None or obj >= optimum - eps) and (lb is None or lb <= optimum + eps)
          and (status != "OPTIMAL" or (obj is not None and abs(obj - optimum) <= eps)))
    check = invariant(f"{name}: bound <= optimum <= objective (= when OPTIMAL)",
                      [status, lb, obj], f"bound <= {optimum:.10g} <= objective", ok,
                      source=source)
    note = "" if status == "OPTIMAL" or not ok else \
        f"{name}: not proven optimal ({status}, bound {lb}, objective {obj})"
    return check, note


def proves(name: str, result: Any, optimum: float, *, source: str = "") -> tuple[Check, str]:
    """An exact method's proof of a known ``optimum``: run under a deterministic limit
    (CP-SAT's deterministic time) the invariant is the proof itself — OPTIMAL with the
    optimum's value, the same on every machine; when the wall clock ended the run
    (:func:`stopped_by_clock`: the backstop) it falls back to :func:`agrees` and a note."""
    if stopped_by_clock(result):
        return agrees(name, result, optimum, source=source)
    return invariant(f"{name} proves the optimum (deterministic limit)",
                     [result.status, result.objective], ["OPTIMAL", optimum],
                     result.status == "OPTIMAL" and result.objective == optimum,
                     source=source), ""


def notes_text(*notes: str) -> str:
    """The non-empty notes joined into one line."""
    return "; ".join(n for n in notes if n)
