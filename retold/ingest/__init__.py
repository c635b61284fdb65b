"""Ingestion: evidence checks, entity resolution, equivalence judging and the write path."""
