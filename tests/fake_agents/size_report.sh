#!/usr/bin/env bash
# Reports the terminal size at start, after every SIGWINCH, and on the input line "size";
# exits on "quit". (A SIGWINCH arriving while the trap runs can be lost: that is bash.)
report() { echo "size: $(stty size) tput: $(tput lines)x$(tput cols)"; }
trap report WINCH
report
while true; do
  if IFS= read -r -t 1 line; then
    [ "$line" = "quit" ] && exit 0
    [ "$line" = "size" ] && report
  fi
done
