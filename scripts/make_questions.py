"""Build uqlm_bert/examples/questions.jsonl: factual questions with gold answers from BIG-bench.

    pip download --no-deps --no-binary :all: bigbench==1.0.0 -d /tmp/bigbench
    python scripts/make_questions.py /tmp/bigbench/bigbench-1.0.0.tar.gz

The source is BIG-bench's ``qa_wikidata`` task (Apache License 2.0; its facts come from
Wikidata, CC0): 20,442 sentence beginnings formed from Wikidata triples, each with its target
(``The capital of Occitania is`` -> ``Toulouse``). The prompts of a few relations that a small
chat model gets right some of the time (capitals, countries, languages, currencies, continents,
headquarters) are turned into questions (``What is the capital of Occitania?``) by one template
per relation; each record keeps the accepted answers, the relation and the original prompt.
``--per-relation`` prompts are drawn per relation with ``--seed``, in the file's order after
shuffling; ``--exclude`` leaves out the prompts of another questions file (to build a held-out
set with another seed).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "uqlm_bert" / "examples" / "questions.jsonl"
MEMBER = "bigbench-1.0.0/bigbench/benchmark_tasks/qa_wikidata/task.json"

#: relation: (pattern of the BIG-bench prompt, question template)
TEMPLATES: dict[str, tuple[str, str]] = {
    "capital": (r"^The capital of (.+) is$", "What is the capital of {}?"),
    "capital of": (r"^(.+) is capital of$", "{} is the capital of which country or region?"),
    "country": (r"^The country of (.+) is$", "In which country is {}?"),
    "continent": (r"^The continent of (.+) is$", "On which continent is {}?"),
    "official language": (
        r"^The official language of (.+) is$",
        "What is the official language of {}?",
    ),
    "currency": (r"^The currency of (.+) is$", "What is the currency of {}?"),
    "headquarters": (
        r"^The headquarters location of (.+) is$",
        "In which city is the headquarters of {}?",
    ),
    "citizenship": (
        r"^The country of citizenship of (.+) is$",
        "Of which country is {} a citizen?",
    ),
}


def questions(task: dict, per_relation: int, seed: int, exclude: set[str]) -> list[dict]:
    """``per_relation`` questions of each relation of :data:`TEMPLATES`, drawn with ``seed``."""
    by_relation: dict[str, list[dict]] = {name: [] for name in TEMPLATES}
    for example in task["examples"]:
        prompt = example["input"].strip()
        if prompt in exclude:
            continue
        targets = example["target"] if isinstance(example["target"], list) else [example["target"]]
        for name, (pattern, template) in TEMPLATES.items():
            m = re.match(pattern, prompt)
            if m and not (name == "country" and m.group(1).startswith("citizenship of")):
                by_relation[name].append(
                    {
                        "question": template.format(m.group(1)),
                        "answers": targets,
                        "relation": name,
                        "source_prompt": prompt,
                    }
                )
                break
    rng = random.Random(seed)
    picked = []
    for name in TEMPLATES:
        pool = sorted(by_relation[name], key=lambda r: r["source_prompt"])
        picked += rng.sample(pool, min(per_relation, len(pool)))
    rng.shuffle(picked)
    return picked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path, help="bigbench-1.0.0.tar.gz (the source archive)")
    parser.add_argument("--per-relation", type=int, default=27)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a questions file whose prompts are left out",
    )
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    args = parser.parse_args(argv)

    with tarfile.open(args.archive) as tar:
        task = json.load(tar.extractfile(MEMBER))  # type: ignore[arg-type]
    exclude = set()
    for path in args.exclude:
        exclude |= {json.loads(line)["source_prompt"] for line in path.read_text().splitlines()}
    rows = questions(task, args.per_relation, args.seed, exclude)
    with open(args.output, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} questions written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
