#!/usr/bin/env python3
"""Asks the terminal for the cursor position (DSR 6) and exits 0 only on a valid reply,
the way agent TUIs do at start-up (some hang or quit when nobody answers)."""
import os
import re
import select
import sys
import termios
import tty

fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
try:
    os.write(1, b"\x1b[3;7H\x1b[6n")
    reply = b""
    while not re.search(rb"\x1b\[\d+;\d+R", reply):
        ready, _, _ = select.select([fd], [], [], 5.0)
        if not ready:
            break
        reply += os.read(fd, 64)
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, old)
m = re.search(rb"\x1b\[(\d+);(\d+)R", reply)
if m:
    print("\r\ncursor reply row=%s col=%s" % (m.group(1).decode(), m.group(2).decode()))
    sys.exit(0)
print("\r\nno cursor reply, got %r" % reply)
sys.exit(1)
