"""The exceptions raised by uqlm-bert.

Every error derives from :class:`UQLMBertError`, so ``except UQLMBertError`` catches anything the
library raises on purpose. Errors about the caller's input also derive from :class:`ValueError`
(or :class:`TypeError`), so code written against ``bert_score`` or ``uqlm`` keeps working.

Example:
    >>> from uqlm_bert import InputValidationError, UQLMBertError
    >>> issubclass(InputValidationError, UQLMBertError), issubclass(InputValidationError, ValueError)
    (True, True)
"""

from __future__ import annotations

__all__ = [
    "UQLMBertError",
    "InputValidationError",
    "ConfigurationError",
    "ModelLoadError",
    "ModelUnavailableError",
    "DeviceOutOfMemoryError",
    "BaselineNotFoundError",
    "ScoringWorkerError",
    "GenerationError",
    "AuthenticationFailedError",
    "ProviderUnreachableError",
    "LimitsUnavailableError",
    "CheckpointError",
    "LocalServerError",
    "NotFittedError",
]


class UQLMBertError(Exception):
    """Base class of every error raised by uqlm-bert."""


class InputValidationError(UQLMBertError, ValueError):
    """The caller's input is malformed: wrong type, wrong length, missing or empty.

    The message names the argument, the index of the offending item where there is one, and what
    was expected.
    """


class ConfigurationError(UQLMBertError, ValueError):
    """An argument or combination of arguments cannot work (unknown scorer, bad layer, ...)."""


class ModelLoadError(UQLMBertError, OSError):
    """A model or tokenizer could not be loaded from the name or path given."""


class ModelUnavailableError(ModelLoadError):
    """A model named by a preset (``model_type="accurate"``) is not on this machine and could not
    be downloaded; the message says how to provide a local copy."""


class DeviceOutOfMemoryError(UQLMBertError, MemoryError):
    """A single text does not fit in the device's memory, even after its batch was split down
    to that text alone; the message names its length in tokens and the settings that help
    (a smaller ``max_length``, a smaller model, the CPU)."""


class BaselineNotFoundError(ConfigurationError):
    """Baseline rescaling was asked for, but no baseline file exists for the model and language."""


class ScoringWorkerError(UQLMBertError):
    """Scoring on Ray could not go on: the actors sent a batch kept dying, or the pool was closed
    while a call was scoring."""


class GenerationError(UQLMBertError):
    """Generating responses from the LLM failed in a way that stops the whole run."""


class AuthenticationFailedError(GenerationError):
    """The LLM provider rejected the credentials; the run stops, since every call would fail."""


class ProviderUnreachableError(GenerationError):
    """The LLM provider could not be reached: the first rounds of calls all failed to connect
    and none was answered, so the run stopped instead of retrying every call."""


class LimitsUnavailableError(GenerationError):
    """The limits held for a whole cluster (``GenerationSettings.cluster_limits``) cannot be
    used: their keeper did not answer in time, or died. The calls waiting for a grant stop
    rather than go past the limits; the message says what happened and what to check."""


class CheckpointError(UQLMBertError):
    """A checkpoint file is unreadable or belongs to a different run."""


class LocalServerError(UQLMBertError):
    """The local LLM server (llama.cpp, started by ``LocalLLM``) did not start, or stopped."""


class NotFittedError(UQLMBertError, ValueError):
    """A model that learns from data (a calibrator) was used before it was fitted or loaded."""


# Every error is imported from ``uqlm_bert``, and a traceback names it so (as httpx's do).
for _name in __all__:
    globals()[_name].__module__ = "uqlm_bert"
del _name
