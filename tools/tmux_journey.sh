#!/usr/bin/env bash
# The first journey in a real terminal: start memlink in tmux on a fresh copy of the
# demo vault, search, open a hit, follow a link, open its graph, go back — checking the
# captured screen after each step. Exit 0 when every step showed what it should.
#
#   tools/tmux_journey.sh [--captures DIR] [--tour] [--journeys] [--first-run]
#     --captures DIR  one text capture per step in DIR
#     --first-run     instead: an empty vault (`memlink init`), followed by its on-screen
#                     hints to a first memory: chat one line (the rules provider), save it
#                     with the key the chat shows, find it with search
#     --tour          then visit every other pane too (the README's captures)
#     --journeys      then review a contradiction with the card and undo it, run a
#                     one-key dream whose reports show in the tree without a key, and
#                     chat: a reply streamed word by word by a stand-in Ollama on a
#                     loopback port (tests/ollama_stub.py), with a sample session's turn
#                     recalled, then the turn's memory made with the rules (ctrl+g),
#                     one reply saved alone (ctrl+o) and its citation [1] opened
#
#   The terminal is 120x36; COLUMNS_OVERRIDE and ROWS_OVERRIDE change it (80 and 24).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tmux >/dev/null || { echo "tmux is not installed" >&2; exit 2; }
MEMLINK=${MEMLINK:-.venv/bin/memlink}
[ -x "$MEMLINK" ] || { echo "no $MEMLINK: run ./dev test (or ./dev demo) once first" >&2; exit 2; }

captures="" tour="" journeys="" first_run=""
while [ $# -gt 0 ]; do
  case "$1" in
    --captures) captures=$2; mkdir -p "$captures"; shift 2 ;;
    --tour) tour=1; shift ;;
    --journeys) journeys=1; shift ;;
    --first-run) first_run=1; shift ;;
    *) echo "usage: $0 [--captures DIR] [--tour] [--journeys] [--first-run]" >&2; exit 2 ;;
  esac
done
cols=${COLUMNS_OVERRIDE:-120} rows=${ROWS_OVERRIDE:-36}
work=$(mktemp -d)
session="memlink-journey-$$"
stub=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [ -n "$stub" ] && kill "$stub" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Ollama: nothing listens on port 9 (the rules provider), except for the chat journey,
# where a stand-in streams every reply slowly enough to be seen arriving.
ollama=http://127.0.0.1:9
reply="Your flat white is at Man Met Bril [1], by the canal, the one with the ceramic cups."
if [ -n "$journeys" ]; then
  "${PYTHON:-.venv/bin/python}" tests/ollama_stub.py --pause 0.3 "$reply" > "$work/stub.out" &
  stub=$!
  for _ in $(seq 100); do [ -s "$work/stub.out" ] && break; sleep 0.1; done
  ollama=$(head -1 "$work/stub.out")
  case "$ollama" in http://127.0.0.1:*) ;; *) echo "the Ollama stand-in did not start" >&2; exit 2 ;; esac
fi

export MEMLINK_HOME="$work/home" MEMLINK_CONFIG_HOME="$work/config"
start="demo --vault $work/vault"
if [ -n "$first_run" ]; then
  "$MEMLINK" init --vault "$work/vault" >/dev/null
  start="--vault $work/vault"
fi
tmux new-session -d -s "$session" -x "$cols" -y "$rows" \
  "env MEMLINK_HOME=$MEMLINK_HOME MEMLINK_CONFIG_HOME=$MEMLINK_CONFIG_HOME OLLAMA_HOST=$ollama $MEMLINK $start"

screen() { tmux capture-pane -p -t "$session"; }
# The note shown: the browser puts its URI in the note box's title ("Note · <uri>").
shown() { screen | grep -o 'Note · [a-z_]*/[^ ]*\.md' | head -1 | sed 's/^Note · //' || true; }

# wait_for NAME TEXT: poll the screen until TEXT shows (30 s: a bound for a machine busy with
# other tests, not a speed), save it as NAME.
wait_for() {
  local name=$1 text=$2
  for _ in $(seq 300); do
    if screen | grep -qF -- "$text"; then
      [ -n "$captures" ] && screen > "$captures/$name.txt"
      echo "ok   $name: sees \"$text\""
      return 0
    fi
    sleep 0.1
  done
  echo "FAIL $name: \"$text\" never showed. The screen was:" >&2
  screen >&2
  exit 1
}

# wait_gone NAME TEXT: poll the screen until TEXT no longer shows (15 s).
wait_gone() {
  local name=$1 text=$2
  for _ in $(seq 150); do
    screen | grep -qF -- "$text" || { echo "ok   $name: \"$text\" is gone"; return 0; }
    sleep 0.1
  done
  echo "FAIL $name: \"$text\" still shows. The screen was:" >&2
  screen >&2
  exit 1
}

# settled: poll until the screen holds still (the app handled every key sent), 15 s at most.
settled() {
  local last now
  last=$(screen)
  for _ in $(seq 75); do
    sleep 0.2
    now=$(screen)
    [ "$now" = "$last" ] && return 0
    last=$now
  done
}

keys() { tmux send-keys -t "$session" "$@"; }

