"""Benchmarks of the course's GPT-2 (course/gpt2.py): `python -m benchmarks.decode`. One question
per module:

- decode.py: the command, its options, and one run from the models to the JSON file;
- cases.py: what is measured on, a target/draft pair with its prompts (a Case);
- peers.py: what is measured, tinygrad (course/gpt2.py) and PyTorch + transformers, one protocol;
- measure.py: how, the cold calls, the per-call timings and whole runs in turns, the race;
- report.py: what it says, each model's report and the refined formula's predictions, the table,
  and the JSON (the one place where keys become strings);
- machine.py: where, the device, versions, commit and memory-bandwidth floor.
"""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
