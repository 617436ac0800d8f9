"""Put a notebook's quiz in the per-question shape of issue 23, or refresh its key (idempotent).

    .venv/bin/python teaching/quiz_convert.py notebooks/06_gpt2_tinygrad.ipynb [more notebooks]

For each notebook (its number NN from the file name, before the first "_": 02, or 02b for
02b_block_verification.ipynb; its quiz named "quiz NN"):
- the answers come from the old hidden solution cell (`quiz = {...}` between the solution
  markers of the cell with grade_id quiz_answers) or, once converted, from
  teaching/quiz_answers.json, where they are written (the teachers' key, not in the edition);
- the answer cell (grade_id quiz_answers) becomes the learner's blank `quiz = {1: None, ...}`:
  an nbgrader solution cell without markers, expanded, no outputs;
- the check cell (grade_id quiz_check) holds the answers' grading.quiz_hash hashes between
  ### BEGIN HIDDEN TESTS and ### END HIDDEN TESTS, and its points are the number of questions;
- the `QUIZ = {...}` block (and its comment) leaves course/exercises/exercises_NN.py.
The quiz's "## Quiz" cell is written by hand, in the shape every notebook shares: QUIZ_PROMPT, then
the questions, each option on a line of its own ("   - (a) ..."); tests/test_grading.py checks it.
Then re-execute the notebook: jupyter nbconvert --to notebook --execute --inplace NOTEBOOK.
To change a converted quiz's answer, edit teaching/quiz_answers.json and run this again.
"""

import ast
import json
import re
import sys
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def repo_of(path):
    for parent in path.resolve().parents:
        if (parent / "course" / "exercises" / "grading.py").exists():
            return parent
    raise SystemExit(f"{path}: not inside the specmini repository")


def cell(nb, grade_id):
    found = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    if len(found) != 1:
        raise SystemExit(f"expected one cell with grade_id {grade_id}, found {len(found)}")
    return found[0]


def old_answers(source):
    """The answers of an old answer cell (`quiz = {...}` between the markers), or None."""
    match = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), source, flags=re.S)
    if not match:
        return None
    tree = ast.parse(match.group(1))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "quiz":
            return ast.literal_eval(node.value)
    raise SystemExit("the solution block assigns no `quiz = {...}`")


# One quiz shape in every notebook: its "## Quiz" cell opens with QUIZ_PROMPT and prints each
# option on a line of its own, as "   - (a) ..."; its answer cell is answer_source's.
QUIZ_PROMPT = (
    "Work each answer out from this notebook, by hand or in a scratch cell, then write it in the"
    ' cell below: the letter of an option (`"b"`; `"(b)"`, `"b)"` and `"B"` count too), or a'
    " number rounded to 2 decimals (`0.25`, or `5` for a whole number; a decimal point, not a"
    " comma; no unit, no % sign). The next cell checks your answers one by one; it knows only"
    " their hashes."
)


def answer_source(questions):
    blanks = ", ".join(f"{q}: None" for q in questions)
    return (
        '# Your answers: the letter of an option ("b") or a number rounded to 2 decimals (0.25,'
        " or 5\n"
        "# for a whole number; a decimal point, not a comma; no unit, no %); None: not answered"
        " yet.\n"
        "# The next cell checks them one by one.\n"
        f"quiz = {{{blanks}}}"
    )


def check_source(name, key):
    lines = "\n".join(f'    {q}: "{h}",' for q, h in key.items())
    return (
        "quiz_key = None  # the classroom edition has no key: the autograder brings it\n"
        "### BEGIN HIDDEN TESTS\n"
        f"quiz_key = {{  # grading.quiz_hash of each answer\n{lines}\n}}\n"
        "### END HIDDEN TESTS\n"
        f'grading.check_quiz("{name}", quiz, quiz_key)'
    )


def drop_quiz_block(module):
    """Remove `QUIZ = {...}` and the comment lines just above it from an exercises module."""
    if not module.exists():
        return False
    text = module.read_text()
    new = re.sub(r"\n*(?:#[^\n]*\n)*QUIZ = \{[^}]*\}\n", "\n", text)
    if new != text:
        module.write_text(new.rstrip("\n") + "\n")
    return new != text


def convert(path):
    path = Path(path)
    repo = repo_of(path)
    number = path.name.split("_")[0]  # "02", or "02b"
    name = f"quiz {number}"
    from course.exercises.grading import quiz_hash

    store = repo / "teaching" / "quiz_answers.json"
    stored = json.loads(store.read_text()) if store.exists() else {}
    nb = nbformat.read(path, as_version=4)
    answers_cell, check_cell = cell(nb, "quiz_answers"), cell(nb, "quiz_check")
    answers = old_answers(answers_cell.source)
    if answers is None:
        if number not in stored:
            raise SystemExit(f"{path}: no solution block and no answers in {store}")
        answers = {int(q): a for q, a in stored[number].items()}
    answers = dict(sorted(answers.items()))
    stored[number] = {str(q): a for q, a in answers.items()}
    store.write_text(json.dumps(dict(sorted(stored.items())), indent=2) + "\n")

    answers_cell.source = answer_source(answers)
    answers_cell.outputs, answers_cell.execution_count = [], None
    jupyter = answers_cell.metadata.get("jupyter", {})
    jupyter.pop("source_hidden", None)
    if "jupyter" in answers_cell.metadata and not jupyter:
        del answers_cell.metadata["jupyter"]
    answers_cell.metadata.nbgrader.update(solution=True, grade=False, locked=False)

    key = {q: quiz_hash(name, q, a) for q, a in answers.items()}
    check_cell.source = check_source(name, key)
    check_cell.metadata.nbgrader.update(grade=True, solution=False, locked=True)
    check_cell.metadata.nbgrader["points"] = len(answers)  # one point per question
    nbformat.write(nb, path)
    dropped = drop_quiz_block(repo / "course" / "exercises" / f"exercises_{number}.py")
    note = ", QUIZ dropped from the exercises module" if dropped else ""
    print(f"{path.name}: {len(answers)} questions converted{note}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for arg in sys.argv[1:]:
        convert(arg)
