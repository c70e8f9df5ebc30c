#!/usr/bin/env bash
# ledger.sh LEDGER SECONDS [ignore-signals]: writes "start PLAN/TASK PID NS" to LEDGER (outside
# every worktree), works SECONDS, writes its task's key file, writes "end PLAN/TASK PID NS",
# prints the completion marker. A test reads the ledger to count the runs of each task, their
# overlaps in time and the runs that never ended (killed). With "ignore-signals" it ignores
# SIGTERM and SIGHUP (only SIGKILL stops it), and before starting it records "overlap" if the
# previous run of its task is still alive.
ledger=$1; secs=$2; mode=${3:-}
id="$WHILLY_PLAN_ID/$WHILLY_TASK_ID"
pidfile="$ledger.$WHILLY_PLAN_ID.$WHILLY_TASK_ID.pid"
if [ "$mode" = ignore-signals ]; then
  trap '' TERM HUP
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "overlap $id $$ $(date +%s%N)" >> "$ledger"
  fi
fi
echo $$ > "$pidfile"
echo "start $id $$ $(date +%s%N)" >> "$ledger"
sleep "$secs"
mkdir -p files && echo "done by $id pid $$" >> "files/$WHILLY_TASK_ID.txt"
echo "end $id $$ $(date +%s%N)" >> "$ledger"
echo "<promise>COMPLETE</promise>"
