"""Hostile shapes of input: a container that lies about its length, nesting and callback
recursion deep enough to exhaust the native stack under a raised recursion limit. Each runs in
a fresh interpreter, so a crash fails the test instead of the suite."""

import pytest

from isolated import run_isolated


@pytest.mark.parametrize("length", ["10**12", "2**62"])
@pytest.mark.parametrize("base", ["list", "tuple"])
def test_a_lying_len_gets_the_real_items(base, length):
    out = run_isolated(
        f"""
        import tvm

        class Liar({base}):
            def __len__(self):
                return {length}

        print(list(tvm.ffi.convert(Liar([1, 2, 3]))))
        """
    )
    assert out == "[1, 2, 3]"


def test_deep_nesting_is_a_recursion_error_under_a_raised_limit():
    out = run_isolated(
        """
        import sys
        import tvm

        sys.setrecursionlimit(1_000_000)
        nested = []
        for _ in range(200_000):
            nested = [nested]
        try:
            tvm.ffi.convert(nested)
        except RecursionError as err:
            print("RecursionError", "native" in str(err) or "recursion" in str(err))
        """
    )
    assert out == "RecursionError True"


def test_recursion_through_callbacks_is_a_recursion_error():
    out = run_isolated(
        """
        import sys
        import tvm

        sys.setrecursionlimit(1_000_000)
        depth = 0

        def recurse():
            global depth
            depth += 1
            return again()

        again = tvm.ffi.convert(recurse)
        try:
            again()
        except RecursionError:
            print("RecursionError", depth > 100)
        """
    )
    assert out == "RecursionError True"
