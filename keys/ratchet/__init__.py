"""Olm pairwise forward secrecy: account, signed card, envelope, sessions, in-flight copies, late mail."""
