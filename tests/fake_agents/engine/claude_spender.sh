#!/usr/bin/env bash
# claude_spender.sh: stands in for `claude -p … --output-format stream-json --verbose`. Ignores
# its arguments, prints Claude's init line and one assistant message a second whose usage costs
# $0.45 at list prices (100k input + 10k output tokens of claude-sonnet-4-5), then keeps working
# for a minute without ever printing a result: only a budget watched while it runs can stop it.
echo '{"type":"system","subtype":"init","model":"claude-sonnet-4-5-20250929","cwd":"'"$PWD"'","tools":["Bash"]}'
for i in $(seq 1 10); do
  printf '{"type":"assistant","message":{"id":"msg_%02d","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"working, step %d"}],"usage":{"input_tokens":100000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":10000}}}\n' "$i" "$i"
  sleep 1
done
sleep 60
