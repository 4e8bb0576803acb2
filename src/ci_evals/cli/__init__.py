"""The ``ci-evals`` command line: argv in, exit code out (``app``), the work of each command (``commands``)."""
