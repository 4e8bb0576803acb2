"""The shapes every stage shares: a dataset ``Sample``, a ``GradeResult``, the normalized trajectory."""
