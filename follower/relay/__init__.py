"""The connection to a relay: the client, its HTTP/1.1 transport, the push stream, backoff."""
