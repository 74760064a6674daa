"""A tvm backend that fails on purpose."""


def load() -> None:
    """The entry point: always fails."""
    raise RuntimeError("bad_backend fails on purpose")
