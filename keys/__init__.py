"""Identities, pinned contacts, the sealed envelope and invite codes.

This package touches no network and no files beyond an identity's own folder, and imports
nothing of the project but the leaf package `durable` (errors, private files, locks), so every
other part but `durable` can build on it.
"""
