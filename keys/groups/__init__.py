"""Megolm group keys and the membership book: the book, the group keys, the signed group text."""
