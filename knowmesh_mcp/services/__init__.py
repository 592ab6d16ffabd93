"""The service layer: the one object every interface calls (`mesh.Mesh`), composed of one service
per concern, each in its own module: creating, node_reads, editing, searching, change_feed,
import_export, outcomes, failed_attempts, review, dedupe, issues, submission (the write limit),
syncing (with sync_checks and sync_writes), access (tokens), maintaining and health. `remote`
(with `remote_api`) has the same shape over another mesh's `/v1`. The pure views and rules they
share: reading, publishing, cursors, local_agent, importing, copying.
"""
