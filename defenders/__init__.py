"""Sanitizers (defenders), run through the same attacks as comparison points."""
