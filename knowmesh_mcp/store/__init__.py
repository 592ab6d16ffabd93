"""The store: every SQL statement of the package, behind `Store` (reads) and `Writer` (one write
transaction). The service and everything above it see only these names and the plain rows they
return.

`sqlite` is the embedded backend (a personal mesh, and today the only one); a PostgreSQL backend
for a team's mesh provides the same interface (issue 13), with its migrations in
`store/postgres/`.
"""

from .rows import (
    CandidateText,
    DuplicateRow,
    Edit,
    NewNode,
    NodeRow,
    RevisionRow,
    SearchRow,
    StatsRow,
    SyncedHead,
    SyncedRevision,
    TermQuery,
)
from .sqlite import Store, Writer, consolidated_schema, migrations, store_dir, utc_now

__all__ = [
    "CandidateText", "DuplicateRow", "Edit", "NewNode", "NodeRow", "RevisionRow", "SearchRow", "StatsRow", "Store", "SyncedHead",
    "SyncedRevision", "TermQuery", "Writer", "consolidated_schema", "migrations", "store_dir", "utc_now",
]