# quit: escape (back) until the footer offers q (no text box has the keys), then q, and
# the app ends (y if it asks first; a bound, not a speed). Each escape waits for the
# screen to change before the next: escapes sent ahead of a slow pane switch would each
# step further back through the history, past the panes that offer q. A key sent while a
# pane is still being switched lands on the pane being left (a q in its text box): then again.
quit() {
  local before
  for _ in $(seq 5); do
    settled
    for _ in $(seq 10); do
      screen | grep -qF " q Quit" && break
      before=$(screen)
      keys Escape
      for _ in $(seq 100); do [ "$(screen)" != "$before" ] && break; sleep 0.1; done
      settled
    done
    wait_for quit-key " q Quit"
    keys q
    for _ in $(seq 150); do
      tmux has-session -t "$session" 2>/dev/null || return 0
      if screen | grep -q "Quit now?"; then keys y; fi
      sleep 0.1
    done
  done
  echo "FAIL quit: q did not close the app. The screen was:" >&2; screen >&2; exit 1
}

if [ -n "$first_run" ]; then
  # Each key is one the screen shows at that moment.
  wait_for empty "Your vault is empty"
  wait_for empty-hint "c  chat"
  keys c; wait_for chat-hint "A new chat session"
  wait_for chat-hint-save "ctrl+s saves the"
  keys -l "I love green tea from Hangzhou."; keys Enter
  wait_for replied "No model wrote"
  keys C-s; wait_for saved "1 note created"
  keys /; wait_for search-open "Search your memory"
  keys -l "green tea"; keys Enter
  wait_for found "1 result for 'green tea'"
  wait_for found-note "Green tea from"
  keys Escape; wait_gone search-closed "Search your memory"
  keys Escape; wait_for browser-again "Notes · 1"
  quit
  echo "journey passed: an empty vault to a first memory found by search"
  exit 0
fi

wait_for browser "index fresh"
keys /
wait_for search-open "Search your memory"
keys -l "celadon glaze"
keys Enter
wait_for search "results for 'celadon glaze'"
keys Down Enter
wait_for hit "Links →"
for _ in $(seq 50); do hit=$(shown); [ -n "$hit" ] && break; sleep 0.1; done
[ -n "$hit" ] || { echo "FAIL hit: no note in the header" >&2; screen >&2; exit 1; }
keys l Enter
for _ in $(seq 50); do [ "$(shown)" != "$hit" ] && break; sleep 0.1; done
followed=$(shown)
[ -n "$followed" ] && [ "$followed" != "$hit" ] || { echo "FAIL follow: still on $hit" >&2; screen >&2; exit 1; }
wait_for followed "Links →"
keys g
wait_for graph "Personalized"
keys BSpace
wait_gone back "Personalized"
wait_for back "Links →"
if screen | grep -qF "Personalized" || [ "$(shown)" != "$followed" ]; then
  echo "FAIL back: expected the browser on $followed" >&2; screen >&2; exit 1
fi
if [ -n "$tour" ]; then
  # One key at a time, each once the app is still: escape followed at once by a key reads
  # as alt+key, and a key sent while a pane is still being switched to may go unheard.
  keys a; wait_for chat "Ask about"
  keys Escape; wait_for chat-back "Links →"; settled
  keys 4; wait_for reports "Questions and reports"
  keys Escape; wait_for reports-back "Links →"; settled
  keys 5; wait_for lint "Checks · 0"
  keys Escape; wait_for lint-back "Links →"; settled
  keys x; wait_for review "involving"
  keys Escape; wait_for review-back "Links →"
  settled; keys "?"; wait_for help "Keys (esc closes)"
  keys Escape; wait_gone help-closed "Keys (esc closes)"; settled
fi
if [ -n "$journeys" ]; then
  # Review a contradiction with the card, apply, undo.
  keys 5; wait_for lint-again "Checks · 0"
  keys Enter; wait_for card "Why they disagree"
  keys d; wait_for preview "applies this"
  keys y; wait_for applied "(u undoes)"
  keys u; wait_for undo-preview "undo dismiss on"
  keys y; wait_for undone "undid dismiss"
  settled  # (the undo reloads the checks: a key sent meanwhile may land on the card being replaced)
  # One-key dream: its reports show in the tree without a key.
  keys 4; wait_for reports-again "Questions and reports"
  keys D; wait_for dreamed "reports written"
  keys 1
  for _ in $(seq 50); do screen | grep -q "Notes · 7[3-9]\|Notes · [89][0-9]" && break; sleep 0.1; done
  screen | grep -q "Notes · 7[3-9]\|Notes · [89][0-9]" || { echo "FAIL refresh: the tree still counts 72 notes" >&2; screen >&2; exit 1; }
  echo "ok   refresh: the tree counts the dream's reports"
  # Chat: the reply arrives word by word, a sample session's turn is recalled.
  keys c; wait_for chat-pane "chat model: ollama"
  keys C-n; settled
  keys -l "Where do I get my flat white?"; keys Enter
  wait_for streaming "Your flat white"
  if screen | grep -qF "ceramic cups."; then
    echo "FAIL streaming: the whole reply arrived at once" >&2; screen >&2; exit 1
  fi
  echo "ok   streaming: the first words show before the last"
  wait_for replied "ceramic cups."
  wait_for recalled "2026-08-11-eveni"
  screen | grep -q "memory item" || { echo "FAIL recall: no memory item listed" >&2; screen >&2; exit 1; }
  wait_for no-llm-extraction "ctrl+g extracts it"
  keys C-g; wait_for rules-extraction "turn memory updated with the rules"
  # Saving the reply alone asks the model, which refuses extraction here: the pane says why.
  keys C-o; wait_for save-reply "saving the reply failed"
  # The reply's citation [1] (a recalled turn of a sample session) opened from the keyboard.
  keys C-r; settled; keys Enter; wait_for cited "Chat · read only · 2026-08-11"
fi
# A dream, import or reply's extraction may still be finishing: q then asks first.
quit
echo "journey passed: $hit → $followed → graph → back"
