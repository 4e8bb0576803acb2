"""From per-sample grades to the verdict: aggregates, gates, the baseline comparison, the verdict word."""
