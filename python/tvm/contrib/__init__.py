"""``tvm.contrib``: reserved for optional vendor SDK integrations and experimental features.

Nothing lives here yet. Host toolchains, external command-line tools, worker processes and
build-info helpers (the C/C++ compiler, nvcc, tar, the popen pool, ``tempdir``...) are in
:mod:`tvm.support`; their former ``tvm.contrib.<name>`` module paths do not exist.
"""
