"""The list schedulers' parameter (HEFT, the static policies, policy search): the device choice
under capacity (problems.md §6 "Device choice under capacity"), declared once."""

from __future__ import annotations

from heuristics.placement.list_scheduler import DEVICE_CHOICES
from opt.common.params import Param, ParamSpec, choice

#: ``device_choice`` (:data:`heuristics.placement.list_scheduler.DEVICE_CHOICES`): part of a
#: method's recorded settings
DEVICE_CHOICE_PARAMS = ParamSpec((
    Param("device_choice", choice(*DEVICE_CHOICES),
          "fit_in_class: a device that would evict only when none of its class runs the task "
          "without evicting; eft: earliest finish whatever it evicts",
          default="fit_in_class"),))
