"""Automatic checks for the exercise of notebook 02b: block verification's acceptance
probabilities, h_0 .. h_K (Sun et al., ICLR 2025).

`block_acceptance` is checked against the paper's two-token example worked by hand, against
specmini's test with one draft, with nothing drafted, against course.block_verification on random
blocks (to 1e-6, so float32 passes), and by the exactness of the rounds built on the learner's h,
enumerated exactly. An answer may not call course.block_verification's own functions, and a
failing case says which h_i are off without printing the expected values; the weights p_i alone
(the notebook's biased shortcut) get a hint of their own.
"""

import numpy as np

from course import block_verification
from course.exact import bigram_joint, chained_outcomes
from course.exercises.grading import Wrong, as_array, described, expect, grade
from course.toys import total_variation

# Exercise 1: block_acceptance(drafts, target_rows, draft_rows) -> h_0 .. h_K, block
# verification's acceptance probabilities (Sun et al. 2025), checked against the paper's example
# by hand, against course.block_verification, and by the exactness of the rounds built on them.
# Each h_i is compared to TOLERANCE, so float32 arithmetic passes.
TOLERANCE = 1e-6

AB_TARGET = np.tile([1 / 3, 2 / 3], (2, 1))  # the paper's example: row c follows token c
AB_DRAFT = np.tile([2 / 3, 1 / 3], (2, 1))
# h_0 .. h_2 of each block of the paper's example (tokens a = 0 and b = 1), worked by hand
AB_BLOCKS = {(0, 0): [1, 0, 1 / 4], (0, 1): [1, 0, 1], (1, 0): [1, 1, 1 / 2], (1, 1): [1, 1, 1]}
# The course's answer and its first half: an answer may not call them.
BLOCK_FORBID = tuple(
    f"course.block_verification.{name}" for name in ("acceptance_probabilities", "prefix_weights")
)
# Rounds built on h within TOLERANCE of the right one are within 4e-6 of the target's joint (in
# total variation); a biased rule, such as h_i = p_i, is off by 0.02.
EXACT_TV = 1e-4


def block_rows(block, target_table, draft_table, last=0):
    """The K + 1 target rows and K draft rows of a block drafted after token `last`."""
    contexts = [last, *block]
    return target_table[contexts], draft_table[contexts[:-1]]


def random_block(rng):
    vocab, k = int(rng.integers(2, 7)), int(rng.integers(1, 6))
    target_rows = rng.dirichlet(np.full(vocab, 0.5), size=k + 1)
    draft_rows = rng.dirichlet(np.full(vocab, 0.5), size=k)
    drafts = [int(rng.choice(vocab, p=row)) for row in draft_rows]  # drafts come from the draft
    return drafts, target_rows, draft_rows


def shown(values):
    """A learner's h, to 6 digits: a near miss does not read as the right value."""
    return "[" + ", ".join(f"{x:.6g}" for x in values) + "]"


def acceptance_of(fn, drafts, target_rows, draft_rows, where):
    """The learner's h_0 .. h_K of a block, as floats; Wrong unless they are K + 1 numbers in
    [0, 1]."""
    returned = fn(list(drafts), target_rows, draft_rows)
    got, k = as_array(returned), len(drafts)
    wanted = "1 number, h_0" if k == 0 else f"{k + 1} numbers h_0 .. h_{k}"
    expect(got.shape == (k + 1,), f"{where}: returned {described(returned)}, not K + 1 = {wanted}")
    expect(
        np.isfinite(got).all(),
        f"{where}: got {shown(got)}, numbers that are not finite (where p_i = 1, h_i = 1)",
    )
    outside = (got < -TOLERANCE) | (got > 1 + TOLERANCE)
    expect(not outside.any(), f"{where}: got {shown(got)}; each h_i is a probability, in [0, 1]")
    return got


