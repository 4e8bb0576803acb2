from ci_evals import grader
def broken(:
    pass
