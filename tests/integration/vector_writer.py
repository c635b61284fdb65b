"""Another process writing to a retold store: records plus FakeEmbedder vectors, no torch.

    python vector_writer.py STORE MODEL VERSION DIMS TEXT [TEXT ...] [--pause SECONDS]

Each text becomes one record and its embedding, each in its own committed write (as
the ingestor does); one JSON line ``{"id": ..., "text": ..., "version": ...}`` is printed
per record. ``--pause`` sleeps between records so a reader can refresh mid-burst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime

from retold.models import Record, Scope
from retold.store import Store
from retold.testing import FakeEmbedder
from retold.util import new_id


def record_for(text: str) -> Record:
    now = datetime.now(UTC)
    return Record(
        id=new_id(), type="semantic", version=1, content=text, subject="-", subject_entity_id=None,
        attribute=None, scope=Scope("user", "u1"), source_kind="user_statement", source_ref=None,
        creator_agent_id="writer", evidence=None, created_at=now, event_at=now, expires_at=None,
        valid_from=None, valid_until=None, review_at=None, review_flagged_at=None, confidence=0.9,
        status="confirmed", supersedes_id=None, reinforcements=0, last_reinforced_at=None, tags=[],
        entity_ids=[],
    )  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    embedder = FakeEmbedder(dims=args.dims, name=args.model, version=args.version)
    store = await Store.open(args.store)
    try:
        for number, text in enumerate(args.texts):
            if number and args.pause:
                await asyncio.sleep(args.pause)
            record = record_for(text)
            await store.insert_record(record)
            vector = embedder.embed_documents([text])[0]
            version = await store.put_embedding(record.id, args.model, args.version, vector)
            print(json.dumps({"id": record.id, "text": text, "version": version}), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("store")
    parser.add_argument("model")
    parser.add_argument("version")
    parser.add_argument("dims", type=int)
    parser.add_argument("texts", nargs="+")
    parser.add_argument("--pause", type=float, default=0.0)
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
