#!/usr/bin/env bash
# Build and inspect the pinned external tools (Kubernetes, etcd, CSI sidecars,
# csi-sanity, containerd, ...) that the test harness runs.
#
#   tools/build.sh build [TOOL...]   build all (or some) tools; reuses finished builds
#   tools/build.sh doctor            pinned version / present? / version the binary reports
#   tools/build.sh path [TOOL]       print the bin dir (or the path of one binary)
#   tools/build.sh list              print unit, version and binaries, one unit a line
#   tools/build.sh regen UNIT...     regenerate tools/UNIT/go.mod+go.sum (needs the module proxy)
#   tools/build.sh prune             delete cached builds the current pins no longer use
#
# TOOL is a unit name (tools/<unit>/) or the name of a binary it produces.
# Pins live in tools/<unit>/build.env + go.mod + go.sum. See docs/toolchain.md.
#
# Environment:
#   CSI_MOCK_TOOLS_DIR   cache root (default ~/.cache/csi-mock/tools); the bin dir is
#                        $CSI_MOCK_TOOLS_DIR/<toolset-id>/bin, finished builds live in
#                        $CSI_MOCK_TOOLS_DIR/store/<unit>-<version>-<key>/
#   CSI_MOCK_TOOLS_NICE  niceness for go build (default 10)
set -euo pipefail

# This script lives in tools/, next to the units it builds (a source checkout's tools/,
# or the installed package's data/tools/).
TOOLS_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT="${CSI_MOCK_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/csi-mock/tools}"
NICE="${CSI_MOCK_TOOLS_NICE:-10}"
# Bump when the way binaries are built changes (flags, layout), to invalidate old builds.
RECIPE=2
# The compiler writes no DWARF: `-s -w` strips it from every binary anyway, and leaving it
# out takes about 15 % off a cold compile (docs/toolchain.md); the machine code is the same.
GCFLAGS="all=-dwarf=false"
# Build order: csi-sanity first (CI needs it fast), then sidecars, etcd, Kubernetes, the rest.
UNITS=(csi-sanity csi-provisioner csi-attacher node-driver-registrar livenessprobe
       csi-resizer csi-snapshotter etcd kubernetes containerd runc cni-plugins crictl kind hostpathplugin
       ginkgo e2e actionlint crane)

export GOTOOLCHAIN=local GOWORK=off
export GOFLAGS="-mod=readonly -buildvcs=false"

# How the user ran this script, for hints: `csi-harness tools` sets it in a wheel install;
# otherwise the path it was run by (the harness runs the installed package's copy).
SELF="${CSI_MOCK_TOOLS_COMMAND:-${BASH_SOURCE[0]}}"

die() { echo "tools: $*" >&2; exit 1; }

# usage [COMMAND]: the header above (lines 2-19), or COMMAND's line of it as its usage.
usage() {
  local line
  if [[ -n ${1:-} ]]; then
    line=$(sed -n "s|^#   tools/build.sh \($1\( .*\)\{0,1\}\)\$|\1|p" "${BASH_SOURCE[0]}")
    if [[ $line =~ ^(.*[^ ])\ {2,}(.*)$ ]]; then
      printf 'usage: %s %s\n\n%s\n' "$SELF" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
      return
    fi
  fi
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# --help or -h after a command prints that command's usage and does nothing else (no
# build, no prune), and needs no Go; so does either one alone.
for arg in "$@"; do
  if [[ $arg == --help || $arg == -h ]]; then
    [[ ${1:-} == "$arg" ]] && { usage; exit 0; }
    case $1 in build|doctor|path|list|regen|prune) usage "$1"; exit 0 ;; esac
  fi
done

GOVERSION=$(go env GOVERSION 2>/dev/null) || die "go not found in PATH"

# load_unit UNIT: sets MODULE VERSION PACKAGES TESTPACKAGES BINARIES CGO LDFLAGS TAGS DATA UNAVAILABLE
# DATA: space-separated MODULE:PATH:DEST, files of a module of the build (CRDs) copied
# into the unit's store dir as DEST.
load_unit() {
  local f="$TOOLS_SRC/$1/build.env"
  [[ -f $f ]] || die "unknown unit $1 (no $f)"
  MODULE= VERSION= PACKAGES= TESTPACKAGES= BINARIES= CGO=0 LDFLAGS= TAGS= DATA= UNAVAILABLE=
  # shellcheck disable=SC1090
  source "$f"
}

