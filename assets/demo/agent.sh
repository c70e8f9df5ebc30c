#!/usr/bin/env bash
# Whilly's demo agent: a real process in a PTY that reads its prompt, "thinks" in colour, edits
# the task's key files in its worktree, and ends with a Claude-style result line carrying its cost.
set -u
prompt_file="$1"; task="$2"
dim=$'\e[2m'; cyan=$'\e[36m'; green=$'\e[32m'; yellow=$'\e[33m'; bold=$'\e[1m'; off=$'\e[0m'
say() { printf '%s\n' "$*"; sleep "${DEMO_DELAY:-0.4}"; }

# The console's PRD wizard and plan challenge call the same agent read-only (task id prd-* or
# plan-challenge); its whole output is the answer, so it prints plain text only.
case "$task" in
  prd-interview)
    case $(grep -c '^Q[0-9][0-9]*:' "$prompt_file") in
      0) echo "QUESTION: Who reads this, and what should they be able to do afterwards?" ;;
      1) echo "QUESTION: Which one check proves it is done?" ;;
      *) echo "DONE" ;;
    esac
    exit 0 ;;
  prd-write)
    idea=$(awk '/^<<<IDEA$/{f=1;next} /^IDEA>>>$/{f=0} f' "$prompt_file" | head -n 1 | cut -c1-60)
    printf '# %s\n\n## Problem\n\n%s\n\n## Users\n\nNewcomers to the demo project.\n\n' "${idea:-Demo feature}" "${idea:-A demo feature}"
    printf '## Goals and success criteria\n\n- FR-1: a FAQ.md answers the three most common questions\n- FR-2: CHANGELOG.md records the change\n\n'
    printf '## Scope\n\nIn: the two documents. Out: everything else.\n\n## Risks and open questions\n\nNone yet.\n'
    exit 0 ;;
  prd-plan)
    use=$(grep -m1 '^Use "project":' "$prompt_file")
    project=$(printf '%s' "$use" | sed -E 's/.*"project": "([^"]*)".*/\1/')
    plan_id=$(printf '%s' "$use" | sed -E 's/.*"plan_id": "([^"]*)".*/\1/')
    prd_file=$(printf '%s' "$use" | sed -E 's/.*"prd_file": "([^"]*)".*/\1/')
    cat <<JSON
{"project": "$project", "plan_id": "$plan_id", "prd_file": "$prd_file", "tasks": [
 {"id": "TASK-001", "status": "pending", "priority": "high",
  "description": "Write FAQ.md with the three questions newcomers ask most, each with a short answer.",
  "dependencies": [], "key_files": ["FAQ.md"],
  "acceptance_criteria": ["FAQ.md has three questions with answers"], "test_steps": ["test -s FAQ.md"],
  "prd_requirement": "FR-1"},
 {"id": "TASK-002", "status": "pending", "priority": "medium",
  "description": "Add CHANGELOG.md with an entry that records the new FAQ for readers of the project.",
  "dependencies": ["TASK-001"], "key_files": ["CHANGELOG.md"],
  "acceptance_criteria": ["CHANGELOG.md mentions FAQ.md"], "test_steps": ["grep -q FAQ CHANGELOG.md"],
  "prd_requirement": "FR-2"}
]}
JSON
    exit 0 ;;
  plan-challenge)
    printf '## Verdict\nrevise: the plan works, but one task carries a hidden dependency.\n\n'
    printf '## Risks\n- DEMO-004 appends to NOTES.md, which DEMO-003 writes: they must never run together (they do not: key files overlap).\n\n'
    printf '## Missing tasks\n- nobody checks the links between the documents.\n\n## Vague criteria\n- DEMO-006: "a verdict" is not checkable.\n'
    exit 0 ;;
esac
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
    FAQ.md) printf '# FAQ\n\n## What is this?\nA demo of Whilly.\n\n## Where do I start?\nREADME.md.\n\n## Who wrote it?\nDemo agents, one task each.\n' > "$f" ;;
    CHANGELOG.md) printf '# Changelog\n\n- %s: FAQ.md answers the questions newcomers ask\n' "$task" > "$f" ;;
    *) printf '# %s\n\nWritten by the demo agent for %s.\n' "${f%.md}" "$task" > "$f" ;;
  esac
  say "${dim}  $(wc -c < "$f") bytes written${off}"
done
for step in "checking acceptance criteria" "running the test steps" "all criteria met"; do say "${dim}…${off} $step"; done
cost=$(awk -v s="$RANDOM" 'BEGIN{srand(s); printf "%.4f", 0.04 + rand()*0.08}')
say "${green}✔ done${off} — cost \$${cost}"
printf '{"type":"result","subtype":"success","is_error":false,"num_turns":3,"total_cost_usd":%s,"usage":{"input_tokens":1200,"output_tokens":340},"result":"Task %s finished.\\n<promise>COMPLETE</promise>"}\n' "$cost" "$task"
