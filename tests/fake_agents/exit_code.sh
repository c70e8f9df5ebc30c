#!/usr/bin/env bash
# Prints something and exits with the code given (default 3).
echo "about to fail"
exit "${1:-3}"
