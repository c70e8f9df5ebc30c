#!/usr/bin/env bash
# repair.sh PROMPT_FILE [never]: writes result.txt = "good" when the prompt carries a repair
# section (a previous verification failed), else "bad"; with "never" it is always "bad".
prompt=$1
if [ "$2" != "never" ] && grep -q "The previous attempt failed verification" "$prompt"; then
  echo good > result.txt
else
  echo bad > result.txt
fi
echo "wrote $(cat result.txt)"
echo "<promise>COMPLETE</promise>"
