async def prepare(suite):
    raise ValueError('bad seed')
