#!/usr/bin/env bash
# One file moved by gpupool against OpenSSH's scp and rsync on this machine (docs/benchmarks.md
# "Datasets", issue 18's transfer goal): a file of SIZE_MIB MiB of random bytes, up and down,
# over loopback —
#   - `gpupool cp` into and out of a running task (through the server and the node's tunnel),
#   - `gpupool dataset push` of a directory holding it (into the server's chunk store),
#   - scp and rsync (over ssh) to and from a private sshd on 127.0.0.1 (Debian openssh-server and
#     rsync; without them only gpupool is measured, and the script says so).
# Each figure is the best of ROUNDS runs (wall time of the command), in MB/s (10^6 bytes/s).
#   bench/transfer_vs_scp.sh                          # build/src/cmd/gpupool, 1024 MiB, 3 rounds
#   GPUPOOL=/path/gpupool SIZE_MIB=512 ROUNDS=5 bench/transfer_vs_scp.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUPOOL="${GPUPOOL:-$ROOT/build/src/cmd/gpupool}"
SIZE_MIB="${SIZE_MIB:-1024}"
ROUNDS="${ROUNDS:-3}"
WORK="$(mktemp -d /tmp/gpupool-transfer.XXXXXX)"
chmod 755 "$WORK"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# best LABEL CMD...: runs CMD ROUNDS times and prints LABEL with the best rate.
best() {
  local label=$1 t0 t1 secs
  shift
  local min=
  for _ in $(seq "$ROUNDS"); do
    t0=$(date +%s.%N)
    if ! "$@" >/dev/null 2>>"$WORK/errors"; then
      echo "$label: failed (below)"
      return 0
    fi
    t1=$(date +%s.%N)
    secs=$(python3 -c "print($t1 - $t0)")
    if [[ -z "$min" ]] || python3 -c "import sys; sys.exit(0 if $secs < $min else 1)"; then min=$secs; fi
  done
  python3 -c "print(f'{\"$label\":<44} {$SIZE_MIB * 1048576 / $min / 1e6:8.0f} MB/s  ({$min:.2f} s)')"
}

mkdir -p "$WORK/src" "$WORK/back" "$WORK/data"
chmod 755 "$WORK/data"
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$WORK/src/file.bin"
echo "== one file of $SIZE_MIB MiB, best of $ROUNDS, loopback"

# gpupool: a pool of one node, a task that waits.
port=$(free_port)
"$GPUPOOL" up --data-dir "$WORK/data" --listen "127.0.0.1:$port" >"$WORK/up.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [[ -s "$WORK/data/credentials.env" ]] && break; sleep 0.1; done
set -a
. "$WORK/data/credentials.env"
set +a
export HOME="$WORK/home"
task=$("$GPUPOOL" submit -- sleep 3600)
until "$GPUPOOL" ls-files "$task" >/dev/null 2>&1; do sleep 0.2; done
best "gpupool cp up (a running task)" "$GPUPOOL" cp "$WORK/src/file.bin" "$task:file.bin"
best "gpupool cp down (a running task)" "$GPUPOOL" cp "$task:file.bin" "$WORK/back/file.bin"
# Once: a second push of the same bytes finds every chunk stored and sends nothing.
ROUNDS=1 best "gpupool dataset push (everything new, once)" "$GPUPOOL" dataset push "$WORK/src" bench

# OpenSSH: a private sshd that takes a key of this run, as root.
if [[ -x /usr/sbin/sshd && -x /usr/bin/rsync ]]; then
  sport=$(free_port)
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/user_key"
  cp "$WORK/user_key.pub" "$WORK/authorized_keys"
  chmod 600 "$WORK/authorized_keys"
  cat >"$WORK/sshd_config" <<CFG
ListenAddress 127.0.0.1:$sport
HostKey $WORK/host_key
AuthorizedKeysFile $WORK/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
PidFile $WORK/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
CFG
  mkdir -p /run/sshd
  /usr/sbin/sshd -D -f "$WORK/sshd_config" 2>>"$WORK/errors" &
  PIDS+=($!)
  ssh_opts=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
            -i "$WORK/user_key")
  for _ in $(seq 50); do ssh "${ssh_opts[@]}" -p "$sport" root@127.0.0.1 true 2>/dev/null && break; sleep 0.1; done
  mkdir -p "$WORK/remote"
  best "scp up" scp "${ssh_opts[@]}" -P "$sport" "$WORK/src/file.bin" "root@127.0.0.1:$WORK/remote/file.bin"
  best "scp down" scp "${ssh_opts[@]}" -P "$sport" "root@127.0.0.1:$WORK/remote/file.bin" "$WORK/back/scp.bin"
  rsync_up() { rm -f "$WORK/remote/rsync.bin"; rsync -e "ssh ${ssh_opts[*]} -p $sport" "$WORK/src/file.bin" "root@127.0.0.1:$WORK/remote/rsync.bin"; }
  rsync_down() { rm -f "$WORK/back/rsync.bin"; rsync -e "ssh ${ssh_opts[*]} -p $sport" "root@127.0.0.1:$WORK/remote/file.bin" "$WORK/back/rsync.bin"; }
  best "rsync over ssh up (a new file)" rsync_up
  best "rsync over ssh down (a new file)" rsync_down
else
  echo "(no /usr/sbin/sshd or rsync: apt-get install openssh-server rsync to compare with them)"
fi
if [[ -s "$WORK/errors" ]]; then
  echo "errors:" >&2
  cat "$WORK/errors" >&2
fi
