"""The checks of setting names and values, under the name they had before :mod:`uqlm_bert.checks`.

Import them from :mod:`uqlm_bert.checks`; this module only keeps older imports working.

Example:
    >>> from uqlm_bert import checks
    >>> check_int is checks.check_int
    True
"""

from __future__ import annotations

from uqlm_bert.checks import check_int, check_names, check_number

__all__ = ["check_int", "check_names", "check_number"]
