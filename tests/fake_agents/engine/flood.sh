#!/usr/bin/env bash
# flood.sh MB: MB megabytes of coloured output (../flood.py), then the completion marker.
here=$(dirname "$0")
python3 "$here/../flood.py" "$1" || exit 1
printf '\r\n<promise>COMPLETE</promise>\r\n'
