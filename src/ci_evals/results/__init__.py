"""The results folder: its typed contract, its one reader and checker, its one writer.

``records`` is the contract written once (a result line, a grade, a gate result, the summary: the
TypedDicts every stage's signatures use); ``contract`` validates a summary or record from elsewhere
against them and generates the JSON Schemas published in docs/schemas/; ``files`` reads
summary.json and results.jsonl at an explicit trust level; ``writer`` writes into a results folder
without following a symlink. Nothing here imports the reports or the run: both sit above it.
"""
