"""Evaluation: datasets, frozen gold answers, metrics, the resumable runner, scoring and reports."""
