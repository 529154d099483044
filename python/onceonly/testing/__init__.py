"""Helpers for tests and the replay: a real HTTP destination that counts effects."""
