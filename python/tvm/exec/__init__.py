"""Command-line programs of ``tvm``, run as ``python -m tvm.exec.<name>``:

``rpc_server``         an RPC server
``rpc_tracker``        an RPC tracker
``rpc_proxy``          an RPC proxy
``query_rpc_tracker``  print the state of a tracker

``rpc_session`` is a server's session zygote (it forks a process per session) and
``rpc_pipe_server`` serves one session over pipes; servers start them.
"""
