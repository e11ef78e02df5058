"""rnnbench: benchmark and gradient-accuracy suite for recurrent computations.

Public API: check_recurrence (check your own step function on every driver), RecurrenceReport,
and the registries list_models / list_drivers."""

from rnnbench.api import DriverResult, RecurrenceReport, check_recurrence
from rnnbench.registry import drivers as list_drivers
from rnnbench.registry import models as list_models

__all__ = ["check_recurrence", "RecurrenceReport", "DriverResult", "list_models", "list_drivers"]
__version__ = "0.1.0"
