"""What the benchmark measures on: a target/draft pair, its prompts and how much to run on it (a
Case, built complete once). The offline pair is the course's trained byte-level models; GPT-2 small
and medium are random weights in Hugging Face's layout, with a draft of the target's first layers.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import ROOT
from course import checkpoints, corpus, gpt2

from tinygrad import Device
from tinygrad.nn.state import safe_load

SHAPES = {  # Hugging Face's gpt2 and gpt2-medium configs
    "small": dict(n_embd=768, n_layer=12, n_head=12),
    "medium": dict(n_embd=1024, n_layer=24, n_head=16),
}
MODELS = ("pair", *SHAPES)
NEW_TOKENS = {"pair": 128, "small": 16, "medium": 8}  # tinygrad takes seconds per token on 2 cores
REPS = {"pair": 5, "small": 3, "medium": 2}  # medium takes minutes per repetition on 2 cores
VERIFY_KS = tuple(range(1, 9))  # the K of the verification passes timed
RACE_KS = (1, 2, 3, 4, 5, 6)  # the K raced end to end, each against the target alone
FAST_KS = (1, 4)  # fast mode: only what speculation with K = 4 compiles anyway (and K = 4 raced)
PROMPT_LEN = 32
FAST_PROMPT_LEN = 8  # fast mode: a prompt that fits the smallest graphs gpt2.py compiles anyway
PAIR_PROMPTS, PAIR_PROMPT_LEN = 4, 64  # held-out code (course.corpus.code_prompts), as bytes
DRAFT_LAYERS = 2  # random targets get a draft made of their own first layers
QUIET = 0.05  # how much the random target's later blocks add: see random_pair


@dataclass(frozen=True)
class Case:
    """One target/draft pair and what to run on it."""

    name: str  # "pair", "small" or "medium"
    note: str
    target: Path  # a directory: config.json and model.safetensors
    draft: Path
    prompt: list  # the per-call timings' warm cache, and the whole greedy and speculative runs'
    new_tokens: int  # per whole run
    reps: int
    verify_ks: tuple  # the K of the verification passes timed
    race_prompts: list  # the end-to-end race's prompts (the pair's held-out code); [] for no race
    race_ks: tuple  # the K raced, each against the target alone; () for no race


def make_case(name, scratch, reps=0, new_tokens=0, fast=False):
    """The Case of model `name` (see MODELS); random weights are written under `scratch`. reps and
    new_tokens: 0 for the model's own. fast: a smoke test (a short prompt, two verification
    passes, one prompt raced at K = 4)."""
    prompt_len = FAST_PROMPT_LEN if fast else PROMPT_LEN
    if name == "pair":
        race_prompts = corpus.code_prompts(PAIR_PROMPTS, PAIR_PROMPT_LEN)
        prompt = race_prompts[0][:prompt_len]
        target, draft = ROOT / "models" / "pytarget", ROOT / "models" / "pydraft"
        note = "offline pair: trained byte-level models from models/; prompts: held-out code"
        race_prompts, race_ks = (race_prompts[:1], FAST_KS[1:]) if fast else (race_prompts, RACE_KS)
    else:
        target, draft = random_pair(name, scratch / name)
        vocab = json.loads((target / "config.json").read_text())["vocab_size"]
        prompt = np.random.default_rng(0).integers(0, vocab, prompt_len).tolist()
        note = f"random weights; draft = the target's first {DRAFT_LAYERS} layers"
        race_prompts, race_ks = [], ()
    return Case(
        name=name,
        note=note,
        target=target,
        draft=draft,
        prompt=prompt,
        new_tokens=new_tokens or NEW_TOKENS[name],
        reps=reps or REPS[name],
        verify_ks=FAST_KS if fast else VERIFY_KS,
        race_prompts=race_prompts,
        race_ks=race_ks,
    )


def random_pair(shape, directory):
    """A random-weight GPT-2 of this shape in HF's layout, and a draft of its first layers.

    Random weights time the same as trained ones, but two unrelated random models never agree,
    and speculation would only ever be measured rejecting everything. So the target's later
    blocks write little into the residual stream (their output projections scaled by QUIET):
    its first blocks, the draft, then predict it most of the time, as a trained draft does.
    """
    target, draft = directory / "target", directory / "draft"
    checkpoints.save(gpt2.GPT2(gpt2.Config(**SHAPES[shape])), target)
    loaded = safe_load(str(target / "model.safetensors"))
    state = {k: v.to(Device.DEFAULT).numpy() for k, v in loaded.items()}  # no CPU compiler needed
    for key, value in state.items():
        if layer_of(key) >= DRAFT_LAYERS and key.endswith("c_proj.weight"):
            value *= QUIET
    write_weights(state, target)
    config = json.loads((target / "config.json").read_text()) | {"n_layer": DRAFT_LAYERS}
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weights({k: v for k, v in state.items() if layer_of(k) < DRAFT_LAYERS}, draft)
    return target, draft


def layer_of(key):
    """The block a weight belongs to (-1 for embeddings and the final norm)."""
    found = re.search(r"\.h\.(\d+)\.", key)
    return int(found.group(1)) if found else -1


def write_weights(state, directory):
    checkpoints.write_safetensors(state, directory / "model.safetensors", {"format": "pt"})
