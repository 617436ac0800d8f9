"""Benchmarks of the course's GPT-2 (course/gpt2.py); see benchmarks/decode.py."""
