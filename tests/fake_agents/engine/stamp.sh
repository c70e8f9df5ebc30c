#!/usr/bin/env bash
# stamp.sh LOG SECONDS TASK: appends "start TASK <ns>" and "end TASK <ns>" to LOG around a sleep,
# writes a file in the worktree, then prints the completion marker.
log=$1; secs=$2; task=$3
echo "start $task $(date +%s%N)" >> "$log"
sleep "$secs"
mkdir -p files && echo "done by $task" > "files/$task.txt"
echo "end $task $(date +%s%N)" >> "$log"
echo "<promise>COMPLETE</promise>"
