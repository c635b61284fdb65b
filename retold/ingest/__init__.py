"""How memories get in: the write path, the equivalence judges, and session extraction.

Three jobs, one subpackage each: :mod:`retold.ingest.write` (a candidate to a committed
record), :mod:`retold.ingest.equivalence` (same, contradicts or distinct; does a quote
entail a claim) and :mod:`retold.ingest.extraction` (a session's transcript to reviewed
candidates, which then take the write path). ``prompts/`` holds the hosted models' prompts.
"""
