"""One run of a suite: every (model, sample, run) job under one concurrency cap, results streamed to disk."""
