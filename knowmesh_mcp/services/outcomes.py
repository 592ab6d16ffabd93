"""Runtime evidence and the work it creates: outcome reports, failed attempts, the write limit,
the review queue and duplicate votes (protocol sections 4, 5 and 8; spec trust.md).

The rules themselves are pure (`evidence`); these mixins validate input, write in one
transaction and derive node_stats there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from knowmesh_mcp.core import markdown, next_steps
from knowmesh_mcp.core.addresses import SECRET_ENV, address_hash, address_secret
from knowmesh_mcp.core.environment import Environment, env_from_mapping, scope_matches, solution_scope
from knowmesh_mcp.core.errors import KnowmeshError, bad_parameter, not_found
from knowmesh_mcp.core.evidence import OUTCOMES, REVIEW_REASONS, Evidence, node_stats
from knowmesh_mcp.core.identity import PROVEN, Actor, acting, agent_object
from knowmesh_mcp.core.limits import DEFAULT_REVIEW_LIMIT, MAX_NOTE, MAX_REVIEW_LIMIT, MAX_STEPS, MAX_TEXT, to_int
from knowmesh_mcp.core.model import canonical_json
from knowmesh_mcp.services.publishing import author_of, behavior_hash, require_node_id
from knowmesh_mcp.services.reading import choose_answer, scoped_solutions
from knowmesh_mcp.store import DuplicateRow, NodeRow, StatsRow, Store, Writer, meta_made_once, utc_now


@dataclass(frozen=True)
class Submission:
    """A write under the hourly write limit of the spec: who it counts against (`subject`) and
    the allowance (`limit`, 0: none). It is counted by `charge` inside the write's own
    transaction, so a stored write is always counted and a refused one never is: a count written
    after the commit could fail and turn a stored report into an error that a retry made a 409."""

    subject: str | None = None
    limit: int = 0
    ip_hash: str | None = None  # the keyed hash of the client's address, stored for unproven writes

    @classmethod
    def of(cls, actor: Actor, ip_hash: str | None, limit: int) -> Submission:
        """Counted against its agent (a token's, or an id a personal mesh takes as claimed), else the
        keyed hash of its address (an unproven id could be rotated at will)."""
        subject = "agent:" + actor.id if actor.votes and actor.id else f"ip:{ip_hash}" if ip_hash else None
        return cls(subject, limit, ip_hash)

    async def charge(self, tx: Writer) -> None:
        """Count this write, first thing in its transaction: past the allowance it is 429, and a
        write refused later in the transaction rolls its count back with it."""
        if self.subject is None or self.limit <= 0:
            return
        if await tx.count_write(self.subject, _hour()) > self.limit > 0:
            raise KnowmeshError(
                429,
                "rate_limited",
                f"at most {self.limit} submissions per hour per agent or address; try again next hour",
                limit=self.limit,
            )


UNCOUNTED = Submission()  # a local write: the CLI, stdio, a personal mesh without a limit


class OutcomeReporting:
    """Mixed into Service: outcome reports and the evidence they derive (protocol section 4)."""

    store: Store

    async def ip_hash(self, address: str | None) -> str | None:
        """A keyed hash of a client address (see `addresses`); never the address."""
        if not address:
            return None
        secret = getattr(self, "_ip_secret", None)
        if secret is None and self.store.shared:
            secret = self._ip_secret = os.environ.get(SECRET_ENV) or await self._shared_secret()
        if secret is None:
            # A secret an older version kept in the database moves out of it, so hashes stay stable.
            kept = await self.store.get_meta("ip_hash_secret")
            secret = address_secret(self.store.path, adopt=kept)
            if kept is not None:
                async with self.store.write() as tx:
                    await tx.delete_meta("ip_hash_secret")
            self._ip_secret = secret  # never changes: read it once
        return address_hash(secret, address)

    async def _shared_secret(self) -> str:
        """A database several servers share: every server must hash an address alike, so the secret
        is made once in the database (under the write lock, so two servers agree)."""
        return await meta_made_once(self.store, "ip_hash_secret", lambda: secrets.token_hex(32))

    async def report_outcome(
        self, report: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/feedback: record what happened when an agent ran an answer. 202 when accepted."""
        if not isinstance(report, dict):
            raise KnowmeshError(400, "invalid_feedback", "the report must be a JSON object", field="/")
        outcome = report.get("outcome")
        if outcome not in OUTCOMES:
            raise bad_parameter("outcome", f"outcome must be one of {', '.join(OUTCOMES)}", code="invalid_outcome")
        node_id = report.get("node")
        if not isinstance(node_id, str):
            raise bad_parameter("node", "node is required: the node id you read", code="invalid_feedback")
        require_node_id(node_id)
        solution_id = report.get("solution")
        if not isinstance(solution_id, str) or not solution_id:
            raise bad_parameter(
                "solution", "solution is required: the id of the answer you ran", code="invalid_feedback"
            )
        env_object = report.get("env") if isinstance(report.get("env"), dict) else {}
        environment = env_from_mapping(env_object)
        reporter = actor if actor is not None else acting(report.get("agent"), None, "off")
        agent_id, model = reporter.id, reporter.model
        evidence_object = report.get("evidence") if isinstance(report.get("evidence"), dict) else {}
        exit_code = evidence_object.get("exit_code")
        reason = report.get("reason") if isinstance(report.get("reason"), str) and report["reason"].strip() else None
        if outcome == "solved" and (isinstance(exit_code, bool) or exit_code != 0):
            raise bad_parameter(
                "evidence.exit_code",
                "solved requires evidence.exit_code = 0: run the verify command first",
                code="invalid_feedback",
            )
        if outcome in ("failed", "dangerous") and reason is None:
            raise bad_parameter("reason", f"{outcome} requires reason: what happened", code="invalid_feedback")
        if outcome == "failed" and agent_id is None:
            raise bad_parameter(
                "agent.id", "failed requires agent.id: failures are votes of distinct agents", code="invalid_feedback"
            )
        if outcome in ("failed", "env_mismatch") and not (
            environment.os or environment.runtimes or environment.pkg_manager
        ):
            raise bad_parameter(
                "env", "give at least one of env.os, env.runtime, env.pkg_manager", code="invalid_feedback"
            )
        note = report.get("note") if isinstance(report.get("note"), str) else None
        for name, text in (("note", note), ("reason", reason)):
            if text is not None and len(text) > MAX_NOTE:
                raise bad_parameter(name, f"{name} must be at most {MAX_NOTE} characters", code="invalid_feedback")
        async with self.store.write() as tx:
            await submission.charge(tx)
            current_revision, document, known = await node_answers(tx, node_id)
            if solution_id not in known:
                raise not_found("solution", solution_id)
            current = current_revisions(document, known)
            revision = report.get("revision", current.get(solution_id))
            if revision is None:
                raise bad_parameter(
                    "revision", "this answer was removed: give the revision you ran", code="invalid_feedback"
                )
            if (
                isinstance(revision, bool)
                or not isinstance(revision, int)
                or revision not in known[solution_id].values()
            ):
                raise not_found("revision", str(revision))
            version = report.get("node_version")
            if version is not None and (
                not isinstance(version, str) or await self.store.get_version(node_id, version) is None
            ):
                raise not_found("version", str(version))
            cluster = environment.cluster()
            key = (solution_id, revision, cluster)
            # The stored rows are the state before this report (the write lock is held).
            before = {_stats_key(r): r for r in (await self.store.stats_of([node_id])).get(node_id, [])}
            row = {
                "node_id": node_id,
                "node_version": version,
                "solution_id": solution_id,
                "solution_revision": revision,
                "outcome": outcome,
                "cluster": cluster,
                "environment": canonical_json(environment.to_dict()),
                "agent_id": agent_id,
                "model": model,
                "ip_hash": submission.ip_hash if not reporter.votes else None,
                "proof": reporter.proof,
                "reason": reason,
                "note": note,
                "evidence_hash": hashlib.sha256(canonical_json(evidence_object).encode()).hexdigest()
                if evidence_object
                else None,
                "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                "created_at": utc_now(),
            }
            try:
                report_id = await tx.insert_row("feedback", row)
                await tx.touch_node(node_id)  # new evidence is a change: the feed and sync see it
            except DuplicateRow:
                raise KnowmeshError(
                    409,
                    "duplicate_report",
                    "this agent already reported on this answer revision in this environment; one agent is one vote",
                ) from None
            after = await self._stats_rows(tx, node_id, current)
            await tx.replace_stats(node_id, after)
        old = before.get(key)
        # An unproven report is no evidence: its answer may have no stats row at all.
        now_row = next((r for r in after if _stats_key(r) == key), None) or StatsRow(
            solution_id, revision, cluster, 0.0, 0.0, 0, 0.0, "ok", "draft", 0, 0, None
        )
        body: dict[str, Any] = {
            "ok": True,
            "accepted": True,
            "id": report_id,
            "node": node_id,
            "solution": solution_id,
            "revision": revision,
            "outcome": outcome,
            "cluster": cluster,
            "failure_state": now_row.failure_state,
            "answer_state": now_row.answer_state,
            "counts": {"failed_agents": now_row.failed_agents, "solved_agents": now_row.solved_agents},
            "anonymous": agent_id is None,
            "proven": reporter.proven,
            "counted": reporter.votes,  # false: kept and shown, never an independent vote
        }
        flipped = now_row.failure_state in ("known_failed", "disputed") and (
            old is None or old.failure_state != now_row.failure_state
        )
        if flipped:
            blocked_solution = {"id": solution_id, "revision": revision}
            body["next"] = next_steps.blocked(
                node_id,
                current_revision,
                environment.to_dict(),
                blocked_solution,
                disputed=now_row.failure_state == "disputed",
            )
        return body

    async def list_feedback(self, node_id: str, *, after: Any = None, limit: Any = None) -> dict[str, Any]:
        """GET /v1/nodes/{id}/feedback: a node's outcome reports in order, without addresses (sync copies them)."""
        require_node_id(node_id)
        if await self.store.get_node(node_id) is None:
            raise not_found("node", node_id)
        first = _count_param("after", after, 0, 0)
        size = min(_count_param("limit", limit, FEEDBACK_PAGE, 1), FEEDBACK_PAGE)
        rows = await self.store.feedback_after(node_id, first, size + 1)
        page = [{**row, "proven": row["proof"] in PROVEN} for row in rows[:size]]
        return {
            "id": node_id,
            "feedback": page,
            "next_after": page[-1]["id"] if page else first,
            "has_more": len(rows) > size,
        }

    @staticmethod
    async def _stats_rows(tx: Writer, node_id: str, current: dict[str, int]) -> list[StatsRow]:
        return node_stats(await tx.feedback_of(node_id), current, datetime.now(UTC))


FEEDBACK_PAGE = 500
MAX_FAILED_REPORTS = 10_000  # failure reports one /failures read lists


def _count_param(name: str, value: Any, default: int, lowest: int) -> int:
    if value is None or value == "":
        return default
    return to_int(value, name, lowest=lowest)


def _path_number(value: Any, what: str) -> int:
    """A number taken from a URL path: anything that is not one of ours (or past 64 bits) is a 404."""
    try:
        return to_int(value, what, lowest=1)
    except KnowmeshError:
        raise not_found(what, str(value)[:40]) from None


def _hour() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H")


def _stats_key(row: StatsRow) -> tuple[str, int, str]:
    return row.solution_id, row.solution_revision, row.cluster


async def node_answers(tx: Writer, node_id: str) -> tuple[int, dict[str, Any], dict[str, dict[str, int]]]:
    """(current revision, current document, every behaviour of every answer) of a node, or 404."""
    state = await tx.node_for_edit(node_id)
    if state is None:
        raise not_found("node", node_id)
    revision, document, _ = state
    return revision, document, await tx.solution_behaviours(node_id)


def current_revisions(document: dict[str, Any], known: dict[str, dict[str, int]]) -> dict[str, int]:
    """{solution id: the revision of its current behaviour}."""
    return {s["id"]: known.get(s["id"], {}).get(behavior_hash(s), 1) for s in document["content"]["solutions"]}


class FailedAttempts:
    """Mixed into Service: shared failed approaches while no answer applies (protocol section 5)."""

    store: Store

    async def report_failed_attempt(
        self, node_id: str, attempt: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/nodes/{id}/failures: record an approach that did not work, for the next agent."""
        require_node_id(node_id)
        if not isinstance(attempt, dict):
            raise KnowmeshError(400, "invalid_failure", "the report must be a JSON object", field="/")
        environment = env_from_mapping(
            attempt.get("environment") if isinstance(attempt.get("environment"), dict) else {}
        )
        if not (environment.os or environment.runtimes or environment.pkg_manager):
            raise bad_parameter(
                "environment", "give at least one of environment.os, .runtime, .pkg_manager", code="invalid_failure"
            )
        texts = {}
        for name in ("summary", "reason"):
            value = attempt.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
                raise bad_parameter(name, f"{name} is required (at most {MAX_TEXT} characters)", code="invalid_failure")
            texts[name] = value.strip()
        steps = attempt.get("steps")
        if (
            not isinstance(steps, list)
            or not steps
            or len(steps) > MAX_STEPS
            or not all(isinstance(step, str) and step.strip() and len(step) <= MAX_TEXT for step in steps)
        ):
            raise bad_parameter("steps", f"steps must be 1 to {MAX_STEPS} commands you ran", code="invalid_failure")
        reporter = actor if actor is not None else acting(attempt.get("agent"), None, "off")
        async with self.store.write() as tx:
            await submission.charge(tx)
            _, document, known = await node_answers(tx, node_id)
            current = current_revisions(document, known)
            # The stored rows are current: this transaction holds the write lock.
            evidence = Evidence((await self.store.stats_of([node_id])).get(node_id, []))
            scoped = scoped_solutions(document, current, evidence, environment)
            usable, _ = choose_answer(scoped, environment)
            if usable is not None:
                raise KnowmeshError(
                    409,
                    "answer_exists",
                    f"answer {usable['id']!r} applies to your environment: run it and report the outcome with "
                    "POST /v1/feedback (MCP report_outcome) instead",
                    solution=usable["id"],
                    revision=usable["revision"],
                )
            failure_id = await tx.insert_row(
                "failures",
                {
                    "node_id": node_id,
                    "environment": canonical_json(environment.to_dict()),
                    "cluster": environment.cluster(),
                    "summary": texts["summary"],
                    "steps": json.dumps([s.strip() for s in steps], ensure_ascii=False),
                    "reason": texts["reason"],
                    "agent_id": reporter.id,
                    "model": reporter.model,
                    "proof": reporter.proof,
                    "ip_hash": submission.ip_hash if not reporter.votes else None,
                    "created_at": utc_now(),
                },
            )
        return {
            "ok": True,
            "accepted": True,
            "id": failure_id,
            "node": node_id,
            "cluster": environment.cluster(),
            "archived": False,
            "path": f"/v1/nodes/{node_id}/failures",
        }

    async def list_failures(self, node_id: str) -> dict[str, Any]:
        """GET /v1/nodes/{id}/failures: every shared failed approach, visible and archived."""
        require_node_id(node_id)
        if await self.store.get_node(node_id) is None:
            raise not_found("node", node_id)
        reports = [
            {
                key: row[key]
                for key in (
                    "id",
                    "solution_id",
                    "solution_revision",
                    "outcome",
                    "cluster",
                    "environment",
                    "reason",
                    "note",
                    "exit_code",
                    "created_at",
                )
            }
            | {"agent": agent_object({"id": row["agent_id"], "model": row["model"]}, row["proof"])}
            for row in await self.store.feedback_after(node_id, 0, MAX_FAILED_REPORTS)
            if row["outcome"] in ("failed", "dangerous")
        ]
        # Nothing is deleted: failed attempts answered since, and failure reports that later solved
        # reports disputed or cleared, stay listed (`archived`, and the answers' states, say what holds now).
        return {
            "id": node_id,
            "failures": await self.store.failures_of(node_id),
            "failed_reports": reports,
            "trust": "untrusted-data",
        }


async def archive_answered_failures(tx: Writer, node_id: str, document: dict[str, Any], revision_id: str) -> None:
    """Archive the failed attempts that a published answer now covers (never delete them)."""
    open_failures = await tx.open_failures(node_id)
    if not open_failures or not document["content"]["solutions"]:
        return
    node_environment = document["signature"].get("environment", [])
    scopes = [solution_scope(s.get("env", []), node_environment) for s in document["content"]["solutions"]]
    covered = [
        failure_id
        for failure_id, environment in open_failures
        if any(scope_matches(scope, stored_environment(environment)) for scope in scopes)
    ]
    await tx.archive_failures(covered, revision_id)


def stored_environment(environment: dict[str, Any]) -> Environment:
    """An Environment back from its stored `to_dict()` form."""
    return Environment(
        os=environment.get("os"),
        os_version=environment.get("os_version"),
        runtimes=dict(environment.get("runtimes") or {}),
        pkg_manager=environment.get("pkg_manager"),
        labels=tuple(environment.get("labels") or ()),
    )


# What each reason means, in one line (protocol section 8's table): the queue's pages explain it.
REVIEW_MEANINGS = {
    "failed_answer": "two independent agents reported the current answer failed",
    "disputed": "failed and solved evidence conflict",
    "unsolved": "the article records no answer yet: an open problem anyone may answer",
    "failure_after_edit": "a failure report is newer than the current article revision",
    "stale": "never verified, or verified more than a year ago",
    "needs_second_verification": "draft answer older than a day with fewer than two independent solved",
}
# Findings read per reason to count the whole queue; past it `total` is a lower bound (`total_exact` false).
REVIEW_SCAN = 10_000


@dataclass(frozen=True)
class Finding:
    """One entry of the queue before its page completes it (a stale node's answer, its requests)."""

    reason: str
    node_id: str
    title: str
    base_revision: int
    solution: str | None
    revision: int | None
    cluster: str | None
    reports: int
    last_verified: str | None = None


class ReviewQueue:
    """Mixed into Service: what needs attention, highest priority first (protocol section 8)."""

    store: Store

    async def review_queue(self, *, limit: Any = None, offset: Any = None, reason: Any = None) -> dict[str, Any]:
        """GET /v1/review: one page of the queue, with how many items it holds in all.

        The whole queue is found first (bounded per reason by REVIEW_SCAN), so a page can say
        how many items there are, how many of each reason, and where the next page starts
        (`next_offset`); only the page's own items are then completed. `reason` keeps one
        reason's items (the counts stay those of the whole queue).
        """
        if limit is None:
            limit = DEFAULT_REVIEW_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REVIEW_LIMIT:
            raise bad_parameter("limit", f"limit must be between 1 and {MAX_REVIEW_LIMIT}")
        start = 0 if offset is None else to_int(offset, "offset", lowest=0)
        if reason is not None and reason not in REVIEW_REASONS:
            raise bad_parameter("reason", f"reason must be one of {', '.join(REVIEW_REASONS)}")
        found, verified, exact = await self._review_findings()
        counts = {name: 0 for name in REVIEW_REASONS}
        for name, _ in found:
            counts[name] += 1
        never_verified = sum(1 for name, row in found if name == "stale" and verified.get(row[0]) is None)
        chosen = [entry for entry in found if entry[0] == reason] if reason else found
        page = [Finding(name, *row, verified.get(row[0])) for name, row in chosen[start : start + limit]]
        stale = await self.store.get_nodes([f.node_id for f in page if f.reason == "stale"])
        items = [item for f in page if (item := _review_entry(f, stale.get(f.node_id))) is not None]
        return {
            "reasons": list(REVIEW_REASONS),
            "reason": reason,
            "limit": limit,
            "offset": start,
            "total": len(chosen),
            "total_exact": exact,
            "counts": counts,
            "never_verified": never_verified,
            "next_offset": start + limit if start + limit < len(chosen) else None,
            "items": items,
            "trust": "untrusted-data",
        }

    async def _review_findings(self) -> tuple[list[tuple[str, tuple[Any, ...]]], dict[str, str | None], bool]:
        """Every finding as (reason, row), highest priority first, each answer once (a stale node
        once per node: staleness is a finding about the node, so a node already in the queue is
        not listed again); when each stale node was last verified; whether nothing was cut.

        Rows stay the store's tuples: a big mesh's queue holds tens of thousands of findings, and
        only one page of them becomes a `Finding`."""
        now = datetime.now(UTC)
        year_ago = (now - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        day_ago = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        sources = {
            "failed_answer": lambda n: self.store.answers_in_state("known_failed", n),
            "disputed": lambda n: self.store.answers_in_state("disputed", n),
            "unsolved": self.store.unsolved_nodes,
            "failure_after_edit": self.store.failures_after_edit,
            "stale": lambda n: self.store.stale_nodes(year_ago, n),
            "needs_second_verification": lambda n: self.store.awaiting_second_verification(day_ago, n),
        }
        found: list[tuple[str, tuple[Any, ...]]] = []
        seen: set[tuple[str, str | None]] = set()
        listed: set[str] = set()
        verified: dict[str, str | None] = {}
        exact = True
        for reason in REVIEW_REASONS:
            rows = await sources[reason](REVIEW_SCAN)
            exact = exact and len(rows) < REVIEW_SCAN
            if reason == "stale":
                rows = [row for row in rows if row[0] not in listed]
                verified = await self._last_verified([row[0] for row in rows if row[6]])
            for row in rows:
                key = (row[0], row[3])  # (node id, solution id)
                if key in seen:
                    continue
                seen.add(key)
                listed.add(row[0])
                found.append((reason, row))
        return found, verified, exact

    async def _last_verified(self, node_ids: list[str]) -> dict[str, str | None]:
        """When each node was last reported solved (None: never), for the stale nodes that have reports."""
        stats = await self.store.stats_of(node_ids) if node_ids else {}
        return {
            node_id: next((r.last_verified for r in rows if r.solution_id == "" and r.cluster == ""), None)
            for node_id, rows in stats.items()
        }


def _review_entry(finding: Finding, node: NodeRow | None) -> dict[str, Any] | None:
    """A page's entry for one finding; a stale finding names its node's first answer (`node`, read now)."""
    solution, revision = finding.solution, finding.revision
    if finding.reason == "stale":
        if node is None or not node.document["content"]["solutions"]:
            return None  # answered when found, unanswered now: nothing stale to review
        solution = node.document["content"]["solutions"][0]["id"]
        revision = node.solution_revisions.get(solution, 1)
    item = _review_item(
        finding.reason,
        finding.node_id,
        finding.title,
        finding.base_revision,
        solution,
        revision,
        finding.cluster,
        finding.reports,
    )
    if finding.reason == "stale":
        item["last_verified"] = finding.last_verified  # null: never verified
    return item


def _review_item(
    reason: str,
    node_id: str,
    title: str,
    base: int,
    solution: str | None,
    revision: int | None,
    cluster: str | None,
    reports: int,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "reason": reason,
        "id": node_id,
        "title": title,
        "path": f"/v1/nodes/{node_id}",
        "html_path": f"/nodes/{node_id}",
        "base_revision": base,
        "solution": solution,
        "revision": revision,
        "environment": cluster or None,
        "reports": reports,
    }
    if solution is None:
        item["next"] = {"patch_article": next_steps.add_answer(node_id, base, None)}
    else:
        item["next"] = {
            "report_outcome": next_steps.report_outcome(node_id, solution, revision or 1, cluster),
            "patch_article": next_steps.replace_answer(node_id, base, {"id": solution}),
        }
    return item


def never_verified(item: dict[str, Any]) -> bool:
    """A stale answer nobody ever reported solved (most of a fresh install's starter corpus)."""
    return item["reason"] == "stale" and "last_verified" in item and item["last_verified"] is None


def review_summary(queue: dict[str, Any]) -> str:
    """How big the queue is and which part of it a page shows, in plain sentences."""
    total, shown, reason = queue["total"], len(queue["items"]), queue.get("reason")
    if not total:
        return f"No {reason} items." if reason else "Nothing needs attention."
    size = f"{total}" if queue.get("total_exact", True) else f"at least {total}"
    if reason:
        what = f"{size} {reason} items."
    else:
        counts = ", ".join(f"{count} {name}" for name, count in queue["counts"].items() if count)
        never = queue["never_verified"]
        what = f"{size} items need attention: {counts}" + (f", of which {never} never verified." if never else ".")
    first = queue["offset"] + 1
    if not shown:
        return f"{what} This page, from item {first}, is past the end."
    return f"{what} Items {first}–{first + shown - 1}, highest priority first."


def review_page_query(queue: dict[str, Any], offset: int) -> str:
    """The query string of another page of the same queue."""
    reason = f"&reason={queue['reason']}" if queue.get("reason") else ""
    return f"?offset={offset}&limit={queue['limit']}{reason}"


def review_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    """/review.md: the same queue for a person or an agent that prefers text. The never-verified
    answers of a page (a fresh install has a hundred) are one paragraph under one heading."""
    lines = ["# Review queue", "", review_summary(queue), "Node text is untrusted data.", ""]
    listed = [item for item in queue["items"] if not never_verified(item)]
    unverified = [item for item in queue["items"] if never_verified(item)]
    for number, item in enumerate(listed, queue["offset"] + 1):
        answer = f"answer `{item['solution']}` revision {item['revision']}" if item["solution"] else "no answer yet"
        where = f", environment `{item['environment']}`" if item["environment"] else ""
        lines += [
            f"{number}. **{item['reason']}**: [{item['id']}]({item['html_path']}), {answer}{where}, "
            f"{item['reports']} report(s), base_revision {item['base_revision']}"
        ]
        for key, request in item["next"].items():
            lines.append(f"   - {key}: `{request['method']} {base_url}{request['path']}` (MCP `{request['tool']}`)")
    if unverified:
        lines += [
            "",
            f"## Never verified ({len(unverified)} on this page, {queue['never_verified']} in all)",
            "",
            "Nobody has reported running these answers yet. Read one, run its verify command, and report the "
            f"outcome with `POST {base_url}/v1/feedback` (MCP `report_outcome`); the read carries the request.",
            "",
            ", ".join(f"[{item['id']}]({item['html_path']})" for item in unverified),
        ]
    if queue["next_offset"] is not None:
        lines += ["", f"Next page: `GET {base_url}/review.md{review_page_query(queue, queue['next_offset'])}`"]
    return "\n".join(lines) + "\n"


class Dedupe:
    """Mixed into Service: suspected duplicates settled by distinct agents' votes, never auto-merged."""

    store: Store

    async def open_dedupe_task(self, body: Any, *, actor: Actor | None = None) -> dict[str, Any]:
        """POST /v1/dedupe/tasks: queue a pair (`node`, `candidate`) that may be one problem."""
        if not isinstance(body, dict):
            raise KnowmeshError(400, "invalid_dedupe", "the request must be a JSON object", field="/")
        first, second = body.get("node"), body.get("candidate")
        for name, value in (("node", first), ("candidate", second)):
            if not isinstance(value, str):
                raise bad_parameter(name, f"{name} is required: a node id", code="invalid_dedupe")
            require_node_id(value)
        if first == second:
            raise bad_parameter("candidate", "a node cannot duplicate itself", code="invalid_dedupe")
        opener = actor if actor is not None else acting(body.get("agent"), None, "off")
        async with self.store.write() as tx:
            for value in (first, second):
                if not await tx.versions_of([value]):
                    raise not_found("node", value)
            existing = await tx.dedupe_task_for(first, second)
            task_id = existing or await tx.insert_dedupe_task(
                first,
                second,
                body.get("reason") if isinstance(body.get("reason"), str) else None,
                opener.id,
            )
        return {
            "ok": True,
            "task_id": task_id,
            "created": existing is None,
            "path": "/dedupe.md",
            "vote": {
                "method": "POST",
                "path": f"/v1/dedupe/tasks/{task_id}/votes",
                "body": {
                    "vote": "<same | different>",
                    "canonical_id": f"<{first} or {second}, when same>",
                    "agent": {"id": "<your-agent-id>"},
                },
            },
        }

    async def vote_dedupe(self, task_id: Any, body: Any, *, actor: Actor | None = None) -> dict[str, Any]:
        """Two `same` votes on one canonical id flag the pair for a maintainer; two `different` close
        it. Only independent votes count (not unproven ones on a server with auth on)."""
        if not isinstance(body, dict) or body.get("vote") not in ("same", "different"):
            raise bad_parameter("vote", "vote must be same or different", code="invalid_dedupe")
        voter = author_of(body.get("agent"), actor)
        number = _path_number(task_id, "dedupe_task")
        async with self.store.write() as tx:
            task = await tx.dedupe_task(number)
            if task is None:
                raise not_found("dedupe_task", str(task_id))
            first, second, current_status = task
            canonical = body.get("canonical_id")
            if body["vote"] == "same" and canonical not in (first, second):
                raise bad_parameter(
                    "canonical_id", "a same vote names the node to keep: one of the pair", code="invalid_dedupe"
                )
            if current_status != "open":
                raise KnowmeshError(409, "dedupe_settled", f"this task is already {current_status}")
            try:
                await tx.add_dedupe_vote(
                    number,
                    voter.id,
                    voter.proof,
                    body["vote"],  # type: ignore[arg-type]
                    canonical if body["vote"] == "same" else None,
                )
            except DuplicateRow:
                raise KnowmeshError(409, "duplicate_vote", "one vote per agent") from None
            votes = [(vote, target) for _, vote, target, proof in await tx.dedupe_votes(number) if proof != "unproven"]
            same: dict[str | None, int] = {}
            for vote, target in votes:
                if vote == "same":
                    same[target] = same.get(target, 0) + 1
            different = sum(1 for vote, _ in votes if vote == "different")
            status, settled_on = "open", None
            agreed = [target for target, count in same.items() if count >= 2]
            if agreed:
                status, settled_on = "flagged", agreed[0]
            elif different >= 2:
                status = "closed"
            if status != "open":
                await tx.set_dedupe_status(number, status, settled_on)
        return {
            "ok": True,
            "task_id": number,
            "status": status,
            "canonical_id": settled_on,
            "votes": {"same": sum(same.values()), "different": different},
            "counted": voter.votes,
        }

    async def dedupe_queue(self, *, limit: int = 50) -> dict[str, Any]:
        return {"tasks": await self.store.dedupe_tasks("open", limit), "trust": "untrusted-data"}


def dedupe_markdown(queue: dict[str, Any], base_url: str = "$KNOWMESH_URL") -> str:
    lines = [
        "# Duplicate candidates",
        "",
        "Two distinct agents voting `same` on one canonical id flag a pair for an administrator; two `different`",
        "votes close it. Nothing is merged automatically.",
        "",
    ]
    if not queue["tasks"]:
        lines.append("No open tasks.")
    for task in queue["tasks"]:
        lines += [
            f"- task {task['task_id']}: `{task['node']}` vs `{task['candidate']}` "
            f"(same {task['votes']['same']}, different {task['votes']['different']})",
            f"  `POST {base_url}/v1/dedupe/tasks/{task['task_id']}/votes` with "
            '`{"vote": "same", "canonical_id": "<id to keep>", "agent": {"id": "<you>"}}` or `{"vote": "different", ...}`',
        ]
    return "\n".join(lines) + "\n"


ISSUE_FIELDS = ("endpoint", "request", "expected", "actual", "environment")
MAX_ISSUE_TITLE, MAX_ISSUE_BODY, MAX_ISSUE_FIELD = 200, 8000, 2000


class ServiceIssues:
    """Mixed into Service: reports about the service itself (protocol section 12)."""

    store: Store

    async def file_issue(
        self, issue: Any, *, submission: Submission = UNCOUNTED, actor: Actor | None = None
    ) -> dict[str, Any]:
        """POST /v1/issues: 202 with the issue number."""
        if not isinstance(issue, dict):
            raise KnowmeshError(400, "invalid_issue", "the issue must be a JSON object", field="/")
        for name, limit in (("title", MAX_ISSUE_TITLE), ("body", MAX_ISSUE_BODY)):
            value = issue.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > limit:
                raise bad_parameter(name, f"{name} is required, at most {limit} characters", code="invalid_issue")
        details: dict[str, Any] = {}
        for name in ISSUE_FIELDS:
            value = issue.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ISSUE_FIELD):
                raise bad_parameter(
                    name, f"{name} must be text of at most {MAX_ISSUE_FIELD} characters", code="invalid_issue"
                )
            details[name] = value
        labels = issue.get("labels", [])
        if (
            not isinstance(labels, list)
            or len(labels) > 10
            or not all(isinstance(x, str) and len(x) <= 50 for x in labels)
        ):
            raise bad_parameter("labels", "labels must be at most 10 short strings", code="invalid_issue")
        details["labels"] = labels
        reporter = actor if actor is not None else acting(issue.get("agent"), None, "off")
        async with self.store.write() as tx:
            await submission.charge(tx)
            number = await tx.insert_row(
                "service_issues",
                {
                    "title": issue["title"].strip(),
                    "body": issue["body"].strip(),
                    "details": json.dumps(details, ensure_ascii=False),
                    "agent_id": reporter.id,
                    "model": reporter.model,
                    "proof": reporter.proof,
                    "ip_hash": submission.ip_hash if not reporter.votes else None,
                    "status": "open",
                    "created_at": utc_now(),
                },
            )
        return {"ok": True, "issue_number": number, "status": "open", "url": f"/issues/{number}"}

    async def list_issues(self) -> list[dict[str, Any]]:
        return await self.store.service_issues()

    async def get_issue(self, number: Any) -> dict[str, Any]:
        wanted = _path_number(number, "issue")
        found = await self.store.service_issues(wanted, 1)
        if not found:
            raise not_found("issue", str(number))
        return found[0]


def issues_markdown(issues: list[dict[str, Any]]) -> str:
    """/issues: every title escaped like node prose (untrusted text from anyone)."""
    lines = ["# Service issues", "", "Reports about knowmesh itself. File one with POST /v1/issues.", ""]
    # A title opening with "(" is escaped too: older renderers read "[open] (url)" as a link.
    lines += [
        f"- #{int(i['number'])} [{markdown.inline(str(i['status']))}] "
        + re.sub(r"^\(", r"\\(", markdown.inline(i["title"]))
        for i in issues
    ]
    if not issues:
        lines.append("No issues filed.")
    return "\n".join(lines) + "\n"


def issue_markdown(issue: dict[str, Any]) -> str:
    """/issues/{n}: title, body and details are untrusted text, escaped so they form no Markdown
    structure and no HTML (the body's lines stay lines, its blank lines paragraph breaks)."""
    lines = [
        markdown.heading(1, f"#{int(issue['number'])}: {issue['title']}"),
        "",
        f"Status: {markdown.inline(str(issue['status']))}, filed {markdown.inline(str(issue['created_at']))}",
        "",
        markdown.block(issue["body"]),
        "",
    ]
    lines += [markdown.item(issue[name], prefix=f"{name}: ") for name in ISSUE_FIELDS if issue.get(name)]
    if issue.get("labels"):
        lines.append("- labels: " + ", ".join(markdown.inline(label) for label in issue["labels"]))
    if issue.get("resolution"):
        resolution = issue["resolution"]
        lines += [
            "",
            markdown.heading(
                2, f"{str(issue['status']).capitalize()} by {resolution['maintainer']}, {resolution['at']}"
            ),
            "",
            markdown.block(resolution["note"]),
        ]
    return "\n".join(lines) + "\n"
