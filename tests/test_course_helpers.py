"""The course's code has one home per algorithm: the A/B/C pair and the toy models in toys.py,
the check runner in exercises/grading.py, exact enumeration in exact.py, timing in timing.py,
the cache's common prefix in gpt2.py. A second copy drifts; these tests fail when one comes
back. And notebooks/ holds notebooks only, no file edits sys.path, and the colours of
display.show_rounds: a plain round is not a bonus."""

import ast
import json
import pathlib
import re

import pytest

import specmini
from course.display import show_rounds
from course.toys import bigram_pair, token_kinds

# Every path comes from the repository root, never from the working directory: a test run from
# elsewhere would find no file and pass having read nothing.
ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOK_COUNT = 9  # 01 to 07, with 02b and 06b: each has its exercises module too
# every module of the course's package, the benchmark and the tests
MODULES = [
    *sorted((ROOT / "course").rglob("*.py")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
]


def notebooks():
    """Every notebook of the course, all of them: a test that reads them cannot pass reading
    none, or fewer than there are."""
    found = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(found) == NOTEBOOK_COUNT, [p.name for p in found]
    return found


def top_level_names(path):
    """Names of the functions, classes and variables a module defines at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
    return names


def homes(predicate):
    return [p.name for p in MODULES if p.exists() and any(map(predicate, top_level_names(p)))]


def one_home(names, home):
    """Every one of `names` is defined at the top level of `home` and of no other module. Each
    must be defined somewhere: a name that no module defines any more would pass unnoticed."""
    gone = [name for name in names if not homes(lambda n, name=name: n == name)]
    assert not gone, f"no module defines {gone}: check the names that exist"
    found = homes(lambda n: n in names)
    assert found == [home], f"{names}: {found}"


def written_in(pattern):
    """The modules whose text matches a regular expression (an algorithm's tell-tale line)."""
    return [p.name for p in MODULES if p.exists() and re.search(pattern, p.read_text())]


def test_the_check_runner_lives_in_grading():
    one_home(("grade", "expect", "Wrong", "as_array", "as_number"), "grading.py")
    exercises = sorted((ROOT / "course" / "exercises").glob("exercises_*.py"))
    assert len(exercises) == NOTEBOOK_COUNT, [p.name for p in exercises]
    for path in exercises:
        assert "exercises_01 import" not in path.read_text(), path.name


def test_each_shared_algorithm_has_one_home():
    # exact enumeration and chained rounds; total variation; timing loops and the CPU's name;
    # the cache's longest common prefix; parameter counts; the acceptance rate
    one_home(("enumerate_outcomes", "Script"), "exact.py")
    one_home(("chained_outcomes", "round_outcomes", "bigram_joint"), "exact.py")
    one_home(("total_variation",), "toys.py")
    one_home(("race", "fastest", "seconds"), "timing.py")
    one_home(("cpu_model", "machine_name"), "timing.py")
    one_home(("common_prefix",), "gpt2.py")
    one_home(("parameter_count",), "checkpoints.py")
    one_home(("accept_tests",), "toys.py")
    # tinygrad's internals (course/speed/), and what imports IPython and ipywidgets
    one_home(("read_out", "kernels", "capture_at_once", "downloads_dir"), "runtime.py")
    one_home(("compiling",), "kernel_rule.py")
    one_home(("show_rounds", "slider_panel"), "display.py")
    counting = "sum(r.ended_with == " + '"correction"'  # accept tests run: counted once
    assert [p.name for p in MODULES if counting in p.read_text()] == ["toys.py"]
    # where two token lists first differ: by name, and the loop over the pairs or the positions
    one_home(("first_difference",), "toys.py")
    pairs = r"enumerate\(zip\([^()]*\)\)\s+if\s+\w+\s*!=\s*\w+"
    positions = r"for (\w+) in range\([^()]*\)\s+if\s+\w+\[\1\]\s*!=\s*\w+\[\1\]"
    assert written_in(f"{pairs}|{positions}") == ["toys.py"]
    # notebook 05's refined speed-up and the K it picks: the checks hold answers to these
    one_home(("refined_speedup", "choose_k"), "speedup.py")
    assert written_in(r"expected_tokens\([^()]*\)\s*/\s*\(") == ["speedup.py"]
    # a timing's min, median and samples (the race, the benchmark's report)
    one_home(("min_median",), "timing.py")
    assert written_in(r"(statistics|np|numpy)\.median\(") == ["timing.py"]


def test_the_longest_first_list_names_files_that_exist():
    from conftest import LONGEST_FIRST  # tests/conftest.py: the order pytest-xdist takes files in

    assert not [p for p in LONGEST_FIRST if not (ROOT / p).is_file()], LONGEST_FIRST


def test_notebooks_holds_notebooks_and_nothing_edits_sys_path():
    assert notebooks() and not list((ROOT / "notebooks").glob("*.py"))
    folders = ("course", "benchmarks", "tests", "scripts", "teaching", "specmini")
    read = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    assert pathlib.Path(__file__).resolve() in read  # the search reads this folder too
    edits = [
        p.relative_to(ROOT).as_posix()
        for p in read
        if "sys.path." in p.read_text() and p.name != "test_course_helpers.py"
    ]
    assert not edits, edits


# Size budgets, each with its reason. Where the budget is about reading, it leaves room above
# today's largest (in brackets), so that a fix need not cut elsewhere; the budget, not today's
# size, is what a change must keep to.
# A notebook is one sitting: TEACHING.md's sessions give a notebook about 45 minutes in class, a
# learner alone an hour or so; 60 cells is about a cell a minute, running the code included.
MAX_CELLS = 60  # (07: 55 cells)


def test_each_notebook_reads_in_one_sitting():
    counts = {path.name: len(json.loads(path.read_text())["cells"]) for path in notebooks()}
    too_long = {name: n for name, n in counts.items() if n > MAX_CELLS}
    assert not too_long, f"more than {MAX_CELLS} cells: {too_long}"


# A notebook is a lesson, not a log (issue 45): prose a learner reads in one sitting, no cell
# longer than a page or two, and no run history (dates, times of day, earlier runs, commits).
# 5,500 words of prose is about 25 minutes of reading at 220 words a minute, half a sitting: the
# other half runs and reads the code (07: 4,998 words).
MAX_WORDS = 5500
# Two pages at about 450 words a page: a longer cell is two sections (04: a cell of 657 words).
MAX_CELL_WORDS = 900
# The README is the front door for learners and teachers: about 15 minutes of reading (ten-odd
# words a line); the history lives in benchmarks/README.md, the details in course/README.md and
# TEACHING.md (README.md: 250 lines).
README_LINES = 250
HISTORY = re.compile(
    r"\b20\d\d-\d\d-\d\d\b|\bUTC\b|\bthe run before\b|\bearlier runs?\b|\bstored run\b"
    r"|\bcommit [0-9a-f]{7}|\b[0-9a-f]{7,40}\b(?=.*\bcommit)|\bresults/[\w.-]+\.json",
    re.IGNORECASE,
)


def prose(path):
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines, over {README_LINES}"


def test_each_notebook_is_a_lesson_not_a_log():
    for path in notebooks():
        cells = prose(path)
        words = [len(text.split()) for text in cells]
        assert sum(words) <= MAX_WORDS, f"{path.name}: {sum(words)} words of prose"
        assert max(words) <= MAX_CELL_WORDS, f"{path.name}: a cell of {max(words)} words"
        history = [m.group(0) for text in cells for m in HISTORY.finditer(text)]
        assert not history, f"{path.name}: run history in its prose: {history}"


def test_the_run_history_pattern_finds_run_history():
    logs = [
        "the run before was faster",
        "measured 2026-11-26, 17:20 UTC",
        "see results/cpu-amd-epyc-2026-11-26.json",
        "an earlier run gave 1.2x",
    ]
    for text in logs:
        assert HISTORY.search(text), text
    assert not HISTORY.search("a pass over five tokens costs about one step here")


def test_notebooks_import_course_before_tinygrad():
    # course.gpt2 (which course.checkpoints imports) starts tinygrad on the course's CPU runtime,
    # which tinygrad reads once, when it is first imported
    for path in notebooks():
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        first = re.search(r"^(from|import) (course|tinygrad)\b", code, re.M)
        assert first is None or first.group(2) == "course", path.name


def test_plot_helpers_return_their_figure_and_one_helper_saves():
    saving = [p.name for p in (ROOT / "course").rglob("*.py") if ".savefig(" in p.read_text()]
    assert saving == ["figures.py"], saving
    showing = [p.name for p in (ROOT / "course" / "lessons").glob("*.py")
               if "plt.show()" in p.read_text()]  # fmt: skip
    assert showing == ["lesson_05.py"]  # its live views run inside a slider's output


def test_one_constant_model():
    assert homes(lambda name: name.startswith("constant")) == ["toys.py"]


def test_the_abc_pair_is_written_down_once():
    pattern = re.compile(r"0\.6,\s*0\.3,\s*0\.1\]|0\.4,\s*0\.5,\s*0\.1\]")
    written = [p.name for p in MODULES if p.exists() and pattern.search(p.read_text())]
    assert written == ["toys.py"]


def test_plain_rounds_are_coloured_plain_not_bonus():
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    plain = specmini.autoregressive(target, [0], 5, seed=0)
    assert token_kinds(plain) == ["plain"] * 5
    html = show_rounds(plain).data
    assert html.count('class="tok-plain"') == 5 and "tok-bonus" not in html
    spec = specmini.generate(target, draft, [0], 6, k=4, seed=0)  # the last round drafts nothing
    assert token_kinds(spec)[-1] == "plain"
    legend = show_rounds(specmini.generate(target, draft, [0], 5, k=4, seed=0)).data.split("<div>")[
        -1
    ]
    assert "plain" not in legend, "the legend shows plain only when a plain token is there"


def test_a_failed_check_says_its_message_not_a_traceback(capsys):
    import pytest

    from course.exercises.grading import CheckFailed, expect, grade

    def is_one(fn):
        expect(fn() == 1, "should be 1")

    assert grade("demo", lambda: 1, [("one", is_one)], strict=False) is True
    with pytest.raises(CheckFailed) as failed:
        grade("demo", lambda: 2, [("one", is_one), ("still one", is_one)])
    assert "✗ one: should be 1" in capsys.readouterr().out  # every case reported
    assert failed.value._render_traceback_() == ["CheckFailed: demo: 2 of 2 checks failed"]


def test_a_quiz_is_checked_question_by_question(capsys, monkeypatch):
    """check_quiz (issue 23): one line per question, never the answer; salted hashes; in
    self-study unanswered questions do not raise and wrong ones do; under nbgrader the value is
    the number of right answers (partial credit); without the key it only counts answers."""
    import pytest

    from course.exercises.grading import CheckFailed, check_quiz, quiz_hash

    # the same answer hashes differently in every question and every notebook
    hashes = {quiz_hash(f"quiz 0{n}", q, "b") for n in range(1, 8) for q in range(1, 6)}
    assert len(hashes) == 35
    assert quiz_hash("quiz 01", 1, " B ") == quiz_hash("quiz 01", 1, "b")
    assert quiz_hash("quiz 01", 2, 7.76) == quiz_hash("quiz 01", 2, "7.760")
    assert quiz_hash("quiz 01", 2, 7.76) != quiz_hash("quiz 01", 2, 7.77)

    right = {1: "b", 2: 0.4, 3: 2}
    key = {q: quiz_hash("quiz 99", q, a) for q, a in right.items()}
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert check_quiz("quiz 99", right, key) is None
    assert capsys.readouterr().out.splitlines()[-1] == "✓ quiz 99: all 3 answers right"
    assert check_quiz("quiz 99", {1: None, 2: None, 3: None}, key) is None  # self-study: no raise
    assert capsys.readouterr().out.count("not answered yet") == 3
    with pytest.raises(CheckFailed, match="1 of 3 right"):
        check_quiz("quiz 99", {1: "B", 2: 0.5, 3: None}, key)
    out = capsys.readouterr().out
    assert "✓ question 1" in out and "✗ question 2" in out and "question 3: not answered" in out
    assert "0.4" not in out  # the expected answer is never shown

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert check_quiz("quiz 99", right, key) == 3.0
    assert check_quiz("quiz 99", {1: "b", 2: 0.5}, key) == 1.0  # wrong and missing score 0
    assert check_quiz("quiz 99", {1: None, 2: None, 3: None}, key) == 0.0
    assert check_quiz("quiz 98", right, key) == 0.0  # another quiz's salt: nothing matches
    # the student edition's check cell without its hidden tests: answers counted, not checked
    assert check_quiz("quiz 99", {1: "b", 2: None, 3: None}, None) == 0.0
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    assert check_quiz("quiz 99", {1: "b", 2: None, 3: None}, None) is None
    assert "1 of 3 answered" in capsys.readouterr().out


def test_outputs_that_vary_are_marked_one_way_with_the_reason():
    """A cell whose output depends on the clock, the machine or tinygrad's runtime is marked for
    nbval on its first line, and says why on its second (README, "Stored outputs")."""
    varying = ("timing.", "machine_name", "runtime.name", "step_costs", "sliders(")
    for path in notebooks():
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines() or [""]
            marked = lines[0] == "# NBVAL_IGNORE_OUTPUT"
            if marked:
                assert len(lines) > 1 and lines[1].startswith(
                    "# Output varies by machine and run:"
                ), f"{path.name} cell {i}: say why its output varies on the second line"
            if any(word in line for line in lines for word in varying):
                assert marked, f"{path.name} cell {i} prints what varies: mark it for nbval"


def test_the_model_the_metrics_and_the_benchmark_load_no_widget_and_no_grader():
    """Only course.display (and the lessons that show things) import IPython and ipywidgets; the
    model, its files, the metrics and the benchmark load neither, nor the exercises' grader."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import course.gpt2, course.checkpoints, course.speedup, course.toys, course.timing\n"
        "import benchmarks.decode\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'IPython', 'ipywidgets'})\n"
        "bad += sorted(m for m in sys.modules if m.startswith('course.exercises'))\n"
        "print(bad)"
    )
    run = [sys.executable, "-c", code]  # from the root, where `benchmarks` can be imported
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_refined_formula_charges_the_time_outside_the_models():
    from course import speedup

    tokens = specmini.expected_tokens(0.8, 4)  # per round; the round costs 4 c + v_4 = 1.6 steps
    base = speedup.refined_speedup(0.8, 4, 0.1, 1.2)
    assert base == pytest.approx(tokens / 1.6)
    assert speedup.refined_speedup(0.8, 4, 0.1, 1.2, overhead=0.4) == pytest.approx(tokens / 2.0)
    with_plain = speedup.refined_speedup(0.8, 4, 0.1, 1.2, overhead=0.4, plain_overhead=0.1)
    assert with_plain == pytest.approx(tokens / 2.0 * 1.1)
    assert speedup.choose_k(0.8, 0.1, {1: 1.0, 4: 1.2})[0] == 4
    assert speedup.choose_k(0.8, 0.1, {1: 1.0, 4: 1.2}, overhead=5.0) == (0, 1.0)


class Clock:
    """A clock that moves only when slept on: the timing tests know every duration exactly,
    however loaded the machine (real sleeps wake late under load, and a late wake-up outside
    the models once failed a test in CI). The course's own Python takes no time on it."""

    def __init__(self):
        self.now, self.slept = 0.0, []

    def perf_counter(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept.append(seconds)


@pytest.fixture
def clock(monkeypatch):
    import time

    fake = Clock()
    monkeypatch.setattr(time, "perf_counter", fake.perf_counter)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    return fake


class Sleepy:
    """A constant model that sleeps `ms` per call and `per_row` more for each new row past the
    first: a model whose cost the timing tests know."""

    def __init__(self, probs, ms, per_row=0.0):
        from course.toys import constant_model

        self.model, self.ms, self.per_row = constant_model(probs), ms, per_row

    def __call__(self, tokens, start):
        import time

        time.sleep((self.ms + self.per_row * (len(tokens) - start - 1)) / 1000)
        return self.model(tokens, start)

    def reset(self):
        pass


def test_time_outside_counts_what_is_not_inside_the_models(clock):
    import time

    from course import speedup
    from course.toys import DRAFT_ABC, TARGET_ABC

    def decode(target, draft):  # 6 ms outside the models per round
        g = specmini.generate(target, draft, [0], 12, k=2, temperature=1.0, seed=0)
        time.sleep(0.006 * len(g.rounds))
        return g

    models = Sleepy(TARGET_ABC, 2), Sleepy(DRAFT_ABC, 2)  # 2 ms inside every call
    ms, g = speedup.time_outside(decode, *models)
    assert len(g.tokens) == 12
    assert ms == pytest.approx(6.0), ms  # the models' 2 ms per call are not counted
    assert clock.now > 0.006 * len(g.rounds)  # and they were slept


def test_costs_in_race_are_what_the_race_paid(clock):
    # models that sleep a known time per call, runs that sleep a known time per target call
    # outside the models: the costs come back in the target alone's steps
    import time

    from course import speedup, timing
    from course.toys import DRAFT_ABC, TARGET_ABC

    alone = speedup.Stopwatch(Sleepy(TARGET_ABC, 8, 4))  # the target alone's calls
    target = speedup.Stopwatch(Sleepy(TARGET_ABC, 8, 4))  # the same target's, speculating
    draft = speedup.Stopwatch(Sleepy(DRAFT_ABC, 3))

    def plain(prompt, seed):  # 6 ms outside per token
        g = specmini.autoregressive(alone, prompt, 7, seed=seed)
        time.sleep(0.006 * len(g.rounds))
        return g

    def spec(prompt, seed):  # 12 ms outside per round
        g = specmini.generate(target, draft, prompt, 7, k=2, seed=seed)
        time.sleep(0.012 * len(g.rounds))
        return g

    runs = {"target alone": plain, "speculative": spec}
    times, _ = timing.race(runs, [[0], [1]], (alone, target, draft), reps=2)
    assert alone.count() == 2 * 2 * 7  # prompts x repetitions x tokens: the warm-up forgotten
    assert times["target alone"]["seconds"] == pytest.approx(28 * 0.014)  # 8 in, 6 out per token
    paid = speedup.costs_in_race(alone, target, draft, times, 2)
    assert paid["step_ms"] == pytest.approx(8)
    assert paid["c"] == pytest.approx(3 / 8)
    assert paid["v"] == pytest.approx(16 / 8)  # 3 rows: 8 + 2 x 4 ms
    assert paid["o_k"] == pytest.approx(12 / 8)
    assert paid["o_0"] == pytest.approx(6 / 8)
    # the alpha at which the refined formula reaches a speed-up, and where none can
    alpha = speedup.alpha_needed(1.5, 2, 0.1, 1.2, 0.2, 0.05)
    assert speedup.refined_speedup(alpha, 2, 0.1, 1.2, 0.2, 0.05) == pytest.approx(1.5)
    assert speedup.alpha_needed(3.5, 2, 0.1, 1.2) is None  # 3 tokens a round at most
    assert speedup.alpha_needed(0.5, 2, 0.1, 1.2) == 0.0  # reached even when nothing passes
    with pytest.raises(ValueError, match="returning 4 row"):  # no pass over K + 1 = 4 tokens
        speedup.costs_in_race(alone, target, draft, times, 3)


def test_the_race_pauses_before_every_timed_run_and_not_inside_it(clock):
    # PyTorch's threads spin on the cores after their last call: a run right after one of its
    # runs was slowed, so every run starts after a pause, which its time does not include
    from course import timing
    from course.toys import TARGET_ABC, constant_model

    model = constant_model(TARGET_ABC)  # which never sleeps: every sleep is the race's
    runs = {
        name: lambda prompt, seed: specmini.autoregressive(model, prompt, 4, seed=seed)
        for name in ("a", "b")
    }
    per_token, _ = timing.race(runs, [[0], [1], [2]], [], reps=2)
    assert clock.slept == [timing.SETTLE_S] * (2 * 3 * 2)  # runs x prompts x repetitions
    assert clock.now == pytest.approx(timing.SETTLE_S * 12)  # the pauses passed on the clock
    assert all(t["median"] == 0 for t in per_token.values())  # and none inside a timed run


def defined_names(source):
    """The names a cell binds: assignments, imports, functions, classes, loop targets."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def graded_names_after_compile(cells):
    """Names a graded check cell reads that a cell binds only after its first `.compile()` call:
    under nbgrader a cell that runs out of time stops there, and such a check would fail."""
    late = []
    graded = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or ".compile()" not in source:
            continue
        cut = source.index(".compile()")
        after = defined_names(source) - defined_names(source[: source.rfind("\n", 0, cut) + 1])
        for check_cell in graded:
            tree = ast.parse("".join(check_cell["source"]))
            read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            late += sorted(read & after)
    return late


def test_graded_checks_need_nothing_built_after_a_compile():
    """Issue 43: the compiled calls come last in their cell, so that a cold, busy autograder that
    runs out of time while compiling still has every name a graded check needs."""
    for path in notebooks():
        late = graded_names_after_compile(json.loads(path.read_text())["cells"])
        assert not late, f"{path.name}: graded checks read {late}, bound after a .compile()"


def test_graded_names_after_compile_finds_a_late_name():
    cell = {"cell_type": "code", "metadata": {}, "source": ["m = load().compile()\nx = 1\n"]}
    check = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True}}, "source": ["f(x)"]}
    assert graded_names_after_compile([cell, check]) == ["x"]
    early = {"cell_type": "code", "metadata": {}, "source": ["x = 1\nm = load().compile()\n"]}
    assert graded_names_after_compile([early, check]) == []
