"""The check runner behind every notebook's exercises: `grade` runs a learner's function through
a list of cases, one printed line per case. Each exercises_0N module holds its cases; a case
states what an answer must do with `expect(ok, message)`, as specmini states its input rules
with `require`. Every case is reported, and a message says what is wrong, never the answer.

The same checks grade the student edition under nbgrader: there a check that is not attempted
yet, or fails, raises, so that its cell scores zero. A learner sees that failure's message, not
a traceback into this module.

A quiz is checked question by question (`check_quiz`) against salted hashes of its answers. In the
self-study notebooks the hashes sit in the quiz's check cell; in the student edition they are
nbgrader's hidden tests, which only the autograder sees, and the cell's score is the number of
right answers.
"""

import contextlib
import hashlib
import os
import sys
from unittest import mock

import numpy as np

import specmini

CHECKERS = ("course.", "specmini.")  # the packages whose code may call specmini's real functions


class Wrong(Exception):
    """What is wrong with a learner's answer, said without the expected answer."""


def expect(ok, message):
    """A case's requirement: if `ok` is false, the case fails and says `message`."""
    if not ok:
        raise Wrong(message)


class CheckFailed(AssertionError):
    """A check cell's verdict: some case failed. Jupyter shows its message alone, not a
    traceback into the checks (nbgrader still sees an error, so the cell scores zero)."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class CalledSpecmini(AssertionError):
    """A learner's answer called the specmini function that the exercise asks them to write."""


def autograding():
    """True while nbgrader autogrades (or validates) a notebook."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


@contextlib.contextmanager
def traps(fn, forbid):
    """Replace the specmini functions named in `forbid` by traps, for calls from the learner's
    code only: the checks themselves (and specmini's own functions) still reach the real ones."""
    patches = []
    for name in forbid:
        real = getattr(specmini, name)

        def trap(*args, _real=real, _name=name, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith(CHECKERS):
                return _real(*args, **kwargs)
            raise CalledSpecmini(
                f"your answer calls specmini.{_name}: write it yourself, that is the exercise"
            )

        for module in [m for key, m in sys.modules.items() if key.split(".")[0] == "specmini"]:
            for alias, value in list(vars(module).items()):  # specmini.sampling.residual, ...
                if value is real:
                    patches.append(mock.patch.object(module, alias, trap))
        learner = getattr(fn, "__globals__", {})
        for alias, value in list(learner.items()):  # `from specmini import name` in the notebook
            if value is real:
                patches.append(mock.patch.dict(learner, {alias: trap}))
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield


def grade(name, fn, cases, strict=True, forbid=()):
    """Run each (title, case) on `fn`; a case passes unless an `expect` in it fails (or it
    returns a message saying what went wrong).

    With strict (a learner's check cell) a failure raises AssertionError and nothing is returned;
    otherwise returns True (all pass), False (some fail) or None (not attempted yet). A stub that
    still raises NotImplementedError counts as "not attempted yet", not as a failure, except
    under nbgrader, where it scores zero. `forbid` names the specmini functions that `fn` must
    not call (the ones the exercise asks for).
    """
    failed = 0
    for title, case in cases:
        try:
            with traps(fn, forbid):
                problem = case(fn)
        except NotImplementedError:
            print(
                f"… {name}: not attempted yet. Write it in the cell above, then re-run this cell."
            )
            if strict and autograding():
                raise CheckFailed(f"{name}: not attempted") from None
            return None
        except (Wrong, CalledSpecmini) as e:
            problem = str(e)
        except Exception as e:  # a crash is a failed case, and says why
            problem = f"raised {type(e).__name__}: {e}"
        print(f"✗ {title}: {problem}" if problem else f"✓ {title}")
        failed += problem is not None
    if failed and strict:
        raise CheckFailed(f"{name}: {failed} of {len(cases)} checks failed")
    if not failed:
        print(f"✓ {name}: all {len(cases)} checks pass")
    return None if strict else failed == 0


def as_array(x):
    """What a learner's function returned, as a float array to compare."""
    return np.asarray(x, dtype=np.float64)


# PBKDF2 rounds per hash: a check takes a fraction of a second, a search of every answer minutes
QUIZ_ROUNDS = 100_000


def quiz_hash(name, question, answer):
    """A quiz answer as a salted, slow hash, so that a check cell can hold the key without showing
    it. The salt is the quiz's name and the question's number: the same letter hashes differently
    in every question of every notebook. Letters are case-blind; numbers (or text that reads as
    one) are compared at 2 decimals."""
    text = str(answer).strip().lower()
    try:
        text = f"{float(text):.2f}"
    except ValueError:
        pass
    salt = f"specmini-quiz|{name}|{question}".encode()
    return hashlib.pbkdf2_hmac("sha256", text.encode(), salt, QUIZ_ROUNDS)[:8].hex()


def unanswered(value):
    return value is None or (isinstance(value, str) and not value.strip())


def check_quiz(name, answers, key):
    """Check a notebook's quiz, question by question: `answers` maps question numbers to a letter
    or a number (None: not answered yet), `key` maps them to `quiz_hash` hashes. Prints one line
    per question, naming what is right or wrong, never the answer.

    One point per question. Under nbgrader the cell's value is the number of right answers, which
    nbgrader reads as the cell's partial credit; an unanswered or wrong question scores 0. In
    self-study nothing is returned; a wrong answer raises, an unanswered one does not. `key` is
    None in the student edition, where the hashes are nbgrader's hidden tests: the cell then says
    which questions are answered, and the autograder, which has the key, checks them.
    """
    answers = answers if isinstance(answers, dict) else {}
    if key is None:
        given = [q for q in sorted(answers) if not unanswered(answers[q])]
        for question in sorted(answers):
            if question in given:
                print(f"· question {question}: answered")
            else:
                print(f"… question {question}: not answered yet")
        print(
            f"{name}: {len(given)} of {len(answers)} answered; "
            "the autograder checks them when your notebook is graded"
        )
        return 0.0 if os.environ.get("NBGRADER_EXECUTION") == "autograde" else None
    right, wrong, missing = [], [], []
    for question, want in key.items():
        given = answers.get(question)
        if unanswered(given):
            missing.append(question)
            print(f"… question {question}: not answered yet")
        elif quiz_hash(name, question, given) == want:
            right.append(question)
            print(f"✓ question {question}")
        else:
            wrong.append(question)
            print(f"✗ question {question}: not this one; read its section again")
    if len(right) == len(key):
        print(f"✓ {name}: all {len(key)} answers right")
    elif not right and not wrong:
        print(f"… {name}: no answer yet. Write yours in the cell above, then re-run this cell.")
    else:
        print(f"{name}: {len(right)} of {len(key)} right")
    if autograding():
        return float(len(right))
    if wrong:
        raise CheckFailed(f"{name}: {len(right)} of {len(key)} right")
    return None
