#!/usr/bin/env bash
# Whilly's demo agent: a real process in a PTY that reads its prompt, "thinks" in colour, edits
# the task's key files in its worktree, and ends with a Claude-style result line carrying its cost.
set -u
prompt_file="$1"; task="$2"
dim=$'\e[2m'; cyan=$'\e[36m'; green=$'\e[32m'; yellow=$'\e[33m'; bold=$'\e[1m'; off=$'\e[0m'
say() { printf '%s\n' "$*"; sleep "${DEMO_DELAY:-0.4}"; }
say "${bold}demo-agent${off} ${dim}working on${off} ${cyan}${task}${off}"
say "${dim}reading${off} $(basename "$prompt_file") ($(wc -l < "$prompt_file") lines)"
files=$(awk '/^## Key files/{f=1;next} /^## /{f=0} f && /^- /{sub(/^- +`?/,"");sub(/`$/,"");print}' "$prompt_file")
[ -z "$files" ] && files="OUTPUT-${task}.md"
for f in $files; do
  say "${yellow}▶ Edit${off} $f"
  case "$f" in
    README.md) printf '# Whilly demo\n\nA tiny project written by demo agents, one task per worktree.\n' > "$f" ;;
    GUIDE.md) printf '# Guide\n\nStart with README.md, then read NOTES.md.\n' > "$f" ;;
    NOTES.md)
      if grep -q '^- ' NOTES.md 2>/dev/null; then printf '\n## Changelog\n\n- %s: notes reviewed\n' "$task" >> "$f"
      else printf '# Notes\n\n- tasks run in parallel when their key files differ\n- each task has its own worktree\n- done means checks passed\n' > "$f"; fi ;;
    *) printf '# %s\n\nWritten by the demo agent for %s.\n' "${f%.md}" "$task" > "$f" ;;
  esac
  say "${dim}  $(wc -c < "$f") bytes written${off}"
done
for step in "checking acceptance criteria" "running the test steps" "all criteria met"; do say "${dim}…${off} $step"; done
cost=$(awk -v s="$RANDOM" 'BEGIN{srand(s); printf "%.4f", 0.04 + rand()*0.08}')
say "${green}✔ done${off} — cost \$${cost}"
printf '{"type":"result","subtype":"success","is_error":false,"num_turns":3,"total_cost_usd":%s,"usage":{"input_tokens":1200,"output_tokens":340},"result":"Task %s finished.\\n<promise>COMPLETE</promise>"}\n' "$cost" "$task"
