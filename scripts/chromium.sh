#!/usr/bin/env bash
# Debian's chromium for the console's browser tests (driven by Playwright through
# executable_path: Playwright's own browser downloads are never used).
set -euo pipefail
command -v chromium >/dev/null && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq -o DPkg::Lock::Timeout=900
apt-get install -y -qq -o DPkg::Lock::Timeout=900 --no-install-recommends chromium fonts-dejavu-core >/dev/null
