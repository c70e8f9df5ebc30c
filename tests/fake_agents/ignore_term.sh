#!/usr/bin/env bash
# Ignores SIGTERM (and so does the sleep it starts: SIG_IGN is inherited across exec).
trap '' TERM
sleep 1000 &
echo "ignoring TERM pid=$$ child=$!"
while true; do wait; done
