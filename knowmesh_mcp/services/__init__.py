"""The service layer: the one place every interface calls (`service.Service`), composed of one mixin
per concern, each in its own module: creating, node_reads, editing, searching, change_feed,
import_export, outcomes, failed_attempts, review, dedupe, issues, submission (the write limit),
syncing (with sync_checks and sync_writes), access (tokens), maintaining and health. The pure
views and rules they share: reading, publishing, cursors, local_agent, importing, remote, copying.
"""