def expect_h(got, want, weights, where):
    """Wrong, naming the h_i that are off, if `got` is not `want` to TOLERANCE; with a hint if
    `got` is the block's weights p_i (section 3's shortcut), never the right values."""
    off = [
        f"h_{i}" for i, (g, w) in enumerate(zip(got, want, strict=True)) if abs(g - w) > TOLERANCE
    ]
    if not off:
        return
    hint = ""
    if np.allclose(got, weights, atol=TOLERANCE, rtol=0):
        hint = "; those are the weights p_i alone, section 3's biased shortcut: h_i weighs m_i too"
    raise Wrong(f"{where}: {' and '.join(off)} off (got {shown(got)}){hint}")


def paper_example(fn):
    for block, want in AB_BLOCKS.items():
        rows = block_rows(block, AB_TARGET, AB_DRAFT)
        where = "block " + "".join("ab"[t] for t in block)
        got = acceptance_of(fn, block, *rows, where)
        expect_h(got, want, block_verification.prefix_weights(block, *rows), where)


def one_draft(fn):
    rng = np.random.default_rng(5)
    for _ in range(50):
        target_rows, draft_rows = rng.dirichlet(np.ones(4), size=2), rng.dirichlet(np.ones(4), 1)
        token = int(rng.choice(4, p=draft_rows[0]))
        where = f"one draft, target {target_rows[0, token]:.3g}, draft {draft_rows[0, token]:.3g}"
        got = acceptance_of(fn, [token], target_rows, draft_rows, where)
        want = min(1.0, target_rows[0, token] / draft_rows[0, token])
        expect(abs(got[0] - 1) <= TOLERANCE, f"{where}: h_0 = {got[0]:.6g}; h_0 is always 1")
        expect(
            abs(got[1] - want) <= TOLERANCE,
            f"{where}: h_1 = {got[1]:.6g}, not specmini's min(1, target / draft)",
        )


def empty_block(fn):
    target_rows, draft_rows = AB_TARGET[:1], np.empty((0, 2))
    got = acceptance_of(fn, [], target_rows, draft_rows, "K = 0 (no draft, rows (1, 2) and (0, 2))")
    expect(abs(got[0] - 1) <= TOLERANCE, f"K = 0: h_0 = {got[0]:.6g}; h_0 is always 1")


def random_blocks(fn, n=200):
    rng = np.random.default_rng(6)
    for i in range(n):
        drafts, target_rows, draft_rows = random_block(rng)
        where = f"case {i}, drafts {drafts}"
        got = acceptance_of(fn, drafts, target_rows, draft_rows, where)
        want = block_verification.acceptance_probabilities(drafts, target_rows, draft_rows)
        weights = block_verification.prefix_weights(drafts, target_rows, draft_rows)
        expect_h(got, want, weights, where)


def exact_rounds(fn):
    def probabilities(block, target_rows, draft_rows):  # K = 0 where one token is left to write
        where = f"block {list(block)}"
        return acceptance_of(fn, block, target_rows, draft_rows, where)

    rng = np.random.default_rng(7)
    for target_table, draft_table in rng.dirichlet(np.full(3, 0.5), size=(3, 2, 3)):
        rounds = block_verification.block_rounds(
            target_table, draft_table, 2, acceptance=probabilities
        )
        tv = total_variation(chained_outcomes(rounds, 0, 4), bigram_joint(target_table, 0, 4))
        expect(
            tv <= EXACT_TV,
            f"the rounds kept with your h are not the target's distribution: off by {tv:.2g} in"
            " total variation",
        )


BLOCK_CASES = [
    ("the paper's example: h_0, h_1, h_2 of the blocks aa, ab, ba, bb", paper_example),
    ("one draft: h_1 is specmini's min(1, target / draft)", one_draft),
    ("K = 0: nothing drafted, h_0 alone", empty_block),
    ("agrees with course.block_verification on 200 random blocks, to 1e-6", random_blocks),
    ("exact: rounds kept with your h give the target's joint over 4 tokens", exact_rounds),
]


def check_block_acceptance(fn, strict=True):
    return grade("block_acceptance", fn, BLOCK_CASES, strict, forbid=BLOCK_FORBID)
