"""Coroutine functions served over RPC: calls awaited on one session run concurrently on the
server's event loop (real server processes on loopback)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from tvm import rpc

HOST = "127.0.0.1"

ASYNC_FUNCS = """
import asyncio
from tvm.ffi import register_func
from tvm.rpc.aio import register_async_func

cancelled = []

@register_async_func("test.aio.sleep")
async def _sleep(seconds):
    await asyncio.sleep(seconds)
    return seconds

@register_async_func("test.aio.fail")
async def _fail(key):
    await asyncio.sleep(0.05)
    raise KeyError(key)

@register_async_func("test.aio.guarded_sleep")
async def _guarded_sleep(seconds):
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cancelled.append(seconds)
        raise
    return seconds

@register_func("test.aio.cancelled")
def _cancelled():
    return len(cancelled)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rpc.Server]:
    directory = tmp_path_factory.mktemp("aio_modules")
    (directory / "rpc_aio_serving_funcs.py").write_text(ASYNC_FUNCS)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(directory), saved]))
    try:
        with rpc.Server(port=0, init_modules=["rpc_aio_serving_funcs"]) as srv:
            yield srv
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture
def sess(server: rpc.Server) -> Iterator[rpc.RPCSession]:
    session = rpc.connect(HOST, server.port)
    yield session
    session.close()


def timed(make: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """Awaits ``make()`` in a fresh event loop (bounded); its result and the seconds taken."""

    async def bounded() -> Any:
        return await asyncio.wait_for(make(), 30)

    start = time.monotonic()
    value = asyncio.run(bounded())
    return value, time.monotonic() - start


def test_two_awaits_of_one_second_on_one_session_take_about_one_second(
    sess: rpc.RPCSession,
) -> None:
    one, alone = timed(lambda: sess.async_call("test.aio.sleep", 1.0))
    assert one == 1.0
    assert 1.0 <= alone < 1.5, alone
    both, together = timed(
        lambda: asyncio.gather(
            sess.async_call("test.aio.sleep", 1.0), sess.async_call("test.aio.sleep", 1.0)
        )
    )
    assert both == [1.0, 1.0]
    assert 1.0 <= together < 1.5, f"two 1 s awaits took {together:.2f} s"


def test_many_awaits_overlap_and_each_gets_its_own_result(sess: rpc.RPCSession) -> None:
    delays = [0.5 + 0.01 * i for i in range(10)]
    values, took = timed(
        lambda: asyncio.gather(*(sess.async_call("test.aio.sleep", d) for d in delays))
    )
    assert values == delays
    assert took < 1.5, f"ten overlapping awaits of about 0.5 s took {took:.2f} s"


def test_an_exception_keeps_its_class_and_spares_the_other_calls(sess: rpc.RPCSession) -> None:
    async def mixed() -> list[Any]:
        return await asyncio.gather(
            sess.async_call("test.aio.sleep", 0.3),
            sess.async_call("test.aio.fail", "missing"),
            sess.async_call("test.aio.sleep", 0.2),
            return_exceptions=True,
        )

    values, took = timed(mixed)
    assert values[0] == 0.3 and values[2] == 0.2
    assert isinstance(values[1], KeyError) and "missing" in str(values[1])
    assert took < 1.0, took


def test_ordinary_functions_are_awaited_too(sess: rpc.RPCSession) -> None:
    async def both() -> list[Any]:
        return await asyncio.gather(
            sess.async_call("rpc.test.addone", 41), sess.async_call("test.aio.sleep", 0.1)
        )

    values, _ = timed(both)
    assert values == [42, 0.1]
    with pytest.raises(AttributeError):
        timed(lambda: sess.async_call("test.aio.no_such_function"))


def test_the_session_serves_ordinary_calls_while_coroutines_run(sess: rpc.RPCSession) -> None:
    addone = sess.get_function("rpc.test.addone")
    latencies: list[float] = []

    def ordinary_calls() -> None:
        time.sleep(0.2)
        for _ in range(5):
            start = time.monotonic()
            assert addone(1) == 2
            latencies.append(time.monotonic() - start)

    thread = threading.Thread(target=ordinary_calls)
    thread.start()
    values, _ = timed(
        lambda: asyncio.gather(
            sess.async_call("test.aio.sleep", 1.0), sess.async_call("test.aio.sleep", 1.0)
        )
    )
    thread.join(10)
    assert values == [1.0, 1.0]
    assert len(latencies) == 5
    assert max(latencies) < 0.5, latencies


def test_a_cancelled_await_cancels_the_coroutine_on_the_server(sess: rpc.RPCSession) -> None:
    async def cancel_one() -> float:
        try:
            await asyncio.wait_for(sess.async_call("test.aio.guarded_sleep", 30.0), 0.3)
        except TimeoutError:
            pass
        # The session goes on serving.
        return await sess.async_call("test.aio.sleep", 0.1)

    value, took = timed(cancel_one)
    assert value == 0.1
    assert took < 5, took
    cancelled = sess.get_function("test.aio.cancelled")
    deadline = time.monotonic() + 10
    while cancelled() < 1:
        assert time.monotonic() < deadline, "the server's coroutine was never cancelled"
        time.sleep(0.02)


def test_calls_on_a_closed_session_fail(server: rpc.Server) -> None:
    session = rpc.connect(HOST, server.port)

    async def after_close() -> Any:
        pending = asyncio.ensure_future(session.async_call("test.aio.sleep", 5.0))
        await asyncio.sleep(0.2)
        session.close()
        return await pending

    with pytest.raises(RuntimeError):
        timed(after_close)


def test_blocking_calls_of_coroutine_functions_still_work(sess: rpc.RPCSession) -> None:
    assert sess.get_function("test.aio.sleep")(0.05) == 0.05
    with pytest.raises(KeyError, match="nope"):
        sess.get_function("test.aio.fail")("nope")


def test_a_forked_child_runs_coroutines_on_a_loop_of_its_own() -> None:
    """A session forked from a server's zygote after the zygote used its event loop (an init
    module awaiting at import) gets a loop of its own rather than the parent's dead thread."""
    program = textwrap.dedent(
        """
        import asyncio, os
        from tvm.rpc import aio

        async def five():
            return 5

        parent_loop = aio._event_loop()
        assert asyncio.run_coroutine_threadsafe(five(), parent_loop).result(10) == 5
        pid = os.fork()
        if pid == 0:
            loop = aio._event_loop()
            ok = loop is not parent_loop
            ok = ok and asyncio.run_coroutine_threadsafe(five(), loop).result(10) == 5
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "child 0", run.stdout + run.stderr
