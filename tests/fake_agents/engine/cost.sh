#!/usr/bin/env bash
# cost.sh USD TASK: does its work and reports its cost the way Claude's stream-json does, in a
# final {"type":"result"} object that the command backend reads.
mkdir -p files && echo "paid work" > "files/$2.txt"
echo "working on $2"
printf '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done <promise>COMPLETE</promise>","total_cost_usd":%s}\n' "$1"
