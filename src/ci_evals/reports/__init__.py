"""Reports: summary.json, summary.md, junit.xml, report.html, the console table, GitHub outputs and the PR comment."""
