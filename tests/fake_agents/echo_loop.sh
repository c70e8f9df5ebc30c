#!/usr/bin/env bash
# Reads lines and echoes them back until it reads "quit".
echo "ready"
while IFS= read -r line; do
  echo "got: $line"
  [ "$line" = "quit" ] && exit 0
done
