#!/usr/bin/env python3
"""Prints `TICK <n> <unix ns>` every INTERVAL seconds (default 0.05) for COUNT ticks (default
100), then the completion marker. Remote-pane tests read the ns to time the way to a viewer."""
import sys
import time

count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
for i in range(count):
    print(f"TICK {i} {time.time_ns()}", flush=True)
    time.sleep(interval)
print("<promise>COMPLETE</promise>", flush=True)
