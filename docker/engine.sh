#!/usr/bin/env bash
# A Docker engine for the image smoke test on a host like this one (docs/docker.md):
#   docker/engine.sh start    install docker.io if needed, start dockerd
#   docker/engine.sh base     build csi-mock.local/python-base:bookworm (debootstrap)
#   docker/engine.sh stop     stop the dockerd this script started
#   docker/engine.sh mirror URL   pull Docker Hub names through URL (registry-mirrors,
#                             reloaded without a restart; "none" removes it)
#
# dockerd runs with a runc wrapper that drops CAP_SYS_RESOURCE (the VM lacks it), with
# no default bridge and no iptables rules (nothing here needs container networking;
# image builds use the host network), and with its state under $DOCKER_ROOT.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DOCKER_ROOT="${DOCKER_ROOT:-/var/lib/csi-mock-docker}"
PIDFILE="$DOCKER_ROOT/dockerd.pid"
LOG="$DOCKER_ROOT/dockerd.log"
BASE_IMAGE="${CSI_MOCK_BASE_IMAGE:-csi-mock.local/python-base:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
HOST_CA_BUNDLE="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start() {
  if ! command -v dockerd >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  fi
  mkdir -p "$DOCKER_ROOT"
  if running; then echo "dockerd already running (pid $(cat "$PIDFILE"))"; return; fi
  [[ -f "$DOCKER_ROOT/daemon.json" ]] || echo '{}' >"$DOCKER_ROOT/daemon.json"
  dockerd \
    --config-file "$DOCKER_ROOT/daemon.json" \
    --data-root "$DOCKER_ROOT/data" \
    --exec-root "$DOCKER_ROOT/exec" \
    --pidfile "$PIDFILE" \
    --bridge=none --iptables=false --ip6tables=false \
    --add-runtime "runc-nosysres=$HERE/runc-without-sys-resource" \
    --default-runtime runc-nosysres \
    >"$LOG" 2>&1 &
  for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
      echo "dockerd running (pid $(cat "$PIDFILE")), log $LOG"
      return
    fi
    sleep 0.5
  done
  echo "dockerd did not answer within 30 s; its log:" >&2
  tail -20 "$LOG" >&2
  exit 1
}

base() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "$BASE_IMAGE exists"; return
  fi
  command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  local rootfs
  rootfs="$(mktemp -d /tmp/csi-mock-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' RETURN
  debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$rootfs" >/dev/null
  # The image trusts what this host trusts (its egress may go through a TLS proxy
  # with a CA of its own), and pip in a venv is told to use that bundle.
  mkdir -p "$rootfs/etc/ssl/certs"
  cp "$HOST_CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    - "$BASE_IMAGE" >/dev/null
  echo "$BASE_IMAGE built from debootstrap $SUITE"
}

# Docker reloads registry-mirrors on SIGHUP, so running containers (kind nodes) stay.
mirror() {
  local url="${1:?usage: engine.sh mirror URL|none}"
  running || { echo "dockerd is not running: engine.sh start first" >&2; exit 1; }
  if [[ "$url" == none ]]; then
    echo '{}' >"$DOCKER_ROOT/daemon.json"
  else
    printf '{"registry-mirrors": ["%s"]}\n' "$url" >"$DOCKER_ROOT/daemon.json"
  fi
  kill -HUP "$(cat "$PIDFILE")"
  for _ in $(seq 1 20); do
    if [[ "$url" == none ]] || docker info --format '{{json .RegistryConfig.Mirrors}}' | grep -q "$url"; then
      echo "registry mirror: $url"; return
    fi
    sleep 0.25
  done
  echo "dockerd did not take the mirror $url; its log:" >&2
  tail -5 "$LOG" >&2
  exit 1
}

stop() {
  if running; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 1 40); do running || break; sleep 0.25; done
  fi
  echo "dockerd stopped"
}

case "${1:-}" in
  start) start ;;
  base) base ;;
  stop) stop ;;
  mirror) mirror "${2:-}" ;;
  *) echo "usage: $0 start|base|stop|mirror URL" >&2; exit 2 ;;
esac
