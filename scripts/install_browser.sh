#!/usr/bin/env bash
# Chromium for the browser test (tests/test_browser.py): Debian's `chromium` package,
# driven by Playwright through `executable_path` (no download from Playwright's CDN).
# Never fails: without a browser the test skips and says why.
set -u
if command -v chromium >/dev/null 2>&1; then
    echo "browser: $(chromium --version 2>/dev/null | head -1)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        echo "browser: not installed (needs root or sudo for apt-get); tests/test_browser.py will skip"
        exit 0
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser: not installed (no apt-get; install Chromium and set CHROMIUM=/path/to/chromium)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q chromium >/dev/null 2>&1; }
if command -v chromium >/dev/null 2>&1; then
    echo "browser: installed $(chromium --version 2>/dev/null | head -1)"
else
    echo "browser: apt-get could not install chromium; tests/test_browser.py will skip"
fi
exit 0
