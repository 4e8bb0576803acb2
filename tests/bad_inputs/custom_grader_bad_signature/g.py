from ci_evals import grader

@grader
def grade(sample):
    pass
