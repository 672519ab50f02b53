"""Memoization by identity for the performance model's hot loops."""

from __future__ import annotations

from functools import wraps


def identity_memo(function):
    """Memoize ``function`` of positional, immutable arguments, looking them up by identity first.

    Hot loops pass the same frozen objects again and again; hashing a pydantic model costs
    microseconds, ``id`` does not. Each entry keeps its arguments alive, so their ids stay theirs.
    Misses fall through to ``function`` (``lru_cache`` it as well where equal values recur as
    other objects).
    """
    cache: dict[tuple, tuple] = {}

    @wraps(function)
    def memoized(*args):
        key = tuple(map(id, args))
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        value = function(*args)
        if len(cache) >= 4096:
            cache.clear()
        cache[key] = (args, value)
        return value

    def cache_clear() -> None:
        cache.clear()
        getattr(function, "cache_clear", lambda: None)()

    memoized.cache_clear = cache_clear
    return memoized
