"""The check runner behind every notebook's exercises: `grade` runs a learner's function through
a list of cases, one printed line per case. Each exercises_0N module holds its cases.

One convention for a case: it states what an answer must do with `expect(ok, message)` (or raises
`Wrong`), as specmini states its input rules with `require`, and it returns nothing. A case that
returns a value is a bug in the checks (`grade` raises `CaseReturned`): a message returned instead
of raised would otherwise pass without a word. Every case is reported, and a message says what is
wrong, never the answer. A crash is said in the learner's terms: the line of their code that
raised, or what their function returned that the check could not read; never the checks' own
internals.

The same checks grade the student edition under nbgrader: there a check that is not attempted
yet, or fails, raises, so that its cell scores zero. A learner sees that failure's message, not
a traceback into this module.

A quiz is checked question by question (`check_quiz`) against salted hashes of its answers. In the
self-study notebooks the hashes sit in the quiz's check cell; in the student edition they are
nbgrader's hidden tests, which only the autograder sees, and the cell's score is the number of
right answers. An answer is read before it is hashed: "(c)", "c)", "C." and "option c" are the
letter c, "1.5" and 1.5 the number 1.50; a number written with a unit, a comma or a % sign gets a
message about its form, not its content.
"""

import contextlib
import hashlib
import importlib
import math
import numbers
import os
import re
import reprlib
import sys
import traceback
from collections.abc import Mapping
from unittest import mock

import numpy as np

CHECKERS = ("course.", "specmini.")  # the packages whose code may call the forbidden functions


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
    """A learner's answer called the function that the exercise asks them to write: specmini's,
    or the course's own answer (course.block_verification's, for one)."""


class CaseReturned(TypeError):
    """A case returned a value: a bug in the course's checks, not in the learner's answer."""


def autograding():
    """True while nbgrader autogrades (or validates) a notebook."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def forbidden(name):
    """(module, function name, what the learner would call) for an entry of `forbid`: a
    specmini function by its name ("residual"), another by its dotted path
    ("course.block_verification.prefix_weights")."""
    path, _, function = name.rpartition(".")
    module = importlib.import_module(path or "specmini")
    return module, function, f"{module.__name__}.{function}"


@contextlib.contextmanager
def traps(fn, forbid):
    """Replace the functions named in `forbid` (see `forbidden`) by traps, for calls from the
    learner's code only: the checks themselves (and specmini's and the course's own functions)
    still reach the real ones."""
    patches = []
    for name in forbid:
        home, function, called = forbidden(name)
        real = getattr(home, function)

        def trap(*args, _real=real, _called=called, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith(CHECKERS):
                return _real(*args, **kwargs)
            raise CalledSpecmini(
                f"your answer calls {_called}: write it yourself, that is the exercise"
            )

        package = home.__name__.split(".")[0]
        for module in [m for key, m in sys.modules.items() if key.split(".")[0] == package]:
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


def home_of(fn):
    """The globals of the learner's code: a function's, a partial's or a callable object's."""
    for candidate in (fn, getattr(fn, "func", None), type(fn).__call__):
        home = getattr(candidate, "__globals__", None)
        if home is not None:
            return home
    return None


def learner_line(error, fn):
    """(function, line) of the innermost frame of the learner's code that `error` went through,
    or None if it was raised without reaching their code."""
    home, found = home_of(fn), None
    for frame, line in traceback.walk_tb(error.__traceback__):
        if home is not None and frame.f_globals is home:
            found = (frame.f_code.co_name, line)
    return found


def described(value):
    """What a learner's function returned, in a few words: its own value, never the answer."""
    if value is None:
        return "None (is a `return` missing?)"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}" if value.size > 6 else f"array {value.tolist()}"
    text = repr(value)
    if len(text) <= 60:
        return f"{type(value).__name__} {text}"
    size = f" of length {len(value)}" if hasattr(value, "__len__") else ""
    return f"a {type(value).__name__}{size}"


class Recorded:
    """The learner's function, keeping what its last call returned: if the check then cannot
    read it, the message can say what it was."""

    def __init__(self, fn):
        self.fn, self.called, self.returned = fn, False, None

    def __call__(self, *args, **kwargs):
        self.called, self.returned = True, None
        self.returned = self.fn(*args, **kwargs)
        return self.returned


def crash_message(error, answer):
    """A crash during a case, in the learner's terms; a crash of the checks alone re-raises."""
    where = learner_line(error, answer.fn)
    said = f": {error}" if str(error) else ""
    if where is not None:
        function, line = where
        return f"your code raised {type(error).__name__} at line {line} of {function}{said}"
    if not answer.called:
        raise error  # the checks broke before the learner's code ran: a bug in the course
    return (
        f"could not read what your function returned ({described(answer.returned)}): "
        "see what the exercise asks it to return"
    )


