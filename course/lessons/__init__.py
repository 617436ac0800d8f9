"""Notebook N's plots, simulations and longer code (lesson_0N.py), kept out of the notebook."""
