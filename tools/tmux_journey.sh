#!/usr/bin/env bash
# The first journey in a real terminal: start memlink in tmux on a fresh copy of the
# demo vault, search, open a hit, follow a link, open its graph, go back — checking the
# captured screen after each step. Exit 0 when every step showed what it should.
#
#   tools/tmux_journey.sh [--captures DIR]   (DIR gets one text capture per step)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tmux >/dev/null || { echo "tmux is not installed" >&2; exit 2; }
MEMLINK=${MEMLINK:-.venv/bin/memlink}
[ -x "$MEMLINK" ] || { echo "no $MEMLINK: run ./dev test (or ./dev demo) once first" >&2; exit 2; }

captures=""
if [ "${1:-}" = "--captures" ]; then captures=$2; mkdir -p "$captures"; fi
work=$(mktemp -d)
session="memlink-journey-$$"
cleanup() { tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

export MEMLINK_HOME="$work/home" MEMLINK_CONFIG_HOME="$work/config"
tmux new-session -d -s "$session" -x 150 -y 45 \
  "env MEMLINK_HOME=$MEMLINK_HOME MEMLINK_CONFIG_HOME=$MEMLINK_CONFIG_HOME OLLAMA_HOST=http://127.0.0.1:9 $MEMLINK demo --vault $work/vault"

screen() { tmux capture-pane -p -t "$session"; }
# The note shown: the browser puts its URI in the header line.
shown() { screen | head -1 | grep -o '[a-z_]*/[^ ]*\.md' | tail -1 || true; }

# wait_for NAME TEXT: poll the screen until TEXT shows (15 s), save it as NAME.
wait_for() {
  local name=$1 text=$2
  for _ in $(seq 150); do
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

keys() { tmux send-keys -t "$session" "$@"; }

wait_for browser "index fresh"
keys /
wait_for search-open "Search your memory"
keys -l "celadon glaze"
keys Enter
wait_for search "result(s) for 'celadon glaze'"
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
wait_for graph "Personalized PageRank from this note"
keys BSpace
sleep 0.5
wait_for back "Links →"
if screen | grep -qF "Personalized PageRank" || [ "$(shown)" != "$followed" ]; then
  echo "FAIL back: expected the browser on $followed" >&2; screen >&2; exit 1
fi
keys q
for _ in $(seq 50); do tmux has-session -t "$session" 2>/dev/null || break; sleep 0.1; done
if tmux has-session -t "$session" 2>/dev/null; then echo "FAIL quit: q did not close the app" >&2; exit 1; fi
echo "journey passed: $hit → $followed → graph → back"
