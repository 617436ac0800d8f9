"""nbgrader's settings for the specmini course: the student edition and autograding.

teaching/build_student_edition.py and tests/test_student_edition.py copy this file into a
temporary nbgrader course directory; a teacher who runs nbgrader by hand puts it at the root of
their course directory (TEACHING.md, "The student edition and autograding").

The self-study notebooks in notebooks/ are nbgrader's source: every answer cell is a solution
cell (the answer between ### BEGIN SOLUTION and ### END SOLUTION), every check after it a graded
cell, and the cells only a self-study learner needs (the stub, its first check, "Solution (click
to expand)", the demonstrations that buggy answers are rejected) carry the tag `self-study`.

A quiz is the exception: its answer cell (grade_id `quiz_answers`) holds no solution at all, only
the learner's blank `quiz = {1: None, ...}`, which the student edition keeps as it is; the
answers' hashes are hidden tests of its check cell (### BEGIN HIDDEN TESTS ... ### END HIDDEN
TESTS), which generate_assignment removes and autograding puts back.
"""

from nbconvert.preprocessors import TagRemovePreprocessor
from nbgrader import preprocessors as pp


class ShowAnswerCells(pp.NbGraderPreprocessor):
    """The self-study notebooks keep each solution collapsed (source_hidden); in the student
    edition that cell is where the learner writes, so it opens expanded."""

    def preprocess_cell(self, cell, resources, index):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.metadata.get("jupyter", {}).pop("source_hidden", None)
            if cell.metadata.get("jupyter") == {}:
                del cell.metadata["jupyter"]
        return cell, resources


class ClearSolutions(pp.ClearSolutions):
    """nbgrader's ClearSolutions, except for a quiz's answer cell in the new shape: it holds no
    solution, and stays the learner's blank dict rather than becoming `raise NotImplementedError()`.
    (An answer cell of the old shape, its answers between the markers, is still cleared.)"""

    def preprocess_cell(self, cell, resources, index):
        quiz = cell.metadata.get("nbgrader", {}).get("grade_id") == "quiz_answers"
        if quiz and self.begin_solution_delimeter not in cell.source:
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


c = get_config()  # noqa: F821 (nbgrader runs this file with get_config defined)

# nbgrader's default pipeline for generate_assignment, with the cells tagged `self-study` dropped
# first, the answer cells shown expanded and the quiz's answer cell kept as it is.
c.GenerateAssignment.preprocessors = [
    TagRemovePreprocessor,
    ShowAnswerCells,
    pp.IncludeHeaderFooter,
    pp.InstantiateTests,
    pp.LockCells,
    ClearSolutions,
    pp.ClearOutput,
    pp.CheckCellMetadata,
    pp.ComputeChecksums,
    pp.SaveCells,
    pp.ClearHiddenTests,
    pp.ClearMarkScheme,
    pp.ComputeChecksums,
    pp.CheckCellMetadata,
]
c.TagRemovePreprocessor.remove_cell_tags = {"self-study"}
c.TagRemovePreprocessor.enabled = True

# Autograding runs each notebook top to bottom, and a teacher's machine is often cold and busy.
# nbgrader's defaults suit a quiet one: 30 s per cell, 60 s for a kernel to start, and 4 s for a
# cell's last outputs after its reply, past which the whole autograde fails. Notebooks 06, 06b and
# 07 build GPT-2's compiled calls in a few cells: up to 2 min for one cell alone on a 2-core CPU
# with an empty tinygrad cache, and several times that with two autograders and other work on the
# same two cores. A graded check never needs those cells to have finished (notebook 07 builds its
# calls after what its exercise reads), so a cell that still times out costs time, not marks.
c.Execute.timeout = 900
c.Execute.startup_timeout = 300
c.Execute.iopub_timeout = 120