# unit_key UNIT: content hash of everything that determines the unit's binaries.
# (Any change to the text hashed here, even the literal first line, invalidates every cached build.)
unit_key() {
  local d="$TOOLS_SRC/$1"
  {
    echo "recipe=$RECIPE go=$GOVERSION arch=$(go env GOOS)/$(go env GOARCH) nice-irrelevant"
    for f in "$d"/build.env "$d"/go.mod "$d"/go.sum "$d"/*.go; do
      [[ -f $f ]] || continue
      echo "== ${f##*/}"; cat "$f"
    done
  } | sha256sum | cut -c1-16
}

# Computed once per invocation: key per unit, toolset id over all units.
declare -A KEY
toolset_id() {
  local u all=""
  for u in "${UNITS[@]}"; do
    KEY[$u]=$(unit_key "$u")
    all+="$u=${KEY[$u]};"
  done
  TOOLSET="ts-$(printf '%s' "$all" | sha256sum | cut -c1-12)"
  BIN="$ROOT/$TOOLSET/bin"
}

store_dir() { load_unit "$1"; echo "$ROOT/store/$1-$VERSION-${KEY[$1]}"; }

# resolve NAME -> unit (accepts unit names and binary names)
resolve() {
  local name=$1 u b
  for u in "${UNITS[@]}"; do [[ $u == "$name" ]] && { echo "$u"; return; }; done
  for u in "${UNITS[@]}"; do
    load_unit "$u"
    for b in $BINARIES; do [[ $b == "$name" ]] && { echo "$u"; return; }; done
  done
  # A usage error (exit 2), as a command line that cannot be right is everywhere here.
  echo "tools: unknown tool '$name' (try: $SELF list)" >&2
  exit 2
}

# link_unit UNIT: (re)point bin/<binary> symlinks at the unit's store dir, atomically.
link_unit() {
  local u=$1 dir b rel
  dir=$(store_dir "$u")
  mkdir -p "$BIN"
  for b in $BINARIES; do
    rel="../../store/${dir##*/}/$b"
    ln -sfn "$rel" "$BIN/.$b.tmp.$$"
    mv -Tf "$BIN/.$b.tmp.$$" "$BIN/$b"
  done
}

