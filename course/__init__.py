"""The course's own code: what the notebooks share, beside the algorithm in `specmini`.

The map, one line per module and the notebooks that use it, is course/README.md.
"""

from course import runtime

runtime.choose()  # tinygrad's faster CPU runtime (HCQ2) where only a CPU can run it
