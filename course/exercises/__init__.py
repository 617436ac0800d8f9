"""The checks: grading.py runs them (grade, expect, check_quiz); exercises_0N.py: notebook N's."""