ldflags_for() {
  local major minor date v=${VERSION#v}
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  # Build date = the module version's commit time (reproducible, not "now").
  date=$(cd "$TOOLS_SRC/$1" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$MODULE" 2>/dev/null || true)
  local s=$LDFLAGS
  s=${s//@VERSION@/$VERSION}; s=${s//@SEMVER@/$v}; s=${s//@MAJOR@/$major}; s=${s//@MINOR@/$minor}; s=${s//@DATE@/${date:-1970-01-01T00:00:00Z}}
  echo "-s -w $s"
}

TMPDIR_ACTIVE=""
cleanup() { [[ -n $TMPDIR_ACTIVE && -d $TMPDIR_ACTIVE ]] && rm -rf "$TMPDIR_ACTIVE"; TMPDIR_ACTIVE=""; }

# copy_data UNIT MODULE:PATH:DEST DIR: copy PATH of MODULE (as the unit's build resolved
# it, replacements included) to DIR/DEST.
copy_data() {
  local module=${2%%:*} rest=${2#*:} src
  src=$(cd "$TOOLS_SRC/$1" && go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' "$module") || return 1
  [[ -n $src && -e $src/${rest%%:*} ]] || return 1
  cp -r "$src/${rest%%:*}" "$3/${rest#*:}" && chmod -R u+w "$3/${rest#*:}"
}

# build_unit UNIT INDEX TOTAL
build_unit() {
  local u=$1 i=$2 n=$3 final tmp pkgs=() p t0 t1 ld b d
  load_unit "$u"
  if [[ -n $UNAVAILABLE ]]; then
    echo "[$i/$n] $u $VERSION: UNAVAILABLE - $UNAVAILABLE" >&2
    SKIPPED+=("$u")
    return 0
  fi
  final=$(store_dir "$u")
  if [[ -f $final/.complete ]]; then
    link_unit "$u"
    echo "[$i/$n] $u $VERSION ($BINARIES): up to date"
    return 0
  fi
  echo "[$i/$n] building $u $VERSION ($BINARIES) ..."
  for p in $PACKAGES; do
    case $p in
      .) pkgs+=(.) ;;
      /) pkgs+=("$MODULE") ;;
      *) pkgs+=("$MODULE/$p") ;;
    esac
  done
  mkdir -p "$ROOT/store"
  tmp=$(mktemp -d "$ROOT/store/.tmp-$u-XXXXXX")
  TMPDIR_ACTIVE=$tmp
  chmod 755 "$tmp"
  ld=$(ldflags_for "$u")
  t0=$(date +%s)
  (
    cd "$TOOLS_SRC/$u"
    CGO_ENABLED=$CGO nice -n "$NICE" go build -trimpath ${TAGS:+-tags "$TAGS"} \
      -gcflags "$GCFLAGS" -ldflags "$ld" -o "$tmp/" "${pkgs[@]}"
  ) || { cleanup; FAILED+=("$u"); echo "[$i/$n] $u: BUILD FAILED" >&2; return 0; }
  # A test package becomes <last path element>.test, as `go test -c` names it; the
  # wrapper's own test package (.) becomes <unit>.test (e2e's storage-only e2e.test).
  local tp tname
  for p in $TESTPACKAGES; do
    case $p in
      .) tp=. tname=$u ;;
      *) tp=$MODULE/$p tname=${p##*/} ;;
    esac
    (
      cd "$TOOLS_SRC/$u"
      CGO_ENABLED=$CGO nice -n "$NICE" go test -c -trimpath ${TAGS:+-tags "$TAGS"} \
        -gcflags "$GCFLAGS" -ldflags "$ld" -o "$tmp/$tname.test" "$tp"
    ) || { cleanup; FAILED+=("$u"); echo "[$i/$n] $u: TEST BINARY BUILD FAILED ($p)" >&2; return 0; }
  done
  for d in $DATA; do
    copy_data "$u" "$d" "$tmp" || { cleanup; FAILED+=("$u"); echo "[$i/$n] $u: DATA $d missing" >&2; return 0; }
  done
  t1=$(date +%s)
  for b in $BINARIES; do
    [[ -x $tmp/$b ]] || { cleanup; FAILED+=("$u"); echo "[$i/$n] $u: $b missing after build" >&2; return 0; }
  done
  printf 'unit=%s\nversion=%s\nkey=%s\ngo=%s\nbuilt=%s\nseconds=%s\n' \
    "$u" "$VERSION" "${KEY[$u]}" "$GOVERSION" "$(date -u +%FT%TZ)" "$((t1 - t0))" > "$tmp/.complete"
  rm -rf "$final"            # only a stale incomplete dir can be here
  mv -T "$tmp" "$final"      # atomic: the unit appears complete or not at all
  TMPDIR_ACTIVE=""
  link_unit "$u"
  BUILT+=("$u")
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$u" "$VERSION" "$((t1 - t0))" "$GOVERSION" >> "$ROOT/build-times.tsv"
  echo "[$i/$n] $u $VERSION built in $((t1 - t0))s"
}

cmd_build() {
  local sel=() u seen="" i=0 t0 lockfd
  if (($# == 0)); then sel=("${UNITS[@]}"); else
    for a in "$@"; do u=$(resolve "$a"); [[ " $seen " == *" $u "* ]] || { sel+=("$u"); seen+=" $u"; }; done
  fi
  toolset_id
  mkdir -p "$ROOT/store" "$BIN"
  exec {lockfd}>"$ROOT/.lock"
  flock -n "$lockfd" || { echo "tools: waiting for another build to finish ..." >&2; flock "$lockfd"; }
  # Leftovers of interrupted builds (we hold the lock, so nobody is writing them).
  rm -rf "$ROOT"/store/.tmp-* 2>/dev/null || true
  trap 'cleanup; exit 130' INT TERM
  trap cleanup EXIT
  BUILT=() FAILED=() SKIPPED=()
  t0=$(date +%s)
  echo "tools: $GOVERSION, toolset $TOOLSET, cache $ROOT"
  for u in "${sel[@]}"; do
    i=$((i + 1))
    build_unit "$u" "$i" "${#sel[@]}"
  done
  echo "tools: ${#BUILT[@]} built, ${#FAILED[@]} failed, ${#SKIPPED[@]} unavailable, $(( $(date +%s) - t0 ))s total"
  ((${#SKIPPED[@]})) && echo "tools: unavailable: ${SKIPPED[*]} (see $SELF doctor)"
  echo "tools: bin dir: $BIN"
  ((${#FAILED[@]} == 0)) || die "failed: ${FAILED[*]}"
}

# version_of BINARY PATH: one line, what the binary says about its version.
version_of() {
  local b=$1 p=$2 out
  case $b in
    kubectl) out=$(timeout 20 "$p" version --client 2>&1 | head -1) ;;
    kubeadm) out=$(timeout 20 "$p" version -o short 2>&1) ;;
    kind|ginkgo) out=$(timeout 20 "$p" version 2>&1 | head -1) ;;
    csi-sanity) out=$(timeout 20 "$p" -version 2>&1) ;;
    containerd-shim-runc-v2) out=$(timeout 20 "$p" -v 2>&1 | grep -i version | head -1) ;;
    bridge|host-local|loopback|portmap) out=$(timeout 20 "$p" </dev/null 2>&1 | head -1) ;;
    *) out=$(timeout 20 "$p" --version 2>&1 | head -1) ;;
  esac
  out=${out//"$p"/$b}
  echo "${out:-?}" | head -1 | tr -s ' \t' ' '
}

cmd_doctor() {
  local u b dir st rep missing=0
  toolset_id
  echo "go: $GOVERSION   toolset: $TOOLSET"
  echo "bin dir: $BIN"
  printf '%-26s %-22s %-9s %-8s %s\n' TOOL UNIT PINNED STATUS REPORTED
  for u in "${UNITS[@]}"; do
    dir=$(store_dir "$u")
    load_unit "$u"
    for b in $BINARIES; do
      if [[ -n $UNAVAILABLE ]]; then
        printf '%-26s %-22s %-9s %-8s %s\n' "$b" "$u" "$VERSION" unavail "$UNAVAILABLE"
        continue
      fi
      if [[ -f $dir/.complete && -x $dir/$b ]]; then
        st=present; rep=$(version_of "$b" "$dir/$b")
      else
        st=missing; rep="-"; missing=$((missing + 1))
      fi
      printf '%-26s %-22s %-9s %-8s %s\n' "$b" "$u" "$VERSION" "$st" "$rep"
    done
  done
  ((missing == 0)) || echo "$missing binaries missing: run '$SELF build' (or '$SELF build TOOL' for one)"
}

cmd_path() {
  toolset_id
  if (($# == 0)); then echo "$BIN"; return; fi
  local u dir; u=$(resolve "$1")
  dir=$(store_dir "$u")
  load_unit "$u"
  [[ -z $UNAVAILABLE ]] || die "$1 is unavailable: $UNAVAILABLE"
  [[ -f $dir/.complete ]] || die "$1 is not built: run '$SELF build $1'"
  if [[ " $BINARIES " == *" $1 "* ]]; then echo "$dir/$1"; else echo "$dir"; fi
}

cmd_list() {
  local u
  for u in "${UNITS[@]}"; do
    load_unit "$u"
    printf '%s\t%s\t%s\t%s\n' "$u" "$MODULE" "$VERSION" "$BINARIES${UNAVAILABLE:+	UNAVAILABLE}"
  done
}

# prune: delete store entries and toolset dirs the current pins do not use.
cmd_prune() {
  local u keep=() d lockfd
  toolset_id
  [[ -d $ROOT/store ]] || return 0
  exec {lockfd}>"$ROOT/.lock"; flock "$lockfd"
  for u in "${UNITS[@]}"; do keep+=("$(store_dir "$u")"); done
  for d in "$ROOT"/store/* "$ROOT"/ts-*; do
    [[ -e $d ]] || continue
    [[ $d == "$ROOT/$TOOLSET" || " ${keep[*]} " == *" $d "* ]] && continue
    echo "removing $d"; rm -rf "$d"
  done
}

cmd_regen() {
  local u
  (($#)) || die "usage: $SELF regen UNIT..."
  for u in "$@"; do
    load_unit "$u"
    [[ -z $UNAVAILABLE ]] || die "$u is marked unavailable: $UNAVAILABLE"
    GOFLAGS=-mod=mod python3 "$TOOLS_SRC/genwrap.py" "$TOOLS_SRC/$u"
  done
}

main() {
  case ${1:-} in
    build) shift; cmd_build "$@" ;;
    doctor) shift; cmd_doctor "$@" ;;
    path) shift; cmd_path "$@" ;;
    list) shift; cmd_list "$@" ;;
    regen) shift; cmd_regen "$@" ;;
    prune) shift; cmd_prune "$@" ;;
    *) usage; exit 2 ;;
  esac
}

# Everything runs from inside main and exits on the same line, so bash never reads
# past this point of the file: editing (or checking out) this script while a long
# build runs cannot make the running build execute half-read text.
main "$@"; exit $?
