"""Toy models, the metrics of a generation (and where two token lists differ), and the hardware
numbers that the notebooks share.

None of this is part of specmini's 100 lines: these are the props of the course, not the
algorithm. Every model here follows specmini's protocol `model(tokens, start) -> logits`.
"""

import string

import numpy as np

import specmini

VOCAB = ["A", "B", "C"]
TARGET_ABC = np.array([0.6, 0.3, 0.1])  # the running example of notebooks 01-03
DRAFT_ABC = np.array([0.4, 0.5, 0.1])

# The hardware and the models of notebooks 01 and 05, kept here once so that they cannot disagree.
BANDWIDTH = 3.35e12  # bytes per second: one H100 SXM's HBM3, from NVIDIA's datasheet
FLOPS = 989e12  # dense fp16/bf16 operations per second of one H100 SXM, from its datasheet
MODELS = {"GPT-2 small": 124e6, "GPT-2 XL": 1.558e9, "7B": 7e9, "Chinchilla 70B": 70e9}


def gpt2_parameters(n_layer, n_embd, vocab=50257, context=1024, n_inner=None):
    """GPT-2's parameter count from its shape, a plain formula (no tinygrad needed): per block
    the attention's q, k, v and output projections, the MLP (4x wide unless n_inner says
    otherwise) and two LayerNorms, with their biases; plus the token and position embeddings and
    the final LayerNorm (the output head is tied to the token embedding)."""
    d, inner = n_embd, n_inner or 4 * n_embd
    block = (4 * d * d + 4 * d) + (2 * d * inner + inner + d) + 4 * d
    return (vocab + context) * d + n_layer * block + 2 * d


# "plain": a round that drafted nothing (plain decoding, or a budget with room for one token only)
COLOURS = {"accepted": "#b7e4c7", "corrected": "#f6bd60", "bonus": "#a9d6f5", "plain": "#dddddd"}
KIND = {"correction": "corrected", "bonus": "bonus", "plain": "plain"}  # from Round.ended_with


class TableModel:
    """A bigram language model: the next token's logits depend only on the current token.

    `table[i]` holds the logits of the token that follows token i. It counts its calls, so a
    notebook can show how many forward passes a decoding method needed, and logs each call's
    (len(tokens), start), so a test can check how a decoder uses a model.
    """

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)
        self.calls = 0
        self.log = []

    @property
    def vocab_size(self):
        return self.table.shape[-1]

    def __call__(self, tokens, start):
        self.calls += 1
        self.log.append((len(tokens), start))
        return self.table[np.asarray(tokens[start:], dtype=int)]


def constant_model(probs):
    """A model that ignores its context and always predicts `probs` (like the A/B/C example)."""
    probs = np.asarray(probs, dtype=np.float64)
    # specmini refuses non-finite logits; -1e4 is finite yet gives probability exactly 0.
    logits = np.where(probs > 0, np.log(np.where(probs > 0, probs, 1.0)), -1e4)
    return TableModel(np.tile(logits, (len(probs), 1)))


def bigram_pair(vocab_size=6, quality=0.7, seed=0, spread=2.0):
    """A random target and a draft that imitates it; `quality` in [0, 1] is how well.

    quality 1 makes the draft identical to the target, quality 0 makes it unrelated.
    """
    rng = np.random.default_rng(seed)
    target = rng.normal(0.0, spread, (vocab_size, vocab_size))
    unrelated = rng.normal(0.0, spread, (vocab_size, vocab_size))
    return TableModel(target), TableModel(quality * target + (1 - quality) * unrelated)


def total_variation(a, b):
    """Half the L1 distance between two distributions: 0 when equal, 1 when disjoint. Either
    arrays over the same tokens, or dicts {outcome: probability} (a missing outcome has 0)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return 0.5 * sum(abs(a.get(key, 0.0) - b.get(key, 0.0)) for key in set(a) | set(b))
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


def accept_tests(generation):
    """(accept tests passed, accept tests run): drafts after a rejection are never tested."""
    passed = sum(r.accepted for r in generation.rounds)
    return passed, passed + sum(r.ended_with == "correction" for r in generation.rounds)


def pass_rate(generations):
    """The share of accept tests passed, over one Generation or several: what a run measures.

    Not alpha itself: alpha (specmini.acceptance_rate) is computed from the two models'
    distributions; the pass rate estimates it at the positions where accept tests ran."""
    generations = [generations] if isinstance(generations, specmini.Generation) else generations
    counts = [accept_tests(g) for g in generations]
    passed, run = sum(p for p, _ in counts), sum(r for _, r in counts)
    if run == 0:
        raise ValueError("no accept test ran (no drafts were tested): the pass rate is undefined")
    return passed / run


def token_kinds(generation):
    """Label each generated token "accepted", "corrected", "bonus" or "plain", round by round."""
    kinds = []
    for r in generation.rounds:
        kinds += ["accepted"] * r.accepted
        kinds.append(KIND[r.ended_with])
    return kinds[: len(generation.tokens)]  # a stop token may have cut the last round short


def first_difference(a, b):
    """The first index where two token lists differ (a shorter list differs where it ends); None
    when they are equal."""
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return None if i == len(a) == len(b) else i


def letter(token):
    """Toy tokens print as letters: 0 is A, 1 is B, ..."""
    return string.ascii_uppercase[token] if token < 26 else str(token)


def check(condition, message):
    """Assert `condition` and say so: every claim in the course ends in a visible check."""
    if not condition:
        raise AssertionError(f"✗ {message}")
    print(f"✓ {message}")


def context_alphas(target, draft, temperature):
    """One alpha per context of a bigram pair: its context is the last token, one row per table."""
    rows = [specmini.probabilities(m.table, temperature) for m in (target, draft)]
    return specmini.acceptance_rate(*rows)


def measure(target, draft, k, temperature, tokens=1200, seed=0):
    """Run `tokens` of speculative decoding on a bigram pair: the pass rate of its accept tests,
    tokens per target call, and the models' alpha averaged over the contexts the run visited."""
    target.calls = draft.calls = 0
    g = specmini.generate(target, draft, [0], tokens, k=k, temperature=temperature, seed=seed)
    contexts = ([0] + g.tokens)[:-1]
    mean_alpha = float(np.clip(context_alphas(target, draft, temperature)[contexts].mean(), 0, 1))
    mean_alpha = 1.0 if mean_alpha > 1 - 1e-12 else mean_alpha  # float noise of sum(min(t, t))
    return {
        "pass_rate": pass_rate(g),
        "tokens_per_call": len(g.tokens) / target.calls,
        "mean_alpha": mean_alpha,
    }
