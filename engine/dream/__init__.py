"""The dream pass (docs/DESIGN.md, *Dream*): find questions worth answering in what changed,
answer each with zero or more question-driven reports and the links it finds, and tidy up.

- ``topics``: discovery (pending questions, contradictions, evolutions, re-research, hubs)
- ``draft``: one topic's context, and its answer from the LLM or the rules
- ``operations``: the answer's contract, its strict checks, and its resolve
- ``run``: the run, its state and the DREAMS.md diary; ``ask`` files a question"""

from .ask import ask
from .draft import ReportDraft, dream_context, dream_messages, llm_operations, rules_draft, rules_operations
from .operations import DREAM_LINK_ROLES, DreamOperations, ReportItem, check_dream_operations, resolve_dream
from .run import DREAMS_FILE, DreamBusy, DreamReport, dream, handle_topic, load_state, save_state
from .topics import Topic, discover, searched_questions

__all__ = [
    "DREAMS_FILE", "DREAM_LINK_ROLES", "DreamBusy", "DreamOperations", "DreamReport", "ReportDraft", "ReportItem",
    "Topic", "ask", "check_dream_operations", "discover", "dream", "dream_context", "dream_messages",
    "handle_topic", "llm_operations", "load_state", "resolve_dream", "rules_draft", "rules_operations",
    "save_state", "searched_questions",
]
