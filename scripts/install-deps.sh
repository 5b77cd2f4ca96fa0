#!/usr/bin/env bash
# Installs the Debian 12 packages gpupool needs to build and test. Idempotent; quiet when done.
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache
      libexpected-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
      libboost1.81-dev libsqlite3-dev libssl-dev libspdlog-dev
      python3 python3-venv  # the Python SDK's tests (an offline install into a venv)
      docker.io busybox-static)  # the docker-labelled tests: their own dockerd, a busybox image
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
