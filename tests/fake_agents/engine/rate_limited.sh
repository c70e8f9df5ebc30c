#!/usr/bin/env bash
# rate_limited.sh LOG AGENT TASK: the first run of all (whichever task gets there first) answers
# like a provider at its limit: an HTTP 429 with `retry-after: 5`, exit 1, logged as
# "limited AGENT TASK <ns>". Every other run logs "start AGENT TASK <ns>", writes its task's file,
# logs "end …" and prints the completion marker.
log=$1; agent=$2; task=$3
if mkdir "$log.limited" 2>/dev/null; then
  echo "limited $agent $task $(date +%s%N)" >> "$log"
  echo "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number of concurrent requests exceeded\"}}"
  echo "retry-after: 5"
  exit 1
fi
echo "start $agent $task $(date +%s%N)" >> "$log"
sleep 0.3
mkdir -p files && echo "done by $agent $task" > "files/$task.txt"
echo "end $agent $task $(date +%s%N)" >> "$log"
echo "<promise>COMPLETE</promise>"
