def other(sample, submission):
    pass
