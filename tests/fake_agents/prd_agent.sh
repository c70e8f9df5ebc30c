#!/bin/sh
# A scripted agent for the PRD wizard tests: it answers by what the prompt asks for, and keeps
# every prompt it got in LOG_DIR (prompt-000.md, prompt-001.md, …).
#   usage: prd_agent.sh MODE LOG_DIR PROMPT_FILE
#   MODE good   — the plan comes at once, fenced, with chatter around it (TASK-003 is too vague
#                 for the decision gate)
#        clean  — as good, but every task passes the gate
#        repair — the first plan reply is broken JSON; the repair round gets a valid one
#        never  — the plan reply is never valid JSON
#        fail   — every call fails (exit 3, an error on stderr)
#        writer — as clean, but every call first tries to write WIZARD_WROTE.txt in its working
#                 directory (the operator's checkout) and logs whether it could
mode="$1"; log="$2"; prompt="$3"
if [ "$mode" = writer ]; then
  if echo "written by a read-only call" > WIZARD_WROTE.txt 2>/dev/null; then
    echo wrote >> "$log.writes"
  else
    echo refused >> "$log.writes"
  fi
  mode=clean
fi
mkdir -p "$log"
n=$(ls "$log" | wc -l)
cp "$prompt" "$log/prompt-$(printf %03d "$n").md"

if [ "$mode" = fail ]; then
  echo "fatal: the scripted agent was told to fail" >&2
  exit 3
fi

good_plan() {
  cat <<'JSON'
{
  "project": "whatever-the-agent-says",
  "plan_id": "agent-chosen-id",
  "tasks": [
    {"id": "TASK-001", "status": "pending", "priority": "high",
     "description": "Create the calendar sync module with a fetch and a push function.",
     "key_files": ["src/sync.rs"], "acceptance_criteria": ["the module builds"],
     "test_steps": ["cargo build"], "prd_requirement": "FR-1"},
    {"id": "TASK-002", "status": "pending", "priority": "medium",
     "description": "Schedule the sync every five minutes and log every failure.",
     "dependencies": ["TASK-001"], "key_files": ["src/schedule.rs"],
     "acceptance_criteria": ["a sync runs every five minutes"], "test_steps": ["cargo test schedule"]},
JSON
  if [ "$mode" = clean ]; then
    cat <<'JSON'
    {"id": "TASK-003", "status": "pending", "priority": "low",
     "description": "Document the calendar sync for the operations team.",
     "dependencies": ["TASK-002"], "acceptance_criteria": ["docs exist"],
     "test_steps": ["test -s docs/sync.md"]}
JSON
  else
    cat <<'JSON'
    {"id": "TASK-003", "status": "pending", "priority": "low",
     "description": "Docs.", "dependencies": ["TASK-002"], "acceptance_criteria": ["docs exist"]}
JSON
  fi
  printf '  ]\n}\n'
}

if grep -q "Interview the operator" "$prompt"; then
  asked=$(grep -c '^Q[0-9]*: ' "$prompt")
  if [ "$asked" -ge 2 ]; then
    printf 'Thanks, I have what I need.\n\nDONE\n'
  else
    printf 'Good idea.\n\n**QUESTION:** Scripted question %s: who will use it?\n' "$((asked + 1))"
  fi
elif grep -q "Write a product requirements document" "$prompt"; then
  cat <<'MD'
Here is the PRD you asked for:

# Calendar Sync

## Problem
Teams keep two calendars by hand.

## Functional requirements
FR-1. Fetch and push events.
FR-2. Run every five minutes.
MD
elif grep -q "Challenge the plan" "$prompt"; then
  printf '## Verdict\nrevise: TASK-003 is vague.\n\n## Risks\nTASK-002 has no retry.\n'
elif grep -q "Turn the product requirements document" "$prompt"; then
  if [ "$mode" = repair ] && grep -q "Your previous reply could not be used" "$prompt"; then
    good_plan
  elif [ "$mode" = good ] || [ "$mode" = clean ]; then
    printf 'Here is the plan:\n\n```json\n'; good_plan; printf '```\n\nLet me know if you want changes.\n'
  else
    printf 'Here is the plan:\n```json\n{"project": "x", "tasks": [\n  {"id": "TASK-001", "description": }\n]}\n```\n'
  fi
else
  echo "the scripted agent does not know this prompt" >&2
  exit 4
fi
