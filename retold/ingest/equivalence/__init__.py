"""Are two claims the same, contradictory or distinct, and does a quote entail a claim (spec §5, §6.3)?

``judge`` chooses the configured judge (:func:`~retold.ingest.equivalence.judge.build_judge`);
``conservative`` (the offline default: cosine plus named rules), ``nli`` (a cross-encoder)
and ``llm`` (a hosted model) are the judges; ``claim_parser``, ``claim_rules`` and
``claim_lexicon`` read a claim's subject, attribute and value for the conservative judge;
``verdicts`` is what every judge returns.
"""
