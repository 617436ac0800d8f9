"""Benchmarks of the course's GPT-2 (notebooks/gpt2.py); see benchmarks/decode.py."""
