#!/bin/bash
printf 'Hello, Harbor!\n' > /app/hello.txt
