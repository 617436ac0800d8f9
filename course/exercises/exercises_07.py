"""Automatic checks for the exercise of notebook 07 (going further): the attention mask of a
token tree.

`check_tree_mask` runs a learner's function through a list of cases with `grading.grade`: one
line per case, and a stub that still raises NotImplementedError counts as "not attempted yet".
"""

import numpy as np

from course.exercises.grading import expect, grade
from course.going_further import TokenTree

# Exercise: tree_mask(parents) -> bool array (n, n), True where node i may attend to node j.
# parents[i] is the node before node i, -1 for a node right after the text (the root's
# children); every parent comes before its children.

TREES = {
    "one node": [-1],
    "a chain of 4": [-1, 0, 1, 2],
    "three siblings": [-1, -1, -1],
    "2 children each, 2 levels": [-1, -1, 0, 0, 1, 1],
    "an uneven tree": [-1, 0, 0, 1, -1, 4, 3, 2],
}


def mask_of(fn, parents):
    """The learner's mask as a bool array; Wrong if its shape is not (n, n)."""
    got, n = np.asarray(fn(list(parents))), len(parents)
    expect(got.shape == (n, n), f"parents {list(parents)}: shape {got.shape}, expected {(n, n)}")
    return got.astype(bool)


def square_shape(fn):
    for name, parents in TREES.items():
        got = np.shape(fn(list(parents)))
        expect(got == (len(parents),) * 2, f"{name}: shape {got}, expected {(len(parents),) * 2}")


def chain_is_causal(fn):
    got = mask_of(fn, TREES["a chain of 4"])
    ok = np.array_equal(got, np.tril(np.ones((4, 4), bool)))
    expect(ok, "a chain (no branching) must give the causal mask of notebook 06")


def sees_itself(fn):
    for name, parents in TREES.items():
        expect(np.diag(mask_of(fn, parents)).all(), f"{name}: some node cannot see itself")


def siblings_apart(fn):
    for name, parents in TREES.items():
        mask = mask_of(fn, parents)
        for i, a in enumerate(parents):
            for j, b in enumerate(parents):
                expect(
                    i == j or a != b or not mask[i, j],
                    f"{name}: node {i} sees node {j}, another child of the same parent",
                )


def parent_plus_itself(fn):
    """Row i must be the parent's row with node i added (a root child: node i alone)."""
    for name, parents in TREES.items():
        mask = mask_of(fn, parents)
        for i, parent in enumerate(parents):
            want = mask[parent].copy() if parent >= 0 else np.zeros(len(parents), bool)
            want[i] = True
            expect(
                np.array_equal(mask[i], want),
                f"{name}: node {i} does not see exactly what its parent sees, plus itself",
            )


def one_pass_per_branch(model, prefix):
    """The numpy GPT-2: one tree pass with the learner's mask against one pass per branch."""

    def case(fn):
        for name, parents in TREES.items():
            tree = TokenTree()
            for i, parent in enumerate(parents):
                tree.add(ord("abcdefgh"[i]), parent)  # any tokens will do
            rows = model.tree_logits(prefix, tree, mask_of(fn, parents))
            for branch in tree.branches():
                tokens = [tree.tokens[i] for i in branch]
                alone = model(list(prefix) + tokens, len(prefix) - 1)  # the root's row, then each
                expect(
                    np.allclose(rows[[0] + [i + 1 for i in branch]], alone, atol=1e-9),
                    f"{name}: the branch through nodes {branch} gets other rows",
                )

    return case


def check_tree_mask(fn, model, prefix, strict=True):
    cases = [
        ("shape (n, n)", square_shape),
        ("a chain is the causal mask", chain_is_causal),
        ("every node sees itself", sees_itself),
        ("siblings never see each other", siblings_apart),
        ("each node sees what its parent sees, plus itself", parent_plus_itself),
        ("the offline target: one tree pass = one pass per branch",
         one_pass_per_branch(model, prefix)),
    ]  # fmt: skip
    return grade("tree_mask", fn, cases, strict)
