"""Dense retrieval's two halves (spec §5, §7): the embedder and the in-memory vector index.

``retold.index.embedder`` wraps a sentence-transformers model (imported lazily, run in
worker threads); ``retold.index.vector`` is the exact-cosine projection of the stored
vectors. This package imports neither on its own, so ``import retold.index.vector``
never pulls in torch.
"""