def failure(case, fn, forbid=()):
    """The message `case` fails with on `fn`, or None if it passes. A stub's
    NotImplementedError goes through: that is "not attempted yet", not a failure."""
    answer = Recorded(fn)
    try:
        with traps(fn, forbid):
            returned = case(answer)
    except NotImplementedError:
        raise
    except (Wrong, CalledSpecmini) as e:
        return str(e)
    except Exception as e:  # a crash is a failed case, and says why
        return crash_message(e, answer)
    if returned is not None:
        raise CaseReturned(
            f"the case {getattr(case, '__qualname__', case)!r} returned {returned!r}: a case says "
            "what is wrong with expect(ok, message) or raise Wrong, and returns nothing"
        )
    return None


def grade(name, fn, cases, strict=True, forbid=()):
    """Run each (title, case) on `fn`; a case passes unless it raises (an `expect` that fails,
    `Wrong`, or a crash).

    With strict (a learner's check cell) a failure raises AssertionError and nothing is returned;
    otherwise returns True (all pass), False (some fail) or None (not attempted yet). A stub that
    still raises NotImplementedError counts as "not attempted yet", not as a failure, except
    under nbgrader, where it scores zero. `forbid` names the functions that `fn` must not call
    (the ones the exercise asks for): specmini's by name, another module's by its dotted path.
    """
    failed = 0
    for title, case in cases:
        try:
            problem = failure(case, fn, forbid)
        except NotImplementedError:
            print(
                f"… {name}: not attempted yet. Write it in the cell above, then re-run this cell."
            )
            if strict and autograding():
                raise CheckFailed(f"{name}: not attempted") from None
            return None
        print(f"✗ {title}: {problem}" if problem else f"✓ {title}")
        failed += problem is not None
    if failed and strict:
        raise CheckFailed(f"{name}: {failed} of {len(cases)} checks failed")
    if not failed:
        print(f"✓ {name}: all {len(cases)} checks pass")
    return None if strict else failed == 0


def as_array(x):
    """What a learner's function returned, as a float array to compare."""
    try:
        ok, array = x is not None, np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        ok = False
    expect(ok, f"returned {described(x)}, not an array of numbers")
    return array


def as_number(x, where):
    """What a learner's function returned, as one float; Wrong if it is not one number."""
    try:
        ok = np.ndim(x) == 0 and np.asarray(x).dtype.kind in "iuf"  # not a bool, str or None
    except ValueError:  # a ragged list
        ok = False
    expect(ok, f"{where}: returned {described(x)}, not a number")
    expect(math.isfinite(x), f"{where}: returned {float(x)}, not a finite number")
    return float(x)


# PBKDF2 rounds per hash: a check takes a fraction of a second, a search of every answer minutes
QUIZ_ROUNDS = 100_000

# A letter however it is wrapped: "c", "(c)", "c)", "c.", "[c]", "option c", "- c) its text"
LETTER = re.compile(
    r"[-*]?\s*(?:(?:option|answer)\s*:?)?\s*[(\[]?\s*([a-z])\s*(?:[)\].:](.*))?", re.S
)
FRACTION = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")
DECIMAL_COMMA = re.compile(r"([+-]?\d+),(\d+)")
NUMBER_IN = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?")


class Unreadable(ValueError):
    """A quiz answer in a form the check cannot read; the message says which form to use."""


def number_form(text):
    """What is wrong with the form of `text`, an answer that is neither a letter nor a number."""
    if m := FRACTION.fullmatch(text):
        if int(m[2]):
            value = int(m[1]) / int(m[2])
            return f"write the fraction as a decimal number, {value:.2f}, not {text}"
    if m := DECIMAL_COMMA.fullmatch(text):
        return f"write numbers with a decimal point, not a comma: {m[1]}.{m[2]}, not {text}"
    found = NUMBER_IN.search(text)
    if found is None:
        return "write the letter of one option (a, b, c, ...), or a number"
    number, rest = found[0], (text[: found.start()] + text[found.end() :]).strip()
    if rest == "%":
        return f"write it as a decimal, not a percentage: {float(number) / 100:g}, not {text}"
    if "," in text:
        return "write numbers with a decimal point and no comma"
    return f"write the number alone, {number}, without {rest!r}"


def quiz_answer(answer):
    """A quiz answer in its canonical form: a letter ("c") or a number to 2 decimals ("1.50").
    Raises Unreadable, saying which form to use, for anything else."""
    if isinstance(answer, numbers.Real) and not isinstance(answer, bool):
        value = float(answer)
    elif isinstance(answer, str):
        text = answer.strip().lower()
        if letter := LETTER.fullmatch(text):
            return letter[1]
        try:
            value = float(text)
        except ValueError:
            raise Unreadable(f"{answer.strip()!r}: {number_form(text)}") from None
    else:
        raise Unreadable(f"{answer!r}: write the letter of one option, or one number")
    if not math.isfinite(value):
        raise Unreadable(f"{answer!r}: write a finite number")
    return f"{value:.2f}"


