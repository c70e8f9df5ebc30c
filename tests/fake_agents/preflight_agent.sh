#!/bin/sh
# A scripted agent for pre-flight tests (`plan decompose`, `plan triz --agent`): it answers by
# what the prompt asks for, and keeps every prompt it got in LOG_DIR (prompt-000.md, …).
# The decision gate's pass finds VAGUE (default C) too vague and CLEAR (default A) clear.
#   usage: preflight_agent.sh MODE LOG_DIR PROMPT_FILE [VAGUE CLEAR]
#   MODE good   — a valid answer at once (the split of M: Ma, Mb in order, dependents on all)
#        repair — the first answer is invalid; the repair round gets a valid one
#        never  — every answer is invalid
mode="$1"; log="$2"; prompt="$3"; vague="${4:-C}"; clear="${5:-A}"
mkdir -p "$log"
n=$(ls "$log" | wc -l)
cp "$prompt" "$log/prompt-$(printf %03d "$n").md"

bad=no
case "$mode" in
  never) bad=yes ;;
  repair) grep -q "Your previous reply could not be used" "$prompt" || bad=yes ;;
esac

if grep -q "You are splitting one task" "$prompt"; then
  if [ "$bad" = yes ]; then
    # One subtask only, and criterion c2 and a key file lost: the checks must say so.
    echo 'Here you go: {"subtasks": [{"suffix": "a", "description": "Do all of the middle task at once.", "key_files": ["files/M1.txt"], "acceptance_criteria": ["c1"], "test_steps": ["true"]}]}'
    exit 0
  fi
  cat <<'JSON'
```json
{"subtasks": [
  {"suffix": "a", "description": "Write the first half of the middle task in files/M1.txt.",
   "key_files": ["files/M1.txt"], "acceptance_criteria": ["c1"], "test_steps": ["true"]},
  {"suffix": "b", "description": "Write the second half of the middle task in files/M2.txt.",
   "key_files": ["files/M2.txt"], "acceptance_criteria": ["c2"], "test_steps": ["true"]}
 ],
 "dependents_on": "all"}
```
JSON
  exit 0
fi

if grep -q "You are a TRIZ analyst" "$prompt"; then
  if [ "$bad" = yes ]; then
    echo '{"verdict": "perhaps", "contradictions": [{"task_ids": ["NOPE"], "improving": "speed", "worsening": "safety", "principles": [], "severity": "high"}]}'
    exit 0
  fi
  echo '{"verdict": "revise", "summary": "M carries too much.", "contradictions": [{"task_ids": ["M"], "improving": "delivery speed", "worsening": "reviewability", "principles": ["1 Segmentation"], "severity": "medium", "explanation": "split M in two"}]}'
  exit 0
fi

if grep -q "You are the decision gate" "$prompt"; then
  if [ "$bad" = yes ]; then
    echo 'I would rather not judge.'
    exit 0
  fi
  echo "{\"verdicts\": [{\"task_id\": \"$vague\", \"vague\": true, \"reason\": \"$vague does not say what it builds\"}, {\"task_id\": \"$clear\", \"vague\": false, \"reason\": \"clear\"}]}"
  exit 0
fi

echo "the scripted agent does not know this prompt" >&2
exit 3
