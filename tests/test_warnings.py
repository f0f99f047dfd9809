"""Every library warning names the user's line, whichever public entry point raised it.

Warnings are raised deep inside the package (a text repaired while checking inputs, NaN items
dropped while evaluating); a warning that points at ``uqlm_bert/_inputs.py`` tells a user nothing
about which of their calls caused it. Each case below calls a public API from this file and
expects the warning's filename to be this file.
"""

from __future__ import annotations

import ast
import math
import warnings
from pathlib import Path

import pytest

import uqlm_bert
from tests.helpers.source import parse_source

PACKAGE = Path(uqlm_bert.__file__).parent


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, "expected a warning"
    return caught


def _assert_here(caught):
    assert {w.filename for w in caught} == {__file__}, [
        (w.filename, str(w.message)) for w in caught
    ]


def test_repaired_text_in_a_text_scorer_points_at_the_call():
    from uqlm_bert.scorers._registry import build_scorer

    scorer = build_scorer("rouge_l")
    _assert_here(_caught(lambda: scorer.score(["a \ud800 b"], [["a b"]])))


def test_repaired_text_in_the_orchestrator_points_at_the_call():
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(scorers=["exact_match"])
    _assert_here(_caught(lambda: uq.score(["a \ud800"], [["a", "b"]])))


def test_nan_items_dropped_by_an_evaluation_metric_point_at_the_call():
    from uqlm_bert.evaluation import auroc

    caught = _caught(lambda: auroc([0.1, math.nan, 0.9, 0.4], [0, 1, 1, 0]))
    _assert_here(caught)
    assert "dropped 1 of 4" in str(caught[0].message)


def test_a_platt_fit_on_reversed_labels_points_at_the_call():
    from uqlm_bert import ScoreCalibrator

    calibrator = ScoreCalibrator(method="platt")
    _assert_here(_caught(lambda: calibrator.fit([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0])))


def test_no_library_warning_counts_stack_frames_by_hand():
    """``stacklevel`` arithmetic breaks when a call path gains a frame; the helper walks the
    stack instead. Only a warning raised on the event loop (no user frame beneath it) may set
    its own level."""
    allowed = {PACKAGE / "_warn.py", PACKAGE / "generation" / "_caller.py"}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(parse_source(path)):
            if isinstance(node, ast.keyword) and node.arg == "stacklevel":
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.value.lineno}")
    assert not offenders, f"use uqlm_bert._warn.warn_user instead at {offenders}"


@pytest.mark.parametrize("depth", [0, 3])
def test_the_helper_skips_every_package_frame(depth):
    """Through any number of package frames the warning lands on the first frame outside."""
    from uqlm_bert._warn import warn_user

    def nested(n):
        if n == 0:
            warn_user("deep")
        else:
            nested(n - 1)

    # the nested frames live in this file, outside the package: the warning names the
    # innermost of them, which is this file too
    _assert_here(_caught(lambda: nested(depth)))


def test_a_coroutine_run_by_asyncio_run_warns_at_the_asyncio_run_line():
    """The event loop resumes a top-level coroutine, so asyncio's frames lie between it and
    the user's line; they are skipped as the package's are."""
    import asyncio

    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from uqlm_bert import BlackBoxUQ

    llm = FakeListChatModel(responses=["Paris \ud800 is the capital."])
    uq = BlackBoxUQ(llm=llm, scorers=["exact_match"], show_progress_bars=False)
    caught = _caught(lambda: asyncio.run(uq.generate_and_score(["Capital?"], num_responses=2)))
    _assert_here(caught)
    assert "3 LLM repl(ies)" in str(caught[0].message)


def test_no_warning_keeps_an_earlier_spelling_alive():
    """The package was never released: an earlier spelling of its own is removed, not kept with
    a ``FutureWarning`` (nor a module of moved paths or arguments)."""
    assert not list(PACKAGE.rglob("_moved*"))
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(parse_source(path)):
            if isinstance(node, ast.Name) and node.id in ("FutureWarning", "DeprecationWarning"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders
