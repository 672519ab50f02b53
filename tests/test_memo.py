"""identity_memo: one value per tuple of argument objects, whatever the wrapper's arity."""

from __future__ import annotations

import pytest

from layoutopt.perf_model.memo import identity_memo


@pytest.mark.parametrize("arity", [1, 2, 3, 4, 5])
def test_identity_memo_computes_once_per_argument_objects(arity):
    calls = []
    names = ", ".join(f"a{i}" for i in range(arity))
    namespace = {"calls": calls}
    exec(f"def f({names}):\n    calls.append(1)\n    return [{names}]", namespace)
    memo = identity_memo(namespace["f"])
    first, second = tuple(object() for _ in range(arity)), tuple(object() for _ in range(arity))
    assert memo(*first) is memo(*first) and memo(*first) == list(first)
    assert memo(*second) == list(second) and len(calls) == 2
    memo.cache_clear()
    memo(*first)
    assert len(calls) == 3
    assert memo.__name__ == "f"


def test_identity_memo_of_a_function_with_defaults_takes_them():
    @identity_memo
    def f(a, b=2):
        return (a, b)

    one = object()
    assert f(one) == (one, 2) and f(one, 3) == (one, 3)
