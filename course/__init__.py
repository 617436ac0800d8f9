"""The course's own code: what the notebooks share, beside the algorithm in `specmini`.

The map, one line per module and the notebooks that use it, is course/README.md. Importing it
imports nothing else: tinygrad is imported (and started as the course runs it) by course.gpt2.
"""
