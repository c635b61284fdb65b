"""Retrieval (spec §10): each stage of the search pipeline as a plain function."""
