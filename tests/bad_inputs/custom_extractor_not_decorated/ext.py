def first_word(trajectory, config):
    return ''
