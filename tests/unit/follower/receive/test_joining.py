"""follower.receive.joining: which refusals of the news to a joiner are the joiner's own doing."""

from __future__ import annotations

from durable.errors import RelayError
from follower.receive.joining import joiners_doing


def test_a_joiners_mailbox_refusing_the_news_is_the_joiners_doing() -> None:
    assert joiners_doing(RelayError("full", status=507)) and joiners_doing(RelayError("slow", status=429))
    assert not joiners_doing(RelayError("down", status=503)) and not joiners_doing(RelayError("unreachable"))
