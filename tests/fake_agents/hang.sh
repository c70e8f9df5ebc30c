#!/usr/bin/env bash
# Hangs forever (with a child in its process group) until terminated.
echo "hanging pid=$$"
sleep 1000 &
echo "child=$!"
wait
