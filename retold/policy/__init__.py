"""Scope access and record lifecycle rules (spec §6): plain functions, no I/O of their own."""
