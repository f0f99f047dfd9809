"""Every figure the README and the docs give is one benchmarks/RESULTS.md measured.

A page states a measurement (a speed-up, an AUROC, a bound) by copying it from the results page,
or by rounding it; a figure that is on no results page is a claim nobody can rerun. This test
reads the prose of ``README.md`` and ``docs/**/*.md`` and checks each figure against
``benchmarks/RESULTS.md``.

What counts as a figure, by one small rule:

- a number with a decimal point (``0.797``, ``74.31``), a speed-up or ratio written ``Nx``
  (``2.7x``, ``3x``), a percentage (``60%``) or a bound in e-notation (``2.8e-4``);
- not in fenced code blocks, inline code spans, raw HTML blocks (pictures of an example's
  output, as a code block's output is), link targets or HTML tags;
- both ends of a range (``0.780-0.819``);
- not part of a word or a longer dotted name (``gpt-3.5-turbo``, ``v1.2``, ``0.6.7``), and not
  the version written after the name of a piece of software or a licence (:data:`VERSIONED`:
  ``Python 3.11``, ``Ray 2.60``, ``CC BY-SA 4.0``).

A figure is backed when RESULTS.md holds a number with the same digits, or one that rounds to it
at the page's precision (``2.7x`` from ``2.72x``, ``2.8e-4`` from ``2.8e-4``, ``60%`` from
``59.6%``): a percentage from a percentage, a bound in e-notation from one, a ratio or a decimal
from any number (the results page's tables give ratios in columns, without the ``x``). A setting that is not a measurement and not on the results page is listed in
:data:`SETTINGS` with why; the list stays short, and every entry must still be used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "RESULTS.md"

#: Software and licences whose version may follow their name (``Python 3.11+``, ``Ray 2.60``,
#: ``Apache License 2.0``): not a figure.
VERSIONED = (
    "Python", "Ray", "uqlm", "torch", "transformers", "onnxruntime", "bert-score",
    "License", "licence", "BY-SA",
)  # fmt: skip

#: Figures that are settings, not measurements, and that RESULTS.md does not state: figure ->
#: why it is on a page. Keep it short; a measurement belongs on the results page instead.
SETTINGS: dict[str, str] = {
    "0.52": "SENTENCE_THRESHOLD, the sentence threshold refine() and sentences() use: a setting",
}

FIGURE = re.compile(
    r"(?<![\w./])(?<![A-Za-z]-)"  # not inside a word, a name (gpt-3.5), a dotted name or a path
    r"(?P<number>\d+(?:\.\d+)?)"
    r"(?P<kind>x(?![\w])|%|e[-+]?\d+)?"
    r"(?![\w]|\.\d)"  # nor followed by more of a name or another dotted part
)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
HTML_TAG = re.compile(r"<[^>\n]+>")
VERSION = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in VERSIONED) + r")\s+\d+(?:\.\d+)+")


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    text: str  # as written, with its kind: "2.7x", "60%", "2.8e-4", "0.797"

    @property
    def value(self) -> float:
        return float(self.text.rstrip("x%"))

    @property
    def precision(self) -> tuple[str, int]:
        """("decimals", n) or, for e-notation, ("significant", n)."""
        mantissa = self.text.rstrip("x%")
        if "e" in mantissa:
            digits = mantissa.split("e")[0].replace(".", "")
            return "significant", len(digits)
        return "decimals", len(mantissa.partition(".")[2])


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines that are prose, with what is not prose taken out of them."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    in_html = False
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if not line.strip():
            in_html = False
            continue
        if in_html or line.lstrip().startswith("<"):
            in_html = True  # a raw HTML block runs to the next blank line
            continue
        line = INLINE_CODE.sub(" ", line)
        line = LINK_TARGET.sub("]", line)
        line = HTML_TAG.sub(" ", line)
        line = VERSION.sub(" ", line)
        out.append((number, line))
    return out


def figures(text: str, page: str = "<page>") -> list[Figure]:
    found = []
    for number, line in prose_lines(text):
        for m in FIGURE.finditer(line):
            if "." in m.group("number") or m.group("kind"):
                found.append(Figure(page, number, m.group(0)))
    return found


PERCENT_RANGE_END = re.compile(r"-\d+(?:\.\d+)?%")


def _results_values(text: str) -> list[tuple[float, str]]:
    """Every number on the results page, code included, with its text; a percentage (``59.6%``,
    or either end of ``77-82%``) keeps its ``%``."""
    number = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?)(?:x|(%))?(?![\w])")
    found = []
    for m in number.finditer(text):
        percent = m.group(2) is not None or bool(PERCENT_RANGE_END.match(text, m.end()))
        found.append((float(m.group(1).replace(",", "")), m.group(1) + ("%" if percent else "")))
    return found


def backed(figure: Figure, results: list[tuple[float, str]]) -> bool:
    """Whether a RESULTS.md number has the figure's digits, or rounds to it."""
    how, n = figure.precision
    for value, text in results:
        if figure.text.endswith("%") != text.endswith("%"):
            continue
        text = text.rstrip("%")
        if how == "significant":
            if value == 0 or "e" not in text:
                continue
            exponent = math.floor(math.log10(abs(value)))
            if math.isclose(round(value, n - 1 - exponent), figure.value, rel_tol=1e-9):
                return True
        else:
            decimals = len(text.partition(".")[2]) if "e" not in text else 0
            if decimals >= n and math.isclose(round(value, n), figure.value, abs_tol=1e-9):
                return True
    return False


