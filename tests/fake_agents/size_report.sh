#!/usr/bin/env bash
# Reports the terminal size at start and after every SIGWINCH; exits on "quit".
report() { echo "size: $(stty size) tput: $(tput lines)x$(tput cols)"; }
trap report WINCH
report
while true; do
  if IFS= read -r -t 1 line; then [ "$line" = "quit" ] && exit 0; fi
done
