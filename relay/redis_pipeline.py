"""`ScriptPipeline`: the scripts on every request's path (a deposit, a follower's fetch) sent to
Redis together, one write per turn of the event loop, and past redis-py's per-command layers.

Under load requests reach the relay in bursts: measured, most script calls are made in a turn
of the loop with ten to thirty others. One round trip each means as many writes, as many
wake-ups of the Redis server and of the relay, and on a busy machine a scheduler delay for
each; the calls of one turn are sent in one write on one pooled connection instead, and their
replies read back in order. redis-py's execute_command (its retry helper, observability records
and pool bookkeeping, a third of the relay's CPU per Redis deposit) is not used; what it did
for these calls is done here:

- a connection found dead (Redis restarted) is dropped, and the calls it did not answer are
  sent once more on a fresh one, as the client's retry would;
- a script Redis does not know (a restart, SCRIPT FLUSH) is loaded, and its calls sent again;
- a script's own error goes to its caller alone, the others' replies are unaffected;
- a batch that outlasts COMMAND_TIMEOUT_S has its connection closed by redis-py, never left
  half read, and its callers get the timeout (each caller's own `guarded` limit runs too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from hiredis import pack_command
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from relay.redis_link import COMMAND_TIMEOUT_S

__all__ = ["ScriptPipeline"]


class _Call:
    __slots__ = ("answer", "command", "script")

    def __init__(self, script: AsyncScript, args: Iterable[Any], answer: asyncio.Future[Any]) -> None:
        self.script = script
        # Packed by hiredis at once: redis-py would check and encode each argument in Python.
        self.command = pack_command(("EVALSHA", script.sha, 0, *args))
        self.answer = answer

    def settle(self, reply: Any = None, error: BaseException | None = None) -> None:
        if self.answer.done():  # its caller gave up (its time limit): nobody reads this
            return
        if error is not None:
            self.answer.set_exception(error)
        else:
            self.answer.set_result(reply)


class ScriptPipeline:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._waiting: list[_Call] = []
        self._sending: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak ones

    async def run(self, script: AsyncScript, args: Iterable[Any]) -> Any:
        """`script` with `args` (no keys: the scripts build theirs from the prefix), its raw reply.

        Raises:
            ResponseError: the script's own error.
            redis.exceptions.ConnectionError, TimeoutError: Redis did not answer.
        """
        loop = asyncio.get_running_loop()
        if not self._waiting:
            loop.call_soon(self._flush)  # once this turn's other calls are queued too
        call = _Call(script, args, loop.create_future())
        self._waiting.append(call)
        return await call.answer

    def _flush(self) -> None:
        batch, self._waiting = self._waiting, []
        task = asyncio.ensure_future(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[_Call]) -> None:
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                unknown = await self._exchange(batch, retry=True)
                if unknown:
                    for script in {id(c.script): c.script for c in unknown}.values():
                        await self.redis.script_load(script.script)
                    for call in await self._exchange(unknown, retry=True):
                        call.settle(error=NoScriptError("the script is still unknown after loading it"))
        except BaseException as exc:  # cancelled, timed out, or Redis gone: every caller hears it
            for call in batch:
                call.settle(error=exc if isinstance(exc, Exception) else RedisConnectionError(str(exc)))
            if not isinstance(exc, Exception):
                raise

    async def _exchange(self, batch: list[_Call], retry: bool) -> list[_Call]:
        """Send `batch` in one write and settle each call with its reply; return the calls whose
        script Redis did not know. Unanswered calls go once more on a fresh connection if
        `retry`, when the connection fails."""
        pool = self.redis.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call, unused-ignore]  # untyped in redis-py 8.2
        unknown: list[_Call] = []
        answered = 0
        try:
            await conn.send_packed_command(b"".join(c.command for c in batch), check_health=False)
            for call in batch:
                try:
                    reply = await conn.read_response()
                except NoScriptError:
                    unknown.append(call)
                except ResponseError as exc:
                    call.settle(error=exc)
                else:
                    call.settle(reply)
                answered += 1
        except RedisConnectionError:
            await conn.disconnect()
            if not retry:
                raise
            return unknown + await self._exchange(batch[answered:], retry=False)
        finally:
            await pool.release(conn)
        return unknown
