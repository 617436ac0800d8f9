"""Choose the offline pair's draft by the speed-up it gives, not by habit (issue 44).

    python scripts/choose_draft.py                          # the candidates in models/
    python scripts/choose_draft.py --models tmp/pair --out tmp/pair/draft_choice.json

For each candidate draft distilled from `pytarget` (scripts/train_pair.py):
  alpha   the acceptance rate along held-out code, at temperature 1 (the mean over positions of
          sum_x min(target, draft)) and 0 (the two argmaxes agree), both models reading the same
          held-out windows (teacher forcing: the text is real code, not the target's samples);
  c, v_K  a draft step against a target step, and a target pass over K + 1 new tokens in target
          steps, measured in tinygrad on the course's runtime (speedup.step_costs);
  speed-up the refined formula's (notebook 05) at the best K, time outside the models left out.
Run it on a quiet machine: c and v_K are timings.
"""

import argparse
import json
import pathlib

import numpy as np

import specmini
from course import checkpoints, corpus, gpt2, speedup, timing
from course.numpy_gpt2 import NumpyGPT2

ROOT = pathlib.Path(__file__).resolve().parent.parent
CANDIDATES = ("pydraft", "pydraft-2x256")
WINDOWS, WINDOW = 24, 256  # held-out windows that alpha is measured on


def held_out_windows(n, length, seed=0):
    _, val, _ = corpus.load()
    starts = np.random.default_rng(seed).integers(0, len(val) - length, size=n)
    return [val[s : s + length].tolist() for s in starts]


def alphas(target, draft, windows):
    """alpha at temperature 1 and 0 over every position of the windows."""
    soft, greedy = [], []
    for window in windows:
        t_rows, d_rows = target(window, 0), draft(window, 0)
        soft.append(specmini.acceptance_rate(specmini.probabilities(t_rows, 1.0),
                                             specmini.probabilities(d_rows, 1.0)))  # fmt: skip
        greedy.append(t_rows.argmax(-1) == d_rows.argmax(-1))
    return float(np.concatenate(soft).mean()), float(np.concatenate(greedy).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=pathlib.Path, default=ROOT / "models")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "models" / "draft_choice.json")
    parser.add_argument("candidates", nargs="*", default=CANDIDATES)
    args = parser.parse_args()
    windows = held_out_windows(WINDOWS, WINDOW)
    twin = NumpyGPT2(checkpoints.load(args.models / "pytarget"))
    target = checkpoints.load(args.models / "pytarget", buckets=gpt2.CALLS["costs"])
    target.compile()
    text = windows[0][:128]
    record = {"machine": timing.machine_name(), "held_out_positions": WINDOWS * WINDOW}
    record["drafts"] = {}
    for name in args.candidates:
        draft_twin = NumpyGPT2(checkpoints.load(args.models / name))
        soft, greedy = alphas(twin, draft_twin, windows)
        draft = checkpoints.load(args.models / name, buckets=gpt2.CALLS["draft"]).compile()
        t_draft, t_target, v = speedup.step_costs(target, draft, text, 64, range(1, 9), repeat=30)
        c = t_draft / t_target
        best = {t: speedup.choose_k(a, c, v) for t, a in ((1.0, soft), (0.0, greedy))}
        record["drafts"][name] = {
            "alpha": {"T=1": round(soft, 4), "T=0": round(greedy, 4)},
            "draft_step_ms": round(t_draft, 4),
            "target_step_ms": round(t_target, 4),
            "c": round(c, 4),
            "v_K": {k: round(x, 3) for k, x in v.items()},
            "best_K_and_speedup": {f"T={t:g}": [k, round(s, 3)] for t, (k, s) in best.items()},
        }
        print(name, json.dumps(record["drafts"][name]), flush=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
