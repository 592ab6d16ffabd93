-- 0002: the search index proper.
-- node_signatures: every normalized form a node is matched under exactly (its error, its
--   template, each alias, and the decisive lines of multi-line ones), hashed.
-- node_index: what ranking reads for every candidate without touching the full text: the
--   normalized templates (error and aliases, one per line) and the title's term keys.
-- node_search is rebuilt to hold term keys (stemmed, synonym-folded by knowmesh_mcp.analysis)
--   instead of raw text, so queries and documents are analysed by one function. The rows are
--   derived data: the service rebuilds them on open when search_index_version differs.

CREATE TABLE node_signatures (
    hash          TEXT NOT NULL,
    node_pk       INTEGER NOT NULL REFERENCES nodes (pk),
    source        TEXT NOT NULL CHECK (source IN ('error', 'template', 'alias')),
    quoted_values TEXT NOT NULL,  -- the node's, copied so the same-values lookup is one index probe
    PRIMARY KEY (hash, node_pk, source)
) WITHOUT ROWID;
CREATE INDEX node_signatures_by_node ON node_signatures (node_pk);
CREATE INDEX node_signatures_by_values ON node_signatures (hash, quoted_values);

CREATE TABLE node_index (
    node_pk     INTEGER PRIMARY KEY REFERENCES nodes (pk),
    templates   TEXT NOT NULL,
    title_terms TEXT NOT NULL
);

DROP TABLE node_search;
CREATE VIRTUAL TABLE node_search USING fts5 (
    title,
    signature,
    article,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE search_terms USING fts5vocab (node_search, 'row');

-- Title and signature alone, for the every-term tier: its position lists are a fraction of
-- the full text's, so ranking many matches costs a fraction too.
CREATE VIRTUAL TABLE node_heads USING fts5 (
    title,
    signature,
    tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO meta (key, value) VALUES ('search_index_version', '0');
