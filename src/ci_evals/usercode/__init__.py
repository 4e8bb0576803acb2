"""The suite author's Python: loading it, its decorators, and running it off the event loop with limits."""
