"""Host integration: machine diagnostics (``glove doctor``)."""

from glove.host._doctor import CHECKS, Check, Report, run_checks

__all__ = ["CHECKS", "Check", "Report", "run_checks"]
