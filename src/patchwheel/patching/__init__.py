"""Patch series, their gates (which patches a target and each variant apply: gates.py, series.py;
a series may be a pool shared by targets), vendor trees (git repos of upstream + series), and
export of vendor commits back into patch files.
"""
