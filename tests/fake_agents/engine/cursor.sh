#!/usr/bin/env bash
# cursor.sh: asks the terminal for the cursor position (../cursor_query.py exits 0 only on a
# valid reply) and prints the marker only then.
here=$(dirname "$0")
python3 "$here/../cursor_query.py" || exit 1
echo "<promise>COMPLETE</promise>"
