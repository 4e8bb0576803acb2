def prepare(suite):
    pass
