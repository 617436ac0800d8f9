"""Imported before any test module: `course` picks tinygrad's CPU runtime (course/runtime.py),
which tinygrad reads once, when it is first imported."""

import course  # noqa: F401
