"""Session extraction and review (spec §9): a finished session's transcript to reviewed candidates.

``stages`` (the extraction graph's steps), ``run`` (one idempotent run per session),
``structured`` (the hosted extractor and reviewer: one schema-constrained call each, with
the versioned prompts in ``retold/ingest/prompts/``) and ``candidates`` (what a candidate
must satisfy before it reaches the write path).
"""
