"""Command-line programs of ``tvm``, run as ``python -m tvm.exec.<name>``:

``rpc_server``         an RPC server
``rpc_tracker``        an RPC tracker
``rpc_proxy``          an RPC proxy
``query_rpc_tracker``  print the state of a tracker

``rpc_session`` and ``rpc_pipe_server`` serve one session each; servers start them.
"""
