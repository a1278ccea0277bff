"""relay.server: the connection cap is lowered to what the open-files limit can hold."""

from __future__ import annotations

import logging

import pytest

from relay.config import HttpLimits
from relay.server import SPARE_FILES, fit_connections


def test_a_cap_that_fits_is_kept_as_it_is() -> None:
    limits = HttpLimits(max_connections=1000)
    assert fit_connections(limits, 1000 + SPARE_FILES) is limits


def test_a_cap_over_the_open_files_limit_is_lowered_and_the_log_says_how_to_raise_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="talk.relay"):
        fitted = fit_connections(HttpLimits(max_connections=4096, max_per_peer=7), 1024)
    assert fitted == HttpLimits(max_connections=1024 - SPARE_FILES, max_per_peer=7)  # the rest kept
    assert "lowered to 960" in caplog.text and "LimitNOFILE" in caplog.text


def test_even_a_tiny_open_files_limit_leaves_one_connection() -> None:
    assert fit_connections(HttpLimits(), 10).max_connections == 1
