"""Chat from the command line: `chat`, one question answered from memory (docs/DESIGN.md,
"Memory context"), as the app's chat pane answers it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine import MemlinkError
from engine.model.text import printable

from .wiring import UsageError, notice, open_vault, printable_path, provider, say, say_json, synced_index

if TYPE_CHECKING:
    from engine.sessions.memory import MemoryContext


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("chat", parents=[common],
                       help="ask one question: a model answers with your notes and past turns as numbered context and "
                            "cites them as [n]; without a model the answer quotes them. The turn is kept in a chat "
                            "session for recall; `memlink commit` saves it into notes")
    s.add_argument("question", help="the question, in words")
    s.add_argument("--session", help="go on with this chat session (default: a new one, named on stderr)")
    s.add_argument("--provider", choices=["rules", "ollama"],
                   help="default: Ollama when it runs, else rules (an answer quoting your memory)")
    s.add_argument("--json", action="store_true",
                   help="print {session, turn, answer, model, context}: turn is the id `memlink commit --turn` takes")
    s.set_defaults(func=cmd_chat)


def cmd_chat(args: argparse.Namespace) -> int:
    from engine.sessions.chat import ChatSession, new_session_id
    from engine.sessions.extract import LLMTurnExtractor
    from engine.sessions.log import project_turns, read_events, session_uri

    if not args.question.strip():
        raise UsageError("the question is empty")
    vault = open_vault(args)
    session = args.session or new_session_id()
    if args.session and not vault.path(session_uri(session)).is_file():
        raise MemlinkError(f"no chat session {session!r} (looked for {session_uri(session)})")
    chosen = provider(vault, force=args.provider)
    if args.provider == "ollama" and not chosen.health.ok:
        raise MemlinkError(chosen.health.summary)
    llm = chosen.llm
    if not args.json:
        say(f"chat session {session} · provider: {chosen.health.provider} — {chosen.health.summary}", file=sys.stderr)
    synced_index(vault, quiet=args.json)  # the notes as they are now (edits made outside the app too)
    chat = ChatSession(vault, session, llm, LLMTurnExtractor(llm) if llm else None)
    messages = chat.prepare(args.question)
    parts: list[str] = []
    for piece in chat.reply(messages):
        parts.append(piece)
        if not args.json:  # as the model writes it; a control sequence split between pieces loses its ESC
            sys.stdout.write(printable(piece))
            sys.stdout.flush()
    turn = project_turns(session, read_events(vault, session), final=True)[-1].asked[-1].key  # the question's id
    if args.json:
        say_json({"session": session, "turn": turn, "answer": "".join(parts), "model": llm.name if llm else None,
                  "context": chat.last_context.to_json()})
    else:
        print()
        if llm:  # (an answer from memory names its sources itself)
            _print_given(chat.last_context)
    if llm:  # the turn memory recall finds later, as the app makes it after each reply
        done: list[object] = []
        chat.extract_in_background(done.append).join()
        why = "; ".join(str(r) if isinstance(r, Exception) else "; ".join(getattr(r, "failed", [])) for r in done)
        if why:
            notice(f"turn memory not made, so recall will not find this turn yet: {why}")
    for line in vault.warnings:  # e.g. a bad line of the session's log, left out
        notice(line)
    vault.close()
    if not args.json:
        notice(f"`memlink commit {session} --turn {turn}` saves this turn into notes; "
               f"`memlink chat --session {session} …` goes on")
    return 0


def _print_given(context: MemoryContext) -> None:
    """The memory the model was given, numbered as it cites it."""
    if not context.items:
        print("(no memory bore on the question)")
        return
    print("memory given to the model:")
    for n, item in enumerate(context.items, 1):
        cite = printable_path(item.cite) if item.kind == "note" else printable(item.cite)
        say(f"[{n}] {item.title} — {cite}")
