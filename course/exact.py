"""Exact output distributions, computed by following every path, with no sampling at all.

The course proves "the output is the target's distribution" by enumeration (notebooks 03, 04
and 07, the checks of exercise 04.2, tests/test_accept.py). The pieces live here, once:

- `Script` stands in for the random generator: it follows a script of choices and takes the
  first option at every choice past the script's end; `enumerate_outcomes` runs a randomised
  program once per path, each with its exact probability;
- `round_outcomes` computes (without running anything) what one round of speculative sampling
  emits on bigram models, `chained_outcomes` chains rounds into the first tokens of a text, and
  `bigram_joint` is what they must equal: the target's own distribution over those tokens.
"""

import numpy as np

import specmini


class TooManyPaths(Exception):
    """A program took more paths than `enumerate_outcomes` was allowed to follow."""


class Script:
    """A stand-in for the random generator that follows a script of branch numbers.

    At each choice it takes the scripted branch (branch 0 past the script's end) and records
    the branch taken, how many there were and the path's probability so far (`weight`).
    `draw` and `coin` are the randomness of course.going_further's decoders.
    """

    def __init__(self, script=()):
        self.script, self.taken, self.widths, self.weight = tuple(script), [], [], 1.0

    def branch(self, weights):
        i = self.script[len(self.taken)] if len(self.taken) < len(self.script) else 0
        self.taken.append(i)
        self.widths.append(len(weights))
        self.weight *= weights[i]
        return i

    def choose(self, options):
        """One of the (value, probability) `options`; those of probability 0 never happen."""
        options = [(value, p) for value, p in options if p > 0]
        return options[self.branch([p for _, p in options])][0]

    def draw(self, probs, position=None, use=None):
        return self.choose(enumerate(probs))

    def coin(self, prob):
        return self.choose([(True, prob), (False, 1 - prob)])


def enumerate_outcomes(program, chance=Script, most=None):
    """Every result of a randomised `program(chance)` with its exact probability: the program
    runs once per path, each run taking the next untried branch, until every path has been
    followed to its end. `chance(script)` makes the stand-in for randomness (a Script or a
    subclass); with `most`, more than that many paths raise TooManyPaths."""
    results, scripts, runs = {}, [()], 0
    while scripts:
        script = scripts.pop()
        rng = chance(script)
        result = program(rng)
        for depth in range(len(script), len(rng.taken)):  # new branch points: their siblings
            scripts += [(*rng.taken[:depth], b) for b in range(1, rng.widths[depth])]
        results[result] = results.get(result, 0.0) + rng.weight
        runs += 1
        if most is not None and runs >= most and scripts:
            raise TooManyPaths(f"more than {most} paths")
    return results


def acceptance_probability(token, target, draft):
    """min(1, target / draft): how likely the accept test keeps a drafted `token`."""
    return min(1.0, target[token] / draft[token])


def round_outcomes(target_rows, draft_rows, last, k, accept=acceptance_probability):
    """Exact distribution of what one round emits on bigram models, {tokens: probability}.

    `target_rows[c]`, `draft_rows[c]`: next-token distributions after token c. The round drafts
    k tokens after `last`; each is kept with `accept(token, target, draft)`; the first rejection
    ends the round with a token of the residual (the correction path), k kept drafts with one
    more token of the target's (the bonus path). Outcomes of probability 0 are left out.
    """
    out = {}

    def add(tokens, prob):
        out[tokens] = out.get(tokens, 0.0) + prob

    def walk(prev, kept, prob):
        target, draft = np.asarray(target_rows[prev]), np.asarray(draft_rows[prev])
        if len(kept) == k:  # every draft passed: one more token from the target's last row
            for y in np.flatnonzero(target):
                add((*kept, int(y)), prob * target[y])
            return
        rejected = 0.0
        for x in np.flatnonzero(draft):
            passes = accept(int(x), target, draft)
            walk(int(x), (*kept, int(x)), prob * draft[x] * passes)
            rejected += draft[x] * (1 - passes)
        fix = specmini.residual(target, draft)
        for y in np.flatnonzero(fix):
            add((*kept, int(y)), prob * rejected * fix[y])

    walk(last, (), 1.0)
    return out


def chained_outcomes(round_outcomes, first, length):
    """Exact distribution of the first `length` tokens when rounds are chained from token
    `first`: `round_outcomes(text, remaining)` gives what a round emits after `text` (a tuple,
    `first` and the tokens so far) when `remaining` tokens are still to come, {tokens: p}."""
    done, frontier = {}, {(): 1.0}
    while frontier:
        seq, prob = frontier.popitem()
        for emitted, p in round_outcomes((first, *seq), length - len(seq)).items():
            new = (seq + tuple(emitted))[:length]
            bucket = done if len(new) == length else frontier
            bucket[new] = bucket.get(new, 0.0) + prob * p
    return done


def bigram_joint(target, first, length):
    """The target's own distribution over its next `length` tokens after `first`: `target` is a
    bigram TableModel (its logits at temperature 1) or a table of next-token probabilities."""
    table = specmini.probabilities(target.table) if hasattr(target, "table") else target
    table = np.asarray(table, dtype=np.float64)
    joint = {(): 1.0}
    for _ in range(length):
        joint = {
            seq + (y,): p * table[seq[-1] if seq else first][y]
            for seq, p in joint.items()
            for y in range(table.shape[1])
        }
    return joint
