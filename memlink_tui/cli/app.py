"""The app and the set-up commands: `app` (the default), `init`, `demo`, `doctor`, and
`mcp` (the vault served to other agents over the Model Context Protocol)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine import MemlinkError, Vault
from engine.model.text import counted

from ..paths import copy_sample_vault, demo_vault
from .wiring import EXIT_PROBLEMS, EXIT_USAGE, UsageError, init_vault, open_vault, provider, say, settings, vault_path


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("app", parents=[common], help="open the app (the default command)")
    s.set_defaults(func=cmd_app)

    s = sub.add_parser("init", parents=[common], help="create an empty vault at --vault")
    s.add_argument("--name", help="a display name for the vault")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("demo", parents=[common],
                       help="open the demo: a copy of the sample vault, made once in the data folder")
    s.add_argument("--fresh", action="store_true", help="replace the demo copy with a new one (your changes to it go)")
    s.add_argument("--no-app", action="store_true", help="only make the copy and print its path")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("mcp", parents=[common],
                       help="serve the vault to other agents and editors over MCP (stdio)")
    s.add_argument("--read-only", action="store_true", help="list only the reading tools (search, recall and reading notes) and refuse every write")
    s.set_defaults(func=cmd_mcp)

    s = sub.add_parser("doctor", parents=[common],
                       help="check dependencies, embedding model, Ollama and the vault; print fixes")
    s.set_defaults(func=cmd_doctor)


def _no_terminal() -> str | None:
    """Why the app cannot open here (its output or input is not a terminal), or None."""
    for name, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
        if stream is None or not stream.isatty():
            return (f"memlink opens a terminal app; {name} is not a terminal — use a subcommand, "
                    "e.g. memlink search …  (memlink --help lists them)")
    return None


def _run_app(path: Path) -> int:
    from ..app import MemlinkApp  # textual is imported only when the app runs

    path = Path(path).expanduser()
    if not (path / "memlink.yaml").exists() and (not path.exists() or (path.is_dir() and not any(path.iterdir()))):
        app = MemlinkApp(None, vault_path=path)  # first run: offer to create a vault or open the demo
    else:
        app = MemlinkApp(open_vault(path))
    return run_until_quit(app)


def run_until_quit(app, headless: bool = False) -> int:
    """Run the app until it quits; its exit code. On an event loop of its own, not
    asyncio.run's, which at the end waits for every thread worker still busy (an index
    sync, a dream, a slow model): the command line then ends the process at once
    (``end_now``) — what was written is whole, and work not finished is picked up the
    next time, as the quit question says."""
    import asyncio

    app.run(loop=asyncio.new_event_loop(), headless=headless)
    if app.return_code:
        where = f"; the traceback is in {app.crash_log}" if app.crash_log else ""
        say(f"memlink stopped on an unexpected error{where}", file=sys.stderr)
    return app.return_code or 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from memlink_mcp.server import serve  # the SDK is imported only for this command

    serve(open_vault(args, read_only=args.read_only))
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    why = _no_terminal()
    if why:
        say(why, file=sys.stderr)
        return EXIT_USAGE
    return _run_app(vault_path(args))


def cmd_init(args: argparse.Namespace) -> int:
    vault = init_vault(args)
    say(f"created an empty vault at {vault.root}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The data folder's one demo copy (made or, with --fresh, replaced), or a new copy
    in the empty folder --vault names."""
    why = None if args.no_app else _no_terminal()
    if why:
        say(f"{why}; memlink demo --no-app only makes the copy", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.vault is not None:
            if args.fresh:
                raise UsageError("--fresh replaces the data folder's demo copy; --vault names a new or empty folder")
            target, made = copy_sample_vault(args.vault), True
        else:
            target, made = demo_vault(fresh=args.fresh)
    except FileExistsError as exc:
        raise MemlinkError(str(exc)) from None
    out = sys.stderr if not args.no_app else sys.stdout
    if made:
        say(f"sample vault copied to {target}", file=out)
    else:
        say(f"the demo copy is at {target} (memlink demo --fresh replaces it with a new one)", file=out)
    if args.no_app:
        return 0
    return _run_app(target)


def cmd_doctor(args: argparse.Namespace) -> int:
    import importlib

    from engine.index.embed import load_embedder
    from engine.lint.memo import check

    bad = 0

    def line(ok: bool, what: str, detail: str) -> None:
        nonlocal bad
        bad += 0 if ok else 1
        say(f"{'ok ' if ok else 'FIX'}  {what:<16} {detail}")

    for module in ("textual", "pydantic", "yaml", "jinja2", "tinydb", "networkx", "numpy", "hnswlib", "tantivy",
                   "model2vec", "ollama"):
        try:
            mod = importlib.import_module(module)
            line(True, module, getattr(mod, "__version__", "installed"))
        except ImportError as exc:
            line(False, module, f"missing ({exc}); run ./dev test or pip install -e . to install it")
    vault: Vault | None
    try:
        vault = open_vault(args)
    except MemlinkError as exc:
        vault = None  # still check the model and Ollama, with the default settings
        line(False, "vault", f"{exc}; or open a copy of the demo with `memlink demo`")
    choice = load_embedder(settings(vault).embedding.model)
    line(choice.notice is None, "embedding model",
         choice.notice or f"{choice.embedder.name} ({choice.embedder.dims} dims)")
    health = provider(vault).health
    line(health.ok, "LLM provider", f"{health.provider}: {health.summary}")
    if vault is None:
        return EXIT_PROBLEMS
    problems = check(vault)
    errors = sum(1 for p in problems if p.severity == "error")
    line(errors == 0, "vault", f"{vault.root}: {counted(len(vault.catalog), 'note')}, {counted(errors, 'error')}, "
         f"{counted(len(problems) - errors, 'warning')}" + ("; run `memlink check` for details" if problems else ""))
    for warning in vault.warnings:
        line(False, "vault", warning)
    return EXIT_PROBLEMS if bad else 0
