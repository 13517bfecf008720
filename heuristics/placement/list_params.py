"""The list schedulers' parameter (HEFT, the static policies, policy search): the device choice
(problems.md §6 "Device choice under capacity" and "Device inside the class"), declared once
per family of methods."""

from __future__ import annotations

from heuristics.placement.list_scheduler import DEVICE_CHOICES, STATIC_DEVICE_CHOICES
from opt.common.params import Param, ParamSpec, choice

_FIT_IN_CLASS = ("fit_in_class: a device that would evict only when none of its class runs "
                 "the task without evicting")
_EFT = "eft: earliest finish whatever it evicts"

#: ``device_choice`` of HEFT and policy search
#: (:data:`heuristics.placement.list_scheduler.DEVICE_CHOICES`): part of a method's recorded
#: settings
DEVICE_CHOICE_PARAMS = ParamSpec((
    Param("device_choice", choice(*DEVICE_CHOICES), f"{_FIT_IN_CLASS}; {_EFT}",
          default="fit_in_class"),))

#: ``device_choice`` of the static policies (pd, af, pd+linear, pd+attn, pd+ffn;
#: :data:`heuristics.placement.list_scheduler.STATIC_DEVICE_CHOICES`): the default is the
#: DOPS authors' baseline rule (YIAI-02/TriForm src/scheduler/scheduler_naive.py,
#: ``NaiveTopoScheduler._pick_best_allowed_device``, commit 458faff): part of a method's
#: recorded settings
STATIC_DEVICE_CHOICE_PARAMS = ParamSpec((
    Param("device_choice", choice(*STATIC_DEVICE_CHOICES),
          "least_available: the device of the class whose last booked task ends first "
          f"(lowest index on ties; the DOPS authors' baselines); {_FIT_IN_CLASS}; {_EFT}",
          default="least_available"),))
