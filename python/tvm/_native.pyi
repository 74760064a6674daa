"""Type stub of ``tvm._native``, the PyO3 extension built from ``crates/tvm-python``.

Placeholder: the declarations follow with the native module's API.
"""
