#!/usr/bin/env bash
# bubblewrap (bwrap), the sandbox that grading kernels run in: Debian's `bubblewrap` package.
# Never fails: without it the grader runs kernels unsandboxed and prints a warning saying so.
set -u
if command -v bwrap >/dev/null 2>&1; then
    echo "sandbox: $(bwrap --version 2>/dev/null | head -1)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        echo "sandbox: bubblewrap not installed (needs root or sudo for apt-get); grading runs unsandboxed"
        exit 0
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "sandbox: bubblewrap not installed (no apt-get; install bubblewrap with your package manager)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1; }
if command -v bwrap >/dev/null 2>&1; then
    echo "sandbox: installed $(bwrap --version 2>/dev/null | head -1)"
else
    echo "sandbox: apt-get could not install bubblewrap; grading runs unsandboxed"
fi
exit 0
