#!/bin/sh
# A Claude Code PreToolUse hook, unchanged: it reads the event on stdin and blocks a force-push
# with exit status 2 (stderr is the reason). Palisade runs it as a `command` plugin: same
# protocol, but ordered with the other hooks, bounded by a deadline, and failing closed.
#
# The event is read with the shell's own `read`, not `input=$(cat)`: that would start a
# second process (a fork and `cat`), which on a VM costs more than everything else here.
input=
while IFS= read -r line || [ -n "$line" ]; do
  input="$input$line
"
done
case "$input" in
  *"git push"*"--force"*|*"git push"*" -f"*)
    echo "Refused: force-pushing rewrites shared history. Push normally, or open a pull request." >&2
    exit 2
    ;;
esac
exit 0