def _pages() -> list[Path]:
    docs = REPO_ROOT / "docs"
    return [
        REPO_ROOT / "README.md",
        *sorted(p for p in docs.rglob("*.md") if "_build" not in p.parts),
    ]


def _all_figures() -> list[Figure]:
    return [
        f
        for p in _pages()
        for f in figures(p.read_text(encoding="utf-8"), str(p.relative_to(REPO_ROOT)))
    ]


@pytest.fixture(scope="module")
def results_values() -> list[tuple[float, str]]:
    return _results_values(RESULTS.read_text(encoding="utf-8"))


def test_every_figure_of_the_docs_is_on_the_results_page(results_values):
    found = _all_figures()
    assert len(found) >= 30, "the scan finds the pages' figures"
    unbacked = [
        f"{f.page}:{f.line}: {f.text}"
        for f in found
        if f.text not in SETTINGS and not backed(f, results_values)
    ]
    assert not unbacked, (
        "figures that benchmarks/RESULTS.md does not give (copy them from there, or word a "
        "setting as a setting):\n" + "\n".join(unbacked)
    )


def test_every_listed_setting_is_still_used():
    used = {f.text for f in _all_figures()}
    assert not set(SETTINGS) - used, f"no page gives these any more: {set(SETTINGS) - used}"


SYNTHETIC_RESULTS = """
| run | speed-up | accuracy |
|---|---|---|
| auto | **2.72x** | F1 within 2.8e-4; 59.6% of resamples; AUROC 0.797 |
`python -m benchmarks.bench --rounds 7`
"""


@pytest.mark.parametrize(
    ("prose", "expected", "unbacked"),
    [
        ("About 2.7x the reference's speed.", ["2.7x"], []),
        (
            "F1 within 2.8e-4 of float32, AUROC 0.797 (0.80 rounded).",
            ["2.8e-4", "0.797", "0.80"],
            [],
        ),
        ("It wins in 60% of the resamples.", ["60%"], []),
        ("AUROC 0.797 (0.780-0.819).", ["0.797", "0.780", "0.819"], ["0.780", "0.819"]),
        # the negative cases: a figure the results page does not give
        ("Now 9.99x faster!", ["9.99x"], ["9.99x"]),
        ("Confidences within 2e-3 of float32.", ["2e-3"], ["2e-3"]),
        ("AUROC 0.81 on our data.", ["0.81"], ["0.81"]),
        ("A 12% gain.", ["12%"], ["12%"]),
        ("A 0.80% gain.", ["0.80%"], ["0.80%"]),  # a percentage is backed by a percentage only
        # not figures: code, versions, names, dotted numbers, integers, links, HTML
        (
            "Run `--rate 9.5` on Python 3.11 with Ray 2.60, uqlm 0.6.7, gpt-3.5-turbo, "
            "[v1.5](page.md#section-1.2), 512 tokens.",
            [],
            [],
        ),
        ("```python\nx = 9.75\n```\nDone.", [], []),
        ("<div>support 0.42</div>\n<span>0.66</span>\n\nAfter.", [], []),
    ],
)
def test_the_scan_finds_figures_and_flags_unbacked_ones(prose, expected, unbacked):
    results = _results_values(SYNTHETIC_RESULTS)
    found = figures(prose)
    assert [f.text for f in found] == expected
    assert [f.text for f in found if not backed(f, results)] == unbacked
