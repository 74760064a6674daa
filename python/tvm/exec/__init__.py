"""Command lines: ``python -m tvm.exec.rpc_server`` and the other RPC tools."""
