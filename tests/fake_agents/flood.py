#!/usr/bin/env python3
"""Writes N megabytes (default 100) of coloured lines to stdout as fast as it can, then
FLOOD-DONE. Output post-processing (LF -> CRLF) is switched off so the byte count is exact:
N MiB + len(b"\x1b[0mFLOOD-DONE\r\n")."""
import os
import sys
import termios

attrs = termios.tcgetattr(1)
attrs[1] &= ~termios.OPOST
termios.tcsetattr(1, termios.TCSANOW, attrs)

mb = int(sys.argv[1]) if len(sys.argv) > 1 else 100
total = mb * 1024 * 1024
colours = [31, 32, 33, 34, 35, 36]
block = bytearray()
i = 0
while len(block) < 64 * 1024:
    c = colours[i % len(colours)]
    block += b"\x1b[%dmline %06d \x1b[1mbold\x1b[0m some filler text to make it longer ......\r\n" % (c, i)
    i += 1
block = bytes(block)
out = os.fdopen(1, "wb", buffering=0)
written = 0
while written < total:
    chunk = block[: min(len(block), total - written)]
    out.write(chunk)
    written += len(chunk)
out.write(b"\x1b[0mFLOOD-DONE\r\n")
