#!/usr/bin/env bash
# Install the Debian packages the local cluster and the tool builds need, if missing:
#   busybox-static   the busybox image pods run (csi_harness/_internal/core/images.py)
#   gcc libc6-dev    the static pause binary of the sandbox image
#   libseccomp-dev pkg-config   runc with seccomp (containerd gives sandboxes a profile)
#   iproute2         `ip`, for the pod bridge
#   debootstrap      the root filesystems of the kind node image and the driver image
set -euo pipefail
PACKAGES=(busybox-static gcc libc6-dev libseccomp-dev pkg-config iproute2 debootstrap)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system-deps: all present (${PACKAGES[*]})"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "system-deps: installed ${missing[*]}"
