"""Reports: summary.json, summary.md, junit.xml, the console table, GitHub outputs and the PR comment."""
