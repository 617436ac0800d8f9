"""Decoding speed of course/gpt2.py (tinygrad) against PyTorch + transformers, same weights.

Run from the repository root:

    .venv/bin/python -m benchmarks.decode --fast        # tinygrad, offline pair, a few tokens (CI)
    .venv-bench/bin/python -m benchmarks.decode         # + transformers: offline pair, GPT-2 small
    .venv-bench/bin/python -m benchmarks.decode --models pair,small,medium --save

(.venv-bench: `python3 -m venv .venv-bench && .venv-bench/bin/pip install -r
requirements-bench.txt -e .`; without torch and transformers the peer is skipped.)

Both frameworks load the same safetensors file. Measured in one run, the frameworks alternating
within every repetition, min and median over the repetitions:

- step: ms per token for one new token at a warm KV cache (a 32-token prompt);
- verify K: one pass over K + 1 new tokens at the same cache (what verifies K drafts), / step;
- end to end: greedy tokens/s target-only, speculative (specmini.generate; transformers' assisted
  generation with the same draft and K), and whether all of them produced the same tokens;
- the race (the offline pair): the target alone against speculative decoding at K = 1 to 6 on
  held-out prompts, at temperatures 0 and 1, against notebook 05's refined formula, also charged
  with the time tinygrad's decoding spends outside the two models' calls (measured before it);
- floor: weight bytes / measured copy bandwidth, the least a memory-bound step can take.

It prints a table and writes JSON (device, versions, threads, machine load) to
benchmarks/results/tmp/ (git-ignored), or with --save to benchmarks/results/<device>-<date>.json.

This module is the command; the rest is one question per module (benchmarks/__init__.py):
cases.py (the models and prompts), peers.py (the two frameworks, one protocol), measure.py
(the timings and the race), report.py (the report, the table, the JSON), machine.py (the device
and the bandwidth floor).
"""

import argparse
import datetime
import os
import pathlib
import sys
import tempfile

import course.gpt2  # noqa: F401  first: it starts tinygrad on the course's CPU runtime, read once
from benchmarks import ROOT, machine
from benchmarks.cases import MODELS, make_case
from benchmarks.measure import COURSE, end_to_end, measure, outside_time, progress
from benchmarks.peers import Tinygrad, Transformers, torch_available
from benchmarks.report import as_json, footer, model_report, predictions, table
from course.speed import runtime

from tinygrad.helpers import NUM_CPU_THREADS

RESULTS = ROOT / "benchmarks" / "results"
SCRATCH = RESULTS / "tmp"  # git-ignored: ad-hoc runs must leave `git status` clean
TINYGRAD_ENV = ("DEV", "JIT", "BEAM", "JITBEAM", "NUM_CPU_THREADS", "CACHELEVEL", "HCQ2")


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.decode", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--models", default="pair,small", help="comma-separated: pair, small, medium")
    ap.add_argument("--reps", type=int, default=0, help="repetitions (default: by model size)")
    ap.add_argument(
        "--tokens", type=int, default=0, help="new tokens end to end (default: by model)"
    )
    ap.add_argument("--k", type=int, default=4, help="drafts per round, end to end")
    ap.add_argument("--no-torch", action="store_true", help="tinygrad only")
    ap.add_argument("--torch-threads", type=int, default=0, help="default: tinygrad's count")
    ap.add_argument(
        "--fast", action="store_true", help="CI: tinygrad, offline pair, 8 tokens, 2 reps"
    )
    ap.add_argument(
        "--beam",
        type=int,
        default=0,
        help="tinygrad's kernel search width (default 0: the course's kernels, no search)",
    )
    ap.add_argument("--out", type=pathlib.Path, help="JSON path (default: benchmarks/results/tmp/)")
    ap.add_argument("--save", action="store_true", help="write to benchmarks/results/ to commit")
    args = ap.parse_args(argv)
    if args.fast:
        args.models, args.no_torch = "pair", True
        args.reps, args.tokens = args.reps or 2, args.tokens or 8
    return args


def output_path(args, tag, now):
    if args.out:
        return args.out
    if args.save:
        return RESULTS / f"{tag}-{now:%Y-%m-%d}.json"
    return SCRATCH / f"{tag}-{now:%Y-%m-%d-%H%M%S}.json"


def main(argv=None):
    args = parse(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - set(MODELS)
    if unknown:
        sys.exit(f"unknown models {sorted(unknown)}: choose from {', '.join(MODELS)}")
    with_torch = not args.no_torch and torch_available()
    if not args.no_torch and not with_torch:
        print("transformers peer skipped: pip install -r requirements-bench.txt (see its header)")
    threads = NUM_CPU_THREADS.value
    now = datetime.datetime.now()
    info = machine.device_info()
    result = {
        "command": "python -m benchmarks.decode "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": now.isoformat(timespec="seconds"),
        "git_commit": machine.git_commit(),
        "device": info,
        "versions": machine.versions(with_torch),
        "threads": {"tinygrad_NUM_CPU_THREADS": threads},
        # tinygrad's settings that change its kernels: a BEAM-searched run is not a plain one
        "tinygrad_env": {k: os.environ[k] for k in TINYGRAD_ENV if k in os.environ},
        "tinygrad_beam": args.beam,
        "tinygrad_runtime": runtime.name(),  # HCQ2 or default (course/speed/runtime.py)
        "load_before": os.getloadavg(),
        "fast": args.fast,
    }
    if with_torch:  # the same threads for both: 2 cores here, shared by the two frameworks
        import torch

        torch.set_num_threads(args.torch_threads or threads)
        result["threads"]["torch"] = torch.get_num_threads()
        result["torch_device"] = "cuda" if info["gpu"] and torch.cuda.is_available() else "cpu"
    result["bandwidth"] = machine.bandwidth(args.fast)
    result["models"] = {}
    with tempfile.TemporaryDirectory(prefix="specmini-bench-") as scratch:
        for name in names:
            progress(f"{name}: writing and loading the weights")
            case = make_case(name, pathlib.Path(scratch), args.reps, args.tokens, args.fast)
            peers = [Tinygrad(case, args.beam)] + ([Transformers(case)] if with_torch else [])
            measured = measure(peers, case, args.k)
            report = model_report(case, measured, result["bandwidth"]["floor_GBps"])
            if case.race_ks:
                outside = outside_time(peers[0], case)  # COURSE's, before the race
                report["outside_ms"] = outside
                report["race"] = end_to_end(peers, case)
                report["race_prompts"] = [
                    bytes(p).decode("utf-8", "replace") for p in case.race_prompts
                ]
                report["predictions"] = predictions(
                    report["frameworks"][COURSE], report["race"], outside
                )
            result["models"][name] = report
            print(table(name, report), flush=True)
            del peers  # free GPT-2 medium's weights before the next model
    result["load_after"] = os.getloadavg()
    result["tokens_identical"] = all(m["tokens_identical"] for m in result["models"].values())
    print(footer(result))
    path = output_path(args, machine.device_tag(info), now)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(as_json(result))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
