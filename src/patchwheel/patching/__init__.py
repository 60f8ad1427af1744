"""Patch series, vendor trees (git repos of upstream + series), and export of vendor commits back
into patch files.
"""
