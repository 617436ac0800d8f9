"""nbgrader's settings for the specmini course: the student edition and autograding.

teaching/build_student_edition.py and tests/test_student_edition.py copy this file into a
temporary nbgrader course directory; a teacher who runs nbgrader by hand puts it at the root of
their course directory (TEACHING.md, "The student edition and autograding").

The self-study notebooks in notebooks/ are nbgrader's source: every answer cell is a solution
cell (the answer between ### BEGIN SOLUTION and ### END SOLUTION), every check after it a graded
cell, and the cells only a self-study learner needs (the stub, its first check, "Solution (click
to expand)", the demonstrations that buggy answers are rejected) carry the tag `self-study`.
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


c = get_config()  # noqa: F821 (nbgrader runs this file with get_config defined)

# nbgrader's default pipeline for generate_assignment, with the cells tagged `self-study` dropped
# first and the answer cells shown expanded.
c.GenerateAssignment.preprocessors = [
    TagRemovePreprocessor,
    ShowAnswerCells,
    pp.IncludeHeaderFooter,
    pp.InstantiateTests,
    pp.LockCells,
    pp.ClearSolutions,
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

# Autograding runs each notebook top to bottom. nbgrader's default allows 30 s per cell; notebook
# 06 compiles GPT-2's kernels in a few of its cells (about 35 s in all on a 2-core CPU with a cold
# cache), and a teacher's machine may be slower or busier.
c.Execute.timeout = 300
