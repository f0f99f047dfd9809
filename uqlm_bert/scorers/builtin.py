"""Imports the modules whose import registers the built-in scorers."""

import uqlm_bert.scorers.bert  # noqa: F401
