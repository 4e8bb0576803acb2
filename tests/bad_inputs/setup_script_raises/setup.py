def prepare(suite):
    raise RuntimeError('fixtures unavailable')
