"""alarms.rpc_calls: a call gets the answer with its own id, whatever order answers come in; no
answer is NoAnswer — late after the timeout, or at once when the connection ends."""

from __future__ import annotations

import threading

import pytest

from alarms.rpc_calls import Calls, NoAnswer


def test_each_call_gets_the_answer_with_its_own_id() -> None:
    calls = Calls()
    first, second = calls.new_id(), calls.new_id()
    assert first != second
    calls.answered({"id": second, "result": "two"})
    calls.answered({"id": first, "result": "one"})
    assert calls.wait(first, 1.0)["result"] == "one"
    assert calls.wait(second, 1.0)["result"] == "two"


def test_an_answer_read_while_the_caller_waits_wakes_it() -> None:
    calls = Calls()
    call = calls.new_id()
    reader = threading.Timer(0.05, calls.answered, [{"id": call, "result": 7}])
    reader.start()
    assert calls.wait(call, 30.0)["result"] == 7
    reader.join()


def test_no_answer_in_time_is_late() -> None:
    calls = Calls()
    with pytest.raises(NoAnswer) as raised:
        calls.wait(calls.new_id(), 0.01)
    assert raised.value.late


def test_a_connection_that_ends_stops_every_wait_without_its_timeout() -> None:
    calls = Calls()
    call = calls.new_id()
    reader = threading.Timer(0.05, calls.gone)
    reader.start()
    with pytest.raises(NoAnswer) as raised:
        calls.wait(call, 3600.0)  # an hour: only the end of the connection can stop this wait
    assert not raised.value.late and calls.is_gone
    reader.join()
    with pytest.raises(NoAnswer):
        calls.wait(calls.new_id(), 3600.0)  # and a call made after the end is not waited on at all
