"""The results folder: its typed records, its one reader and checker, its one writer.

``records`` names the shapes (a result line, a grade, the summary); ``shapes`` checks a summary or
record from elsewhere against them; ``files`` reads summary.json and results.jsonl at an explicit
trust level; ``writer`` writes into a results folder without following a symlink. Nothing here imports the reports or the run: both sit above it.
"""
