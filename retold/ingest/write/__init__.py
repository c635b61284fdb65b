"""The write path (spec §6, §8): one candidate from request to committed record.

``request`` (what a write asks), ``ingestor`` (validate and decide, every model call before
the transaction), ``evidence`` (is the quote in the session, what does it support),
``entities`` (resolve names), ``supersession`` (current facts replace older ones),
``persist`` (the one transaction), ``batch`` (several candidates, one transaction),
``revision``, ``session`` (turn hooks), ``sources`` and ``temporal`` (dates a quote supports).
"""
