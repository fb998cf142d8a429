"""Calibration: measure a model's accuracy by residue and write a profile."""
