"""Imports the modules whose import registers the built-in scorers."""

import uqlm_bert.scorers.bert  # noqa: F401
import uqlm_bert.scorers.cosine  # noqa: F401
import uqlm_bert.scorers.text  # noqa: F401
