"""The relay: stores sealed blobs by (mailbox, tag) and forgets each once its owner acks it.

It never holds a private key or a byte of plaintext; all state lives in a `Store`.
"""
