#!/bin/bash
# usage: with-display.sh <command> [args...]
# Runs the command under a private X server (Xvfb) with a session bus that can
# activate services, so that the accessibility bus (org.a11y.Bus) starts and the
# tests reach the GTK programs through AT-SPI (doc/desktop.md). Exports DISPLAY, DBUS_SESSION_BUS_ADDRESS and GTK_A11Y=atspi; stops what
# it started (by PID) and returns the command's exit status.
set -u
TMP=$(mktemp -d -t display.XXXXXX)
PIDS=()
cleanup() {
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill "${PIDS[i]}" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Xvfb picks a free display and writes its number on fd 3 once it accepts clients.
Xvfb -displayfd 3 -screen 0 1280x800x24 -nolisten tcp 3>"$TMP/display" 2>"$TMP/xvfb.log" &
PIDS+=("$!")
for _ in $(seq 500); do [ -s "$TMP/display" ] && break; sleep 0.01; done
[ -s "$TMP/display" ] || { echo "with-display.sh: Xvfb did not start:" >&2; cat "$TMP/xvfb.log" >&2; exit 1; }
export DISPLAY=":$(head -n1 "$TMP/display")"

# A session bus with the standard service directories (dbus-launch), which starts
# at-spi-bus-launcher on the first call to org.a11y.Bus.
eval "$(dbus-launch --sh-syntax)"
PIDS+=("$DBUS_SESSION_BUS_PID")
export GTK_A11Y=atspi NO_AT_BRIDGE=0
unset WAYLAND_DISPLAY PERMISSIONS_BUS

"$@"
