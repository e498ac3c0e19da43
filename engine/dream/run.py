"""The dream run (docs/DESIGN.md, *Dream*): maintenance, topics, one answer per topic
applied through the extraction updater, the state of handled topics, the DREAMS.md
diary. A dry run lists the topics and writes nothing."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from ..errors import DiskFull, MemlinkError
from ..extract.batch import pending_sources, retry_pending
from ..extract.loop import ExtractionRejected, LLMExtractor
from ..extract.updater import MemoryUpdater
from ..index import SearchIndex
from ..lint.report import fix, lint
from ..llm import Breaker, LLMError
from ..model.text import counted
from ..storage.atomic import atomic_write_text
from ..storage.vault import Vault
from ..storage.writes import person_links
from .draft import dream_context, keep_earlier_answers, llm_operations, mark_drafted, rules_operations
from .operations import check_dream_operations, resolve_dream
from .topics import NOTHING_YET, OPEN, PARTLY, Topic, discover

if TYPE_CHECKING:
    from pathlib import Path

    from ..llm import Provider

DREAMS_FILE = "DREAMS.md"


class DreamBusy(MemlinkError):
    """Another dream is running on this vault."""


@dataclass
class DreamReport:
    topics: list[dict] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    no_report: list[str] = field(default_factory=list)  # topics whose answer held no report
    nothing_yet: list[str] = field(default_factory=list)  # questions no note is evidence for: still open
    links_added: int = 0  # links the answers proposed that were new (derived_from included)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # topics whose answer failed, sources still pending (also in skipped)
    deferred: list[str] = field(default_factory=list)  # topics not started: budget spent or stopped
    fallback: str = ""  # why the run went on with the rules, or stopped, after model failures
    maintenance: dict = field(default_factory=dict)
    provider: str = "rules"
    dry_run: bool = False

    def to_json(self) -> dict:
        return dict(self.__dict__)


# -- state ----------------------------------------------------------------------------------------
def _state_path(vault: Vault) -> Path:
    return vault.state_dir / "dream" / "state.json"


def load_state(vault: Vault) -> dict:
    try:
        return json.loads(_state_path(vault).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {"done": {}}


def save_state(vault: Vault, state: dict) -> None:
    atomic_write_text(_state_path(vault), json.dumps(state, ensure_ascii=False, indent=1))


# -- the run ----------------------------------------------------------------------------------------
def dream(vault: Vault, *, provider: Provider | None = None, dry_run: bool = False,
          progress: Callable[[int, int], None] | None = None, wait: float = 0.0,
          budget: float | None = None) -> DreamReport:
    """``budget``: seconds after which no topic is started and no model call runs
    (default: the vault's ``dream.budget_seconds``): a call still waiting then fails
    with a timeout and its topic waits for the next run."""
    if dry_run:  # reads through a read-only view: no lock file, no database write, no replay
        view = vault if vault.read_only else Vault.open(vault.root, read_only=True)
        return _run(view, provider, True, progress, budget)
    lock = FileLock(str(vault.state_dir / "dream.lock"))
    vault.state_dir.mkdir(exist_ok=True)
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        raise DreamBusy(f"another dream is running on {vault.root}") from None
    try:
        return _run(vault, provider, dry_run, progress, budget)
    finally:
        lock.release()


def _run(vault: Vault, provider: Provider | None, dry_run: bool,
         progress: Callable[[int, int], None] | None, budget: float | None) -> DreamReport:
    started = time.monotonic()  # the budget counts maintenance too: it is the run's time
    limit = vault.config.dream.budget_seconds if budget is None else budget
    report = DreamReport(provider=provider.name if provider else "rules", dry_run=dry_run)
    if provider is not None:
        provider = provider.until(started + limit)  # no call outlives the budget
    # One count of failed model answers for the whole run: pending sources and topics.
    breaker = Breaker(vault.config.llm.max_failures)
    state = load_state(vault)
    day = dt.date.today().isoformat()
    if not dry_run:  # maintenance first: the topics then see a tidy vault
        repaired = fix(vault)
        # Sources an interrupted ingest left pending get their memories now (docs/DESIGN.md,
        # "Units of work"); one that still fails stays pending and is reported.
        finished = 0
        if pending_sources(vault):
            # (with the dream's model, bounded as its topics are; else as the vault chooses)
            retried = retry_pending(vault, LLMExtractor(provider, breaker) if provider else None)
            finished = len(retried.files)
            report.skipped += [f"{p['source']}: still pending ({p['error']})" for p in retried.pending]
            report.failed += [p["source"] for p in retried.pending]  # an exit code cron sees
        sync = SearchIndex.for_vault(vault).sync()
        report.maintenance = {"links_repaired": len(repaired), "reindexed": sync.changed, "sources_finished": finished}
    topics = discover(vault, state, dry_run=dry_run, llm=provider is not None)
    most = vault.config.dream_max_reports
    if len(topics) > most:  # the user's own questions come first in the list
        report.skipped.append(f"{counted(len(topics) - most, 'more topic')} wait for the next run (dream_max_reports: {most})")
        topics = topics[:most]
    report.topics = [{"kind": t.kind, "question": t.question, "notes": t.notes} for t in topics]
    if dry_run:
        return report
    _answer_topics(vault, provider, breaker, topics, report, state, day, (started, limit), progress)
    with lint(vault) as linted:
        report.maintenance["orphans"] = linted.counts.get("orphans", 0)
    state["last_run"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    save_state(vault, state)
    _diary(vault, report)
    return report


def _answer_topics(vault: Vault, provider: Provider | None, breaker: Breaker, topics: list[Topic], report: DreamReport,
                   state: dict, day: str, budget: tuple[float, float],
                   progress: Callable[[int, int], None] | None) -> None:
    """One topic after another, within the time budget ((started, seconds)). Once the model has
    failed ``llm.max_failures`` answers in a row the rest go to the rules or wait, as
    ``dream.on_llm_failure`` says (docs/DESIGN.md, "Dream")."""
    settings = vault.config.dream
    for n, topic in enumerate(topics, 1):
        if provider is not None and breaker.tripped:  # (maintenance's pending sources count too)
            if settings.on_llm_failure == "stop":
                report.fallback = f"{breaker.why()}: stopped (dream.on_llm_failure: stop)"
                _defer(report, topics[n - 1:], report.fallback)
                return
            report.fallback = f"{breaker.why()}: the remaining topics were answered by the rules"
            provider = None
        started, limit = budget
        if time.monotonic() - started >= limit:  # (a call in flight stops at the budget too: ``until``)
            _defer(report, topics[n - 1:], f"the time budget of {limit:g} s is spent")
            return
        try:
            if handle_topic(vault, provider, topic, report):
                state.setdefault("done", {})[topic.key] = day
            if provider is not None:
                breaker.answered()
        except (LLMError, ExtractionRejected) as exc:  # the model failed (no answer, or one that does not fit)
            report.failed.append(topic.question)
            report.skipped.append(f"{topic.question}: {exc}")
            if provider is not None:
                breaker.failed(exc)
        except DiskFull:
            raise  # no room for any later topic either: stop, saying what is recorded
        except MemlinkError as exc:
            report.failed.append(topic.question)
            report.skipped.append(f"{topic.question}: {exc}")
        if progress:
            progress(n, len(topics))


def _defer(report: DreamReport, rest: list[Topic], why: str) -> None:
    """Topics not started stay unhandled, so the next run offers them again."""
    if rest:
        report.deferred += [t.question for t in rest]
        report.skipped.append(f"{counted(len(rest), 'topic')} wait for the next run: {why}")


def handle_topic(vault: Vault, provider: Provider | None, topic: Topic, report: DreamReport) -> bool:
    """Answer one topic and apply the answer; True when the topic counts as handled.
    A candidate (the user's question) is handled only by a report: with none it stays
    pending for the next dream, which may know more."""
    ctx = dream_context(vault, topic)
    if provider:
        ops = llm_operations(vault, provider, topic, ctx)
    else:
        ops = rules_operations(vault, topic, ctx)
        try:  # the rules meet the same contract; a miss here is a bug, reported, not written
            check_dream_operations(ops, ctx, vault)
        except ValueError as exc:
            raise MemlinkError(f"the rules' report does not fit: {exc}") from None
    provenance, default = vault.config.link_table().role("provenance"), vault.config.link_table().role("default")
    # The model was asked above, outside the vault lock; what it answered lands as one unit
    # of work: reports, their links, the audit record and the answered question together.
    with vault.transaction() as tx:
        resolved = resolve_dream(ops, ctx, provenance)
        theirs = keep_earlier_answers(vault, resolved)  # (a person's answer is never written over)
        run = MemoryUpdater(vault).apply_operations(resolved, ctx, provider.name if provider else "rules",
                                                    f"dream {topic.key}", autolink=False)
        written = run.created + [c["uri"] for c in run.changed] + run.unchanged
        mark_drafted(vault, tx, [uri for uri in written if uri not in theirs])
        if written and topic.candidate:
            # The rules' report gathers what the vault holds and says the question stays
            # open, so the question is not done: an LLM dream takes it up again.
            status = "done" if provider else PARTLY
            vault.write_note("report_candidate", {"status": status, "report_uri": written[0]}, uri=topic.candidate)
            vault.link_many([(topic.candidate, uri, default, {"description": "answered by this report"})
                             for uri in written], persons=person_links(vault))
    report.written += [uri for uri in written if uri not in report.written]  # (two topics may write one report)
    report.links_added += len(run.links_added)
    report.skipped += [f"{topic.question}: {p}" for p in run.problems]
    if not written:
        if topic.candidate and provider is None and _still_open(vault, topic.candidate):
            report.nothing_yet.append(topic.question)
        else:
            report.no_report.append(topic.question)
        return topic.candidate is None
    return True


def _still_open(vault: Vault, candidate: str) -> bool:
    """A question the rules found no evidence for: marked "nothing known yet" unless a
    report already answered it partly (a model's empty answer leaves it pending). True
    when it is so marked."""
    if (vault.read_note(candidate).fields.get("status") or "pending") not in OPEN:
        return False
    vault.write_note("report_candidate", {"status": NOTHING_YET}, uri=candidate)
    return True


def _diary(vault: Vault, report: DreamReport) -> None:
    lines = [f"## Dream {dt.datetime.now().strftime('%Y-%m-%d %H:%M')} ({report.provider})", ""]
    if not report.topics:
        lines.append("Nothing new: no pending questions, contradictions, changed views or changed sources.")
    for topic in report.topics:
        lines.append(f"- found ({topic['kind']}): {topic['question']}")
    lines += [f"- wrote `{uri}`" for uri in report.written]
    lines += [f"- no report for: {q}" for q in report.no_report]
    lines += [f"- nothing known yet: {q} (no note holds its words; no report was written, the question stays open)"
              for q in report.nothing_yet]
    lines += [f"- skipped: {why}" for why in report.skipped]
    if report.fallback:
        lines.append(f"- model: {report.fallback}")
    m = report.maintenance
    lines.append(f"- maintenance: {m.get('links_repaired', 0)} links repaired, {m.get('reindexed', 0)} notes re-indexed, "
                 f"{m.get('orphans', 0)} orphans")
    path = vault.root / DREAMS_FILE
    old = path.read_text(encoding="utf-8") if path.exists() else "# Dream diary\n\nWritten by `memlink dream`.\n"
    atomic_write_text(path, old.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")
