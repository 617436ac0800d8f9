"""Small models for the tests, following specmini's protocol `model(tokens, start) -> logits`."""

import pathlib
import sys

import numpy as np

# The course's A/B/C pair and its context-free model live in the notebooks' toys.py, once.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "notebooks"))
from toys import DRAFT_ABC, TARGET_ABC, constant_model  # noqa: E402, F401


class Bigram:
    """Next-token logits depend on the current token only: row i of `table` follows token i."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)
        self.calls = []  # (len(tokens), start) of every call, to check how the core uses a model

    def __call__(self, tokens, start):
        self.calls.append((len(tokens), start))
        return self.table[np.asarray(tokens[start:], dtype=int)]


def random_pair(vocab, seed, spread=1.5, closeness=0.5):
    """A random bigram target and a draft that is a noisy copy of it."""
    rng = np.random.default_rng(seed)
    target = rng.normal(0, spread, (vocab, vocab))
    draft = closeness * target + (1 - closeness) * rng.normal(0, spread, (vocab, vocab))
    return Bigram(target), Bigram(draft)


def random_distributions(rng, n, vocab):
    """n random distributions over `vocab` tokens, some of them sparse or peaked."""
    probs = rng.dirichlet(np.full(vocab, 0.5), size=n)
    probs[rng.random((n, vocab)) < 0.2] = 0.0  # zeros, so supports differ now and then
    probs[probs.sum(-1) == 0, 0] = 1.0
    return probs / probs.sum(-1, keepdims=True)
