#!/bin/bash
# Reward 1 when the agent wrote the file the instruction asks for.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, Harbor!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
