"""Memoization by identity for the performance model's hot loops."""

from __future__ import annotations

import inspect
from functools import wraps

# Entries before a memo starts afresh (each keeps its arguments alive).
MAX_ENTRIES = 4096


def identity_memo(function):
    """Memoize ``function`` of positional, immutable arguments, looking them up by identity first.

    Hot loops pass the same frozen objects again and again; hashing a pydantic model costs
    microseconds, ``id`` does not. Each entry keeps its arguments alive, so their ids stay theirs.
    Misses fall through to ``function`` (``lru_cache`` it as well where equal values recur as
    other objects). A function of up to four parameters without defaults gets a wrapper of that
    arity, which builds its key without iterating (the collectives call theirs ~10 times a step).
    """
    cache: dict[tuple, tuple] = {}

    def remember(key: tuple, args: tuple):
        value = function(*args)
        if len(cache) >= MAX_ENTRIES:
            cache.clear()
        cache[key] = (args, value)
        return value

    parameters = list(inspect.signature(function).parameters.values())
    fixed = all(p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)
    arity = len(parameters) if fixed else None
    if arity == 1:
        def memoized(a):
            hit = cache.get((id(a),))
            return hit[1] if hit is not None else remember((id(a),), (a,))
    elif arity == 3:
        def memoized(a, b, c):
            key = (id(a), id(b), id(c))
            hit = cache.get(key)
            return hit[1] if hit is not None else remember(key, (a, b, c))
    elif arity == 4:
        def memoized(a, b, c, d):
            key = (id(a), id(b), id(c), id(d))
            hit = cache.get(key)
            return hit[1] if hit is not None else remember(key, (a, b, c, d))
    else:
        def memoized(*args):
            key = tuple(map(id, args))
            hit = cache.get(key)
            return hit[1] if hit is not None else remember(key, args)

    def cache_clear() -> None:
        cache.clear()
        getattr(function, "cache_clear", lambda: None)()

    memoized = wraps(function)(memoized)
    memoized.cache_clear = cache_clear
    return memoized


class KeepAliveMemo:
    """Values by key, for keys that name an object by ``id``: each entry keeps that object alive,
    so its id stays its own while the entry lives; the memo starts afresh when full.

    For hot paths whose key mixes an object's identity with values (``identity_memo`` keys every
    argument by identity, which a fresh array of equal values defeats)."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._cache: dict[tuple, tuple[object, object]] = {}

    def get(self, key: tuple, keep: object, compute):
        """The value remembered for ``key``, else ``compute()``, remembered with ``keep`` alive."""
        hit = self._cache.get(key)
        if hit is not None:
            return hit[1]
        value = compute()
        self.put(key, keep, value)
        return value

    def peek(self, key: tuple):
        """The value remembered for ``key``, or None (nothing is computed or stored)."""
        hit = self._cache.get(key)
        return None if hit is None else hit[1]

    def put(self, key: tuple, keep: object, value: object) -> None:
        """Remember ``value`` for ``key`` (computed elsewhere), with ``keep`` alive."""
        if len(self._cache) >= self.max_entries:
            self._cache.clear()
        self._cache[key] = (keep, value)

    def __contains__(self, key: tuple) -> bool:
        return key in self._cache

    def clear(self) -> None:
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)
