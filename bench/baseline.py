"""The plain BM25 baseline every search figure is printed beside.

One FTS5 table (default unicode61 tokenizer, no stemming, no weights) over each current
document's whole text: title, signature (error and aliases) and content. A query is an OR of
every distinct token of the query text, each quoted, ranked by FTS5's bm25(). It is what a
forty-line search over the same documents would do, and it shares nothing with the product's
analysis, channels or ranking. It lives in the benchmark's own database file, beside the
product's tables, and is never part of the schema.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

TABLE = "bench_baseline_bm25"
_TOKEN = re.compile(r"[^\W_]+")


def document_text(document: dict[str, Any]) -> str:
    signature, content = document["signature"], document["content"]
    parts = [document["title"], signature["error"], *signature.get("aliases", []), content["symptom"],
             content["context"], content["root_cause"], *content.get("failed_attempts", []),
             *content.get("boundaries", [])]
    for solution in content["solutions"]:
        notes = solution.get("notes")
        parts += [solution.get("title") or "", solution.get("applies_to") or "", *solution["fix"],
                  solution["verify"]["command"], *(notes if isinstance(notes, list) else [notes or ""])]
    return "\n".join(p for p in parts if p)


def ensure(path: Path) -> None:
    """Create the baseline table in the database at `path` from its current documents, once."""
    connection = sqlite3.connect(path)
    try:
        if connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone():
            return
        rows = connection.execute(
            "SELECT n.id, v.document FROM nodes n JOIN node_versions v ON v.version = n.current_version")
        with connection:
            connection.execute(f"CREATE VIRTUAL TABLE {TABLE} USING fts5 (node_id UNINDEXED, body)")
            connection.executemany(f"INSERT INTO {TABLE} (node_id, body) VALUES (?, ?)",
                                   ((node_id, document_text(json.loads(document))) for node_id, document in rows))
    finally:
        connection.close()


def search(connection: sqlite3.Connection, q: str, limit: int = 5) -> list[str]:
    """The node ids plain BM25 ranks first for `q`."""
    tokens = list(dict.fromkeys(_TOKEN.findall(q.lower())))
    if not tokens:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
    rows = connection.execute(f"SELECT node_id FROM {TABLE} WHERE {TABLE} MATCH ? ORDER BY bm25({TABLE}) LIMIT ?",
                              (match, limit)).fetchall()
    return [row[0] for row in rows]
