#!/usr/bin/env bash
# Install a Debian package a test or the grader can use, where this machine allows it.
#   scripts/install_tool.sh PACKAGE COMMAND WHAT-HAPPENS-WITHOUT-IT
# e.g. `chromium chromium "tests/test_browser.py will skip"` (the browser test, `make browser`)
# or `bubblewrap bwrap "grading runs unsandboxed"` (the grading sandbox, `make sandbox`).
# Never fails: without the tool, the project says so and goes on.
set -u
package="$1" command="$2" without="$3"
if command -v "$command" >/dev/null 2>&1; then
    echo "$package: $("$command" --version 2>/dev/null | head -1)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        echo "$package: not installed (needs root or sudo for apt-get); $without"
        exit 0
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "$package: not installed (no apt-get; install it with your package manager); $without"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "$package" >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q "$package" >/dev/null 2>&1; }
if command -v "$command" >/dev/null 2>&1; then
    echo "$package: installed $("$command" --version 2>/dev/null | head -1)"
else
    echo "$package: apt-get could not install it; $without"
fi
exit 0
