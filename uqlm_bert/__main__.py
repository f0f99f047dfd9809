"""``python -m uqlm_bert``: the ``uqlm-bert`` command (see :mod:`uqlm_bert.cli`).

Example:
    python -m uqlm_bert score answers.jsonl -o scored.csv
"""

from uqlm_bert.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
