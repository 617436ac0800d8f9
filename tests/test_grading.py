"""The checks' contract (issues 29 and 30): one convention for a check case (it raises, it
returns nothing), quiz answers read however the learner wraps them, and every message in the
learner's terms: what their answer did, never the checks' internals, never the answer.

The course's own solutions are read from the notebooks' answer cells and graded by every check;
so are wrong answers of many kinds (None, a string, a ragged list, a crash in the learner's
code, ...), which must fail with a message that a learner can act on."""

import ast
import contextlib
import importlib.util
import io
import json
import pathlib
import re

import numpy as np
import pytest

import specmini
from course import block_verification as bv
from course.exercises import (
    exercises_01,
    exercises_02,
    exercises_02b,
    exercises_03,
    exercises_04,
    exercises_05,
    exercises_06,
    exercises_06b,
    exercises_07,
    grading,
)
from course.exercises.grading import CaseReturned, CheckFailed, check_quiz, quiz_hash
from course.toys import bigram_pair

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK_ROWS = (np.array([[0.3, 0.7], [0.5, 0.5]]), np.array([[0.6, 0.4]]))  # one draft, 2 tokens
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
EXERCISE_MODULES = sorted((ROOT / "course" / "exercises").glob("exercises_*.py"))

_spec = importlib.util.spec_from_file_location(
    "quiz_convert", ROOT / "teaching" / "quiz_convert.py"
)
quiz_convert = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quiz_convert)


def cells(path):
    return json.loads(path.read_text())["cells"]


def answers_of(stem):
    """The course's solutions in notebook `stem`: its answer cells run without the markers."""
    namespace = {"np": np, "specmini": specmini}
    for cell in cells(ROOT / "notebooks" / f"{stem}.ipynb"):
        nbgrader = cell["metadata"].get("nbgrader", {})
        if nbgrader.get("solution") and nbgrader.get("grade_id") != "quiz_answers":
            source = "".join(cell["source"])
            exec(
                source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), namespace
            )
    return namespace


@pytest.fixture(scope="module")
def twin():
    """A small numpy GPT-2 for notebook 07's tree check: the tiny random fixture's."""
    from course import checkpoints
    from course.numpy_gpt2 import NumpyGPT2

    return NumpyGPT2(checkpoints.load(ROOT / "tests" / "fixtures" / "tiny_gpt2"))


def toy_round_check(fn, strict=True):
    target, draft = bigram_pair(vocab_size=6, quality=0.5, seed=3)
    return exercises_06.check_greedy_round(fn, target, draft, [0, 1], k=3, strict=strict)


# (notebook, the function its answer cell defines, the check), every exercise of the course
EXERCISES = [
    ("01_toy_vocabulary", "sample_with_uniform", exercises_01.check_sample_with_uniform),
    ("01_toy_vocabulary", "score_drafts", exercises_01.check_score_drafts),
    ("02_rejection_sampling", "accept_probability", exercises_02.check_accept_probability),
    ("02_rejection_sampling", "speculative_accept", exercises_02.check_speculative_accept),
    ("02b_block_verification", "block_acceptance", exercises_02b.check_block_acceptance),
    ("03_residual_distribution", "my_residual", exercises_03.check_residual),
    ("03_residual_distribution", "my_step_distribution", exercises_03.check_step_distribution),
    ("04_k_drafts_and_bonus_token", "my_tokens_per_round", exercises_04.check_tokens_per_round),
    ("04_k_drafts_and_bonus_token", "speculative_round", exercises_04.check_speculative_round),
    ("05_speedup_and_best_k", "alpha_from_tokens", exercises_05.check_alpha_from_tokens),
    ("05_speedup_and_best_k", "choose_k", exercises_05.check_choose_k),
    ("06_gpt2_tinygrad", "verification_mask", exercises_06.check_verification_mask),
    ("06_gpt2_tinygrad", "greedy_round", toy_round_check),
    ("06b_where_it_pays", "round_speedup", exercises_06b.check_round_speedup),
    ("07_going_further", "tree_mask", None),  # needs the twin: see checker()
]
IDS = [name for _, name, _ in EXERCISES]


def checker(check, request):
    if check is not None:
        return check
    model = request.getfixturevalue("twin")
    return lambda fn, strict=True: exercises_07.check_tree_mask(
        fn, model, list(b"def f(x):"), strict=strict
    )


