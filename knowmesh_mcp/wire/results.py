"""What the MCP tools return: one pydantic model per result shape, the source of each tool's
`outputSchema`.

The models describe the service's JSON as it is (the service builds plain dicts; these models
never build or reshape them). A tool's result is validated against its model before it is sent,
and clients validate it against the published schema, so a model must accept everything the
service returns:

- Every model allows keys it does not name (`additionalProperties: true`): the service may add
  keys, and open-ended parts (a request `body`, `provenance`, a diff's `old`/`new`) stay open.
- A key that is always present is required. A bounded read (`max_bytes`) or a `fields=` read
  drops keys, so most keys of a read and of a search result are optional; their identity keys
  never go. An optional key has its type when present and is never null unless the model says so.
- Closed sets of the design (trust, status, answer and failure states, outcomes) are enums;
  open ones (match tiers, next-step reasons, revision kinds) are strings.

Each family lives in its own module (`result_parts`: the base and the shared shapes;
`search_results`, `article_results`, `write_results`, `http_results`); this module names them
all, so a result model is `results.X` wherever it is defined.

Depends on pydantic only.
"""

from __future__ import annotations

from knowmesh_mcp.wire.article_results import (
    ArticleContent,
    ArticleHistory,
    ArticleView,
    EditableArticle,
    NodeSignature,
    Revision,
    SharedFailure,
)
from knowmesh_mcp.wire.http_results import (
    AuditLog,
    Change,
    ChangesPage,
    DedupeQueue,
    DedupeTaskReceipt,
    DedupeVoteResult,
    ErrorBody,
    ErrorDetail,
    FailureList,
    FailureReport,
    FeedbackList,
    HealthReport,
    IssueReceipt,
    IssueResolved,
    ListedNode,
    MaintainerAction,
    MergeConfirmed,
    NodeList,
    NodeRef,
    StatusChanged,
)
from knowmesh_mcp.wire.result_parts import (
    TRUST,
    Agent,
    AnswerState,
    Environment,
    FailedSolution,
    FailureState,
    FieldChange,
    NextSteps,
    Outcome,
    Request,
    Result,
    Solution,
    SolutionEvidence,
    Stats,
    Status,
    Trust,
    Verify,
    optional,
)
from knowmesh_mcp.wire.search_results import (
    Guidance,
    ResultSignature,
    SearchEnvelope,
    SearchResult,
)
from knowmesh_mcp.wire.write_results import (
    Counts,
    CreatedNode,
    FailedAttemptReceipt,
    FeedbackReceipt,
    PublishedEdit,
    ReviewItem,
    ReviewQueue,
    SimilarNode,
)

__all__ = [
    "Agent",
    "AnswerState",
    "ArticleContent",
    "ArticleHistory",
    "ArticleView",
    "AuditLog",
    "Change",
    "ChangesPage",
    "Counts",
    "CreatedNode",
    "DedupeQueue",
    "DedupeTaskReceipt",
    "DedupeVoteResult",
    "EditableArticle",
    "Environment",
    "ErrorBody",
    "ErrorDetail",
    "FailedAttemptReceipt",
    "FailedSolution",
    "FailureList",
    "FailureReport",
    "FailureState",
    "FeedbackList",
    "FeedbackReceipt",
    "FieldChange",
    "Guidance",
    "HealthReport",
    "IssueReceipt",
    "IssueResolved",
    "ListedNode",
    "MaintainerAction",
    "MergeConfirmed",
    "NextSteps",
    "NodeList",
    "NodeRef",
    "NodeSignature",
    "Outcome",
    "PublishedEdit",
    "Request",
    "Result",
    "ResultSignature",
    "ReviewItem",
    "ReviewQueue",
    "Revision",
    "SearchEnvelope",
    "SearchResult",
    "SharedFailure",
    "SimilarNode",
    "Solution",
    "SolutionEvidence",
    "Stats",
    "Status",
    "StatusChanged",
    "TRUST",
    "Trust",
    "Verify",
    "optional",
]
