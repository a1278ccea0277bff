from __future__ import annotations

import pytest

from durable.settings import env_float


@pytest.mark.parametrize(("value", "expected"), [("2.5", 2.5), ("", 9.0), ("soon", 9.0),
                                                 ("0", 9.0), ("-1", 9.0)])
def test_env_float_takes_a_positive_number_else_the_default(monkeypatch: pytest.MonkeyPatch, value: str,
                                                            expected: float) -> None:
    monkeypatch.setenv("TALK_TEST_NUMBER", value)
    assert env_float("TALK_TEST_NUMBER", 9.0) == expected