def graded(check, fn):
    """(verdict, printed lines) of a non-strict check."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        verdict = check(fn, strict=False)
    return verdict, out.getvalue().splitlines()


# --- one convention: a case raises, and returns nothing (issue 30.3) ---------------------------


def test_a_case_that_returns_a_value_is_a_bug_in_the_checks():
    def old_style(fn):
        return None if fn() == 1 else "should be 1"  # the message returned, not raised

    with pytest.raises(CaseReturned, match="returns nothing"):
        grading.grade("demo", lambda: 2, [("one", old_style)], strict=False)
    with pytest.raises(CaseReturned):
        grading.grade("demo", lambda: 2, [("one", lambda fn: True)])
    assert grading.grade("demo", lambda: 1, [("one", lambda fn: None)], strict=False) is True


def test_failure_is_a_cases_message_or_none():
    def is_one(fn):
        grading.expect(fn() == 1, "should be 1")

    def stub():
        raise NotImplementedError("your turn")

    assert grading.failure(is_one, lambda: 1) is None
    assert grading.failure(is_one, lambda: 2) == "should be 1"
    with pytest.raises(NotImplementedError):  # a stub is "not attempted yet", not a failure
        grading.failure(is_one, stub)


def case_functions(path):
    """The functions of an exercises module that are cases: named in a list of (title, case)
    pairs, or a `case` closure that a factory returns."""
    tree = ast.parse(path.read_text())
    named = {"case"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            title, case = node.elts
            if isinstance(title, ast.Constant | ast.JoinedStr) and isinstance(case, ast.Name):
                named.add(case.id)
    return [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in named]


def returns(function):
    """The `return <value>` statements of a function, not of the functions nested in it."""
    todo = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                yield node
        if not isinstance(node, ast.FunctionDef | ast.Lambda):
            todo += ast.iter_child_nodes(node)


def test_the_loops_read_every_notebook_and_exercises_module():
    """The files these tests loop over are found from the repository root, all of them: one
    notebook per quiz in the teachers' key, one exercises module per notebook, and an exercise of
    every notebook in EXERCISES (so that none passes by reading nothing)."""
    numbers = sorted(p.name.split("_")[0] for p in NOTEBOOKS)
    key = json.loads((ROOT / "teaching" / "quiz_answers.json").read_text())
    assert numbers and numbers == sorted(key), numbers
    assert sorted(p.stem.removeprefix("exercises_") for p in EXERCISE_MODULES) == numbers
    assert sorted({notebook.split("_")[0] for notebook, _, _ in EXERCISES}) == numbers


@pytest.mark.parametrize("path", EXERCISE_MODULES, ids=lambda p: p.stem)
def test_no_case_returns_a_value(path):
    """Read in the source: no case has a `return` with a value (a message returned instead of
    raised would pass without a word if grade did not stop it)."""
    cases = case_functions(path)
    assert cases, f"no case found in {path.name}"
    returning = [f"{case.name} line {node.lineno}" for case in cases for node in returns(case)]
    assert not returning, f"cases that return a value in {path.name}: {returning}"


@pytest.mark.parametrize(("notebook", "name", "check"), EXERCISES, ids=IDS)
def test_the_course_solutions_pass_every_case(notebook, name, check, request):
    """Every case of every check, on the notebooks' own solutions: each passes and returns
    None (grade raises CaseReturned otherwise)."""
    verdict, lines = graded(checker(check, request), answers_of(notebook)[name])
    assert verdict is True, "\n".join(lines)


def crashes(*args, **kwargs):
    return 1 / 0


# Wrong answers of many kinds, for any exercise: what a learner's function might return.
WRONG = {
    "None": lambda *a, **k: None,
    "a string": lambda *a, **k: "x",
    "a ragged list": lambda *a, **k: [[1], [1, 2]],
    "an empty list": lambda *a, **k: [],
    "NaN": lambda *a, **k: float("nan"),
    "a negative number": lambda *a, **k: -5,
    "a large number": lambda *a, **k: 7.5,
    "a dict": lambda *a, **k: {},
    "an array of the wrong shape": lambda *a, **k: np.zeros(7),
    "a list of three numbers": lambda *a, **k: [0.2, 0.3, 0.5],
    "a crash in the learner's code": crashes,
}
# What Python or numpy say when the checks' own code chokes, and specmini's input rules: a
# learner must never see them (issue 29.5).
INTERNALS = re.compile(
    r"zip\(\)|argument|NoneType|object is not|subscriptable|broadcast|out of bounds|"
    r"must lie in|inhomogeneous|Traceback|exercises_0|grading\.py|has no attribute|"
    r"only 0-dimensional|could not convert|invalid literal|unsupported operand|a ndarray"
)


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize(("notebook", "name", "check"), EXERCISES, ids=IDS)
def test_wrong_answers_fail_in_the_learners_terms(notebook, name, check, wrong, request):
    verdict, lines = graded(checker(check, request), WRONG[wrong])
    assert verdict is False, "\n".join(lines)
    failed = [line for line in lines if line.startswith("✗")]
    assert failed, lines
    for line in failed:
        assert not INTERNALS.search(line), line
        if wrong == "a crash in the learner's code":
            assert "your code raised ZeroDivisionError at line" in line and "crashes" in line


# --- exercises that say what they check (issue 29.5) ------------------------------------------


def messages(check, fn):
    verdict, lines = graded(check, fn)
    return verdict, "\n".join(line for line in lines if line.startswith("✗"))


def test_alpha_from_tokens_accepts_a_bisection_to_1e_6():
    def coarse(tokens_per_round, k):  # stops at an interval of 1e-6, returns its low end
        low, high = 0.0, 1.0
        while high - low > 1e-6:
            mid = (low + high) / 2
            if specmini.expected_tokens(mid, k) < tokens_per_round:
                low = mid
            else:
                high = mid
        return low

    def by_tokens(tokens_per_round, k):  # stops when the tokens match to 1e-6
        low, high = 0.0, 1.0
        while True:
            mid = (low + high) / 2
            off = specmini.expected_tokens(mid, k) - tokens_per_round
            if abs(off) < 1e-6 or high - low < 1e-12:
                return mid
            low, high = (mid, high) if off < 0 else (low, mid)

    assert graded(exercises_05.check_alpha_from_tokens, coarse)[0] is True
    assert graded(exercises_05.check_alpha_from_tokens, by_tokens)[0] is True
    verdict, said = messages(exercises_05.check_alpha_from_tokens, lambda t, k: coarse(t, k) + 3e-6)
    assert verdict is False and "by more than 1e-6" in said


def test_accept_probability_in_float32_passes():
    def in_float32(target_probs, draft_probs, token):
        target, draft = np.float32(target_probs[token]), np.float32(draft_probs[token])
        return np.float32(1.0) if draft == 0 else min(np.float32(1.0), target / draft)

    verdict, lines = graded(exercises_02.check_accept_probability, in_float32)
    assert verdict is True, "\n".join(lines)


def test_accept_probability_hints_fit_the_mistake():
    def swapped(target_probs, draft_probs, token):
        return min(1.0, draft_probs[token] / target_probs[token])

    def uncapped(target_probs, draft_probs, token):
        return target_probs[token] / draft_probs[token]

    def rejection(target_probs, draft_probs, token):
        return 1 - min(1.0, target_probs[token] / draft_probs[token])

    _, said = messages(exercises_02.check_accept_probability, swapped)
    assert "the ratio upside down" in said and "cap the ratio" not in said
    _, said = messages(exercises_02.check_accept_probability, uncapped)
    assert "cannot exceed 1: cap the ratio" in said and "upside down" not in said
    assert "a probability lies in [0, 1]" in said and "uniforms" not in said
    _, said = messages(exercises_02.check_accept_probability, rejection)
    assert "the probability of rejecting it" in said


def test_accept_probability_of_a_token_never_drafted_is_one():
    # min(1, target / 0) in numpy floats is 1 too (inf, or nan for 0 / 0, capped by min)
    verdict, lines = graded(
        exercises_02.check_accept_probability, lambda t, d, x: min(1.0, t[x] / d[x])
    )
    assert verdict is True, "\n".join(lines)
    _, said = messages(
        exercises_02.check_accept_probability,
        lambda t, d, x: 0.0 if d[x] == 0 else min(1.0, t[x] / d[x]),
    )
    assert "never drafted: return 1" in said


def test_speculative_accept_with_nothing_drafted_returns_an_empty_list():
    right = answers_of("02_rejection_sampling")["speculative_accept"]
    _, said = messages(exercises_02.check_speculative_accept, lambda *args: right(*args) or [0])
    assert "K = 0" in said


def test_block_acceptance_in_float32_passes_and_the_shortcut_gets_its_hint():
    right = answers_of("02b_block_verification")["block_acceptance"]

    def in_float32(drafts, target_rows, draft_rows):
        return np.float32(right(drafts, np.float32(target_rows), np.float32(draft_rows)))

    def weights_only(drafts, target_rows, draft_rows):  # notebook 02b's shortcut, h_i = p_i
        weights = [1.0]
        for i, x in enumerate(drafts):
            weights.append(min(1.0, weights[-1] * target_rows[i][x] / draft_rows[i][x]))
        return weights

    verdict, lines = graded(exercises_02b.check_block_acceptance, in_float32)
    assert verdict is True, "\n".join(lines)
    _, said = messages(exercises_02b.check_block_acceptance, weights_only)
    assert "those are the weights p_i alone" in said and "off by 0.021 in total variation" in said


def test_block_acceptance_refuses_the_courses_own_answer():
    def calls_the_course(drafts, target_rows, draft_rows):
        return bv.acceptance_probabilities(drafts, target_rows, draft_rows)

    verdict, said = messages(exercises_02b.check_block_acceptance, calls_the_course)
    assert verdict is False
    assert "your answer calls course.block_verification.acceptance_probabilities" in said
    assert bv.acceptance_probabilities([0], *BLOCK_ROWS).shape == (2,)  # untrapped again


def test_block_acceptance_with_nothing_drafted_is_h_0_alone():
    right = answers_of("02b_block_verification")["block_acceptance"]
    _, said = messages(
        exercises_02b.check_block_acceptance, lambda d, t, r: right(d, t, r) if d else [1.0, 1.0]
    )
    assert "K = 0" in said and "not K + 1 = 1 number, h_0" in said


def test_a_uniform_past_the_last_edge_gives_the_last_token_that_can_be_drawn():
    def last_piece(probs, u):  # the old solution: the last token, even of probability 0
        total = 0.0
        for token, p in enumerate(probs):
            total += p
            if u < total:
                return token
        return len(probs) - 1

    def searchsorted(probs, u):
        return int(np.searchsorted(np.cumsum(probs), u, side="right"))

    _, said = messages(exercises_01.check_sample_with_uniform, last_piece)
    assert "past the running total's last edge: got token 10" in said
    _, said = messages(exercises_01.check_sample_with_uniform, searchsorted)
    assert "is not in 0..9" in said


def test_tokens_per_round_of_another_length_is_said_so():
    def one_short(alpha, k):
        return answers_of("04_k_drafts_and_bonus_token")["my_tokens_per_round"](alpha, k)[:-1]

    _, said = messages(exercises_04.check_tokens_per_round, one_short)
    assert "expected k + 1 entries" in said and "zip" not in said


# --- quizzes that take the learner's own format (issue 29.4) -----------------------------------

RIGHT = {1: "c", 2: 2.25, 3: 0.75}
KEY = {q: quiz_hash("quiz 99", q, a) for q, a in RIGHT.items()}
WRAPPED = ["c", "C", " c ", "(c)", "c)", "c.", "c:", "[c]", "(C)", "option c", "Option (c)",
           "- c) the text of the option", "answer: c"]  # fmt: skip


def quiz_lines(capsys, answers, key=KEY):
    try:
        check_quiz("quiz 99", answers, key)
    except CheckFailed:
        pass
    return capsys.readouterr().out


@pytest.mark.parametrize("letter", WRAPPED)
def test_a_right_letter_counts_however_it_is_wrapped(letter, capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert check_quiz("quiz 99", {1: letter, 2: "2.25", 3: "0.750"}, KEY) == 3.0
    assert quiz_hash("quiz 99", 1, letter) == KEY[1]


@pytest.mark.parametrize("letter", ["b", "(b)", "b)", "option B", "d."])
def test_a_wrong_letter_is_still_wrong(letter, capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert check_quiz("quiz 99", {1: letter, 2: 2.25, 3: 0.75}, KEY) == 2.0
    assert "✗ question 1: not this one; read its section again" in capsys.readouterr().out


def test_string_keys_count_and_mixed_keys_do_not_crash(capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert check_quiz("quiz 99", {"1": "c", "2": "2.25", "3": 0.75}, KEY) == 3.0
    assert check_quiz("quiz 99", {1: "(c)", "2": 2.25, 3: None}, KEY) == 2.0
    out = capsys.readouterr().out
    assert "question 3: not answered yet" in out
    # the student edition's check cell (no key) counts them too, and orders them by number
    assert check_quiz("quiz 99", {"2": "b", 1: None, "3": "7"}, None) == 0.0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "… question 1: not answered yet",
        "· question 2: answered",
        "· question 3: answered",
    ]
    assert "2 of 3 answered" in out[-1]


def test_a_key_that_is_no_question_is_named(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    out = quiz_lines(capsys, {1: "c", 2: 2.25, 3: 0.75, 7: "a", "first": "b"})
    assert "? 7: this quiz has questions 1, 2, 3 only" in out
    assert "? 'first': not a question number" in out
    assert "all 3 answers right" in out
    out = quiz_lines(capsys, {1: "c", "1": "d", 2: 2.25, 3: 0.75})
    assert "✗ question 1: answered twice" in out


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("1.5x", "write the number alone, 1.5, without 'x'"),
        ("1.5 tokens", "write the number alone, 1.5, without 'tokens'"),
        ("1,5", "write numbers with a decimal point, not a comma"),
        ("75%", "write it as a decimal, not a percentage"),
        ("3/4", "write the fraction as a decimal number"),
        ("b and c", "write the letter of one option"),
        (True, "write the letter of one option, or one number"),
        ("nan", "a finite number"),
    ],
)
def test_a_number_in_another_form_gets_a_message_about_its_form(typed, said, capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(CheckFailed, match="2 of 3 right"):
        check_quiz("quiz 99", {1: "c", 2: typed, 3: 0.75}, KEY)
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("✗ question 2"))
    assert said in line and "not this one" not in line
    assert "2.25" not in out  # the message is about the form, never the answer
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert check_quiz("quiz 99", {1: "c", 2: typed, 3: 0.75}, KEY) == 2.0  # no point for it
    assert check_quiz("quiz 99", {1: "c", 2: typed, 3: 0.75}, None) == 0.0
    assert said in capsys.readouterr().out  # the edition's cell says it before grading


def test_the_canonical_form_keeps_every_key():
    """Answers are read, then hashed: the teachers' key still matches each notebook's hashes."""
    answers = json.loads((ROOT / "teaching" / "quiz_answers.json").read_text())
    for path in NOTEBOOKS:
        number = path.name.split("_")[0]  # "02", or "02b"
        check = next(
            "".join(c["source"])
            for c in cells(path)
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "quiz_check"
        )
        for question, answer in answers[number].items():
            assert quiz_hash(f"quiz {number}", int(question), answer) in check, (number, question)
            assert grading.quiz_answer(answer) == grading.quiz_answer(str(answer).upper())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_quiz_shape_in_every_notebook(path):
    """The same "## Quiz" cell opening, options printed one per line as "   - (a) ...", and the
    same answer cell (teaching/quiz_convert.py writes it)."""
    quizzes = [c for c in cells(path) if "".join(c["source"]).startswith("## Quiz\n")]
    assert len(quizzes) == 1, "one markdown cell opens with ## Quiz"
    text = "".join(quizzes[0]["source"])
    assert text.startswith(f"## Quiz\n\n{quiz_convert.QUIZ_PROMPT}\n\n1. ")
    for line in text.splitlines()[4:]:
        assert re.match(r"\d+\. |   \S", line), line
        option = re.match(r"   - \([a-h]\) (.*)", line)
        words = re.sub(r"\$[^$]*\$", "", option[1] if option else line)  # not "(c) -" in maths
        assert not re.search(r"(^|\s)(- )?\(?[a-h]\) ", words), (
            f"an option printed otherwise: {line}"
        )
        assert not (option and words.endswith((";", "."))), f"options end bare: {line}"
    answer = next(
        c
        for c in cells(path)
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "quiz_answers"
    )
    questions = re.findall(r"(\d+): None", "".join(answer["source"]))
    assert "".join(answer["source"]) == quiz_convert.answer_source(questions)