def quiz_hash(name, question, answer):
    """A quiz answer as a salted, slow hash, so that a check cell can hold the key without showing
    it. The salt is the quiz's name and the question's number: the same letter hashes differently
    in every question of every notebook. The answer is hashed in its canonical form (quiz_answer):
    letters are case-blind and may be wrapped, numbers are compared at 2 decimals."""
    text = quiz_answer(answer)
    salt = f"specmini-quiz|{name}|{question}".encode()
    return hashlib.pbkdf2_hmac("sha256", text.encode(), salt, QUIZ_ROUNDS)[:8].hex()


def unanswered(value):
    return value is None or (isinstance(value, str) and not value.strip())


QUESTION = re.compile(r"\s*(?:q(?:uestion)?\s*)?(\d+)\s*", re.I)


def question_number(key):
    """A question's number from a key of the learner's dict (3, "3", 3.0, "q3"), or None."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int | np.integer):
        return int(key)
    if isinstance(key, float) and key.is_integer():
        return int(key)
    if isinstance(key, str) and (m := QUESTION.fullmatch(key)):
        return int(m[1])
    return None


def by_question(answers):
    """The learner's answers by question number, whatever their keys' type, and what could not
    be used: {key: why} for keys that are no question number, or a question answered twice."""
    found, problems = {}, {}
    for key, value in answers.items():
        number = question_number(key)
        if number is None:
            problems[key] = "not a question number: use 1, 2, 3, ..."
        elif number in found and not unanswered(value) and not unanswered(found[number]):
            problems[number] = f"answered twice (under {key!r} too): keep one"
        elif number not in found or unanswered(found[number]):
            found[number] = value
    return found, problems


def read_answers(answers, questions=None):
    """{question: canonical answer, None (not answered) or Unreadable}, and lines about keys
    that are not questions of this quiz."""
    if not isinstance(answers, Mapping):
        shape = "{1: ..., 2: ...}"
        return {}, [f"? quiz is {reprlib.repr(answers)}, not a dict {shape}"]
    found, problems = by_question(answers)
    questions = sorted(found) if questions is None else questions
    read, notes = {}, []
    for question in questions:
        if question in problems:
            read[question] = Unreadable(problems[question])
        elif unanswered(found.get(question)):
            read[question] = None
        else:
            try:
                read[question] = quiz_answer(found[question])
            except Unreadable as e:
                read[question] = e
    known = ", ".join(map(str, questions))
    for key in [k for k in found if k not in read] + [k for k in problems if k not in read]:
        why = problems.get(key, f"this quiz has questions {known} only")
        notes.append(f"? {key!r}: {why}")
    return read, notes


def check_quiz(name, answers, key):
    """Check a notebook's quiz, question by question: `answers` maps question numbers (3 or "3")
    to a letter or a number (None: not answered yet), `key` maps them to `quiz_hash` hashes.
    Prints one line per question, naming what is right or wrong, never the answer; an answer the
    check cannot read (a unit, a comma, a % sign) is told what form to use.

    One point per question. Under nbgrader the cell's value is the number of right answers, which
    nbgrader reads as the cell's partial credit; an unanswered, unreadable or wrong question
    scores 0. In self-study nothing is returned; a wrong or unreadable answer raises, an
    unanswered one does not. `key` is None in the student edition, where the hashes are
    nbgrader's hidden tests: the cell then says which questions are answered (and which cannot be
    read), and the autograder, which has the key, checks them.
    """
    if key is None:
        read, notes = read_answers(answers)
        for question, given in read.items():
            if isinstance(given, Unreadable):
                print(f"✗ question {question}: {given}")
            elif given is None:
                print(f"… question {question}: not answered yet")
            else:
                print(f"· question {question}: answered")
        if notes:
            print(*notes, sep="\n")
        readable = [q for q, given in read.items() if isinstance(given, str)]
        print(
            f"{name}: {len(readable)} of {len(read)} answered; "
            "the autograder checks them when your notebook is graded"
        )
        return 0.0 if os.environ.get("NBGRADER_EXECUTION") == "autograde" else None
    read, notes = read_answers(answers, sorted(key))
    right, wrong, unreadable = [], [], []
    for question, given in read.items():
        if isinstance(given, Unreadable):
            unreadable.append(question)
            print(f"✗ question {question}: {given}")
        elif given is None:
            print(f"… question {question}: not answered yet")
        elif quiz_hash(name, question, given) == key[question]:
            right.append(question)
            print(f"✓ question {question}")
        else:
            wrong.append(question)
            print(f"✗ question {question}: not this one; read its section again")
    if notes:
        print(*notes, sep="\n")
    if len(right) == len(key):
        print(f"✓ {name}: all {len(key)} answers right")
    elif not (right or wrong or unreadable):
        print(f"… {name}: no answer yet. Write yours in the cell above, then re-run this cell.")
    else:
        print(f"{name}: {len(right)} of {len(key)} right")
    if autograding():
        return float(len(right))
    if wrong or unreadable:
        raise CheckFailed(f"{name}: {len(right)} of {len(key)} right")
    return None
