"""Identities, pinned contacts, the sealed envelope and invite codes.

This package touches no network and no files beyond an identity's own folder, and imports
nothing else of the project, so every other part can build on it.
"""
