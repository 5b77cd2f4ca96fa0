#!/usr/bin/env bash
# Installs the Debian 12 packages gpupool needs to build and run (and, with --test, to run the whole test
# suite). Idempotent; quiet when done.
# Usage: scripts/install-deps.sh [--test]
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache
      libexpected-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
      libboost1.81-dev libsqlite3-dev libssl-dev libspdlog-dev
      # ssh into tasks: the agent runs dropbear per connection, sftp-server serves scp and sftp
      dropbear-bin openssh-sftp-server)
# The web console is built with node and npm (web/CMakeLists.txt); a machine that already has
# both (e.g. from NodeSource, whose nodejs includes npm) keeps them.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then pkgs+=(nodejs npm); fi
if [ "${1:-}" = "--test" ]; then
  pkgs+=(python3 python3-venv  # the Python SDK's tests (an offline install into a venv)
         docker.io busybox-static  # the docker-labelled tests: their own dockerd, a busybox image
         chromium  # the console's browser tests (Playwright drives Debian's Chromium)
         jupyter-notebook  # gateway_e2e_test's Jupyter test: the real notebook behind the gateway
         prometheus  # promtool checks /metrics and docs/monitoring's rules
         openssh-client  # ssh_e2e_test: the real ssh and scp through gpupool tunnel
         clang libclang-rt-14-dev)  # the fuzz harnesses' smoke run (scripts/fuzz.sh: libFuzzer)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
