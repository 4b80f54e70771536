#!/usr/bin/env python3
"""Generate (or regenerate) a wrapper Go module that pins one upstream tool.

Usage:
    python3 tools/genwrap.py tools/<unit>

The unit directory holds a build.env (shell assignments, see tools/README in
docs/toolchain.md).  This script reads MODULE, VERSION, PACKAGES and the
optional STAGING_VERSION from it, looks at the upstream go.mod of
MODULE@VERSION (fetched through the module proxy into the module cache) and
writes <unit>/go.mod:

  * require MODULE VERSION
  * every `replace` of the upstream go.mod, rewritten so it works outside the
    upstream repository:
      - `X => ./staging/src/X` (Kubernetes staging) becomes `X => X STAGING_VERSION`
        (default: VERSION with the major 1 turned into 0, v1.37.1 -> v0.37.1)
      - `X => ../dir` (multi-module repos such as etcd) becomes `X => X VERSION`
      - `X => ./FORBIDDEN_DEPENDENCY` guards are dropped (they only exist to
        make an accidental import fail inside the upstream repo)
      - replacements that point at another module version are copied as is
  * every `exclude` of the upstream go.mod, copied as is
  * a `tool` line per entry of PACKAGES that lies inside MODULE

then runs `go mod tidy` so go.sum is complete.  Both files are committed.

With SHARE_VERSIONS_WITH (a list of other units) in build.env, every module the
wrapper needs is then raised to the highest version any of those units' go.mod
gives it (never lowered), same-path replaces included, and tidied again until
nothing moves.  Units built with the same version of a dependency share its
compiled packages in GOCACHE, so each is compiled once (docs/toolchain.md, "Units
that share versions").
"""

import json
import os
import re
import shlex
import subprocess
import sys


def read_env(path):
    """Parse simple KEY=value / KEY="value" lines (what build.env contains)."""
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", line)
            if not m:
                continue
            val = shlex.split(m.group(2)) if m.group(2) else [""]
            env[m.group(1)] = " ".join(val)
    return env


def go(args, cwd=None, capture=True):
    env = dict(os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-mod=mod")
    res = subprocess.run(
        ["go", *args], cwd=cwd, env=env, text=True, stdout=subprocess.PIPE if capture else None
    )
    if res.returncode != 0:
        sys.exit("genwrap: go {} failed".format(" ".join(args)))
    return res.stdout


def semver_key(version):
    """Sort key of a Go module version (semver 2.0 precedence; pseudo-versions are
    prereleases): v1.2.3 > v1.2.3-0.2026... > v1.2.2."""
    m = re.match(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$", version)
    if not m:
        sys.exit(f"genwrap: not a module version: {version!r}")
    release = tuple(int(x) for x in m.group(1, 2, 3))
    if m.group(4) is None:
        return release, (1,)
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in m.group(4).split("."))
    return release, (0, ids)


def same_path_replaces(gomod_json):
    """{path: version} of the go.mod's `X => X vN` replaces (Kubernetes' staging
    modules, which upstream requires as v0.0.0)."""
    return {
        r["Old"]["Path"]: r["New"]["Version"]
        for r in gomod_json.get("Replace") or []
        if r["New"].get("Version")
        and r["New"]["Path"] == r["Old"]["Path"]
        and not r["Old"].get("Version")
    }


def module_versions(gomod_json):
    """{path: version} a go.mod selects: a same-path replace's version wins over the
    requirement."""
    versions = {r["Path"]: r["Version"] for r in gomod_json.get("Require") or []}
    return versions | same_path_replaces(gomod_json)


def version_raises(own, others):
    """The `go mod edit` flags that raise the modules of `own` (a go.mod as `go mod edit
    -json` prints it) to the highest version any of `others` gives them. A module
    upstream pins by a same-path replace (Kubernetes' staging modules) moves only within
    its minor release: external-provisioner v6.3.0 does not compile against client-go
    v0.37 (its informer bridge)."""
    highest = {}
    for other in others:
        for mod, ver in module_versions(other).items():
            if mod not in highest or semver_key(ver) > semver_key(highest[mod]):
                highest[mod] = ver
    replaced = same_path_replaces(own)
    edits = []
    for mod, ver in sorted(module_versions(own).items()):
        if mod not in highest or semver_key(highest[mod]) <= semver_key(ver):
            continue
        if mod not in replaced:
            edits.append(f"-require={mod}@{highest[mod]}")
        elif semver_key(highest[mod])[0][:2] == semver_key(ver)[0][:2]:
            edits.append(f"-replace={mod}={mod}@{highest[mod]}")
    return edits


def share_versions(unit_dir, others):
    """Raise the wrapper's modules to the highest version the other units' go.mod
    files give them, and tidy; returns how many were raised (0: nothing moved)."""
    other_mods = []
    for other in others:
        path = os.path.join(os.path.dirname(unit_dir), other, "go.mod")
        if not os.path.exists(path):
            sys.exit(f"genwrap: SHARE_VERSIONS_WITH names {other!r}, which has no {path}")
        other_mods.append(json.loads(go(["mod", "edit", "-json", path])))
    own = json.loads(go(["mod", "edit", "-json"], cwd=unit_dir))
    edits = version_raises(own, other_mods)
    if edits:
        go(["mod", "edit", *edits], cwd=unit_dir)
        go(["mod", "tidy"], cwd=unit_dir, capture=False)
    return len(edits)


def staging_default(version):
    m = re.match(r"^v1\.(\d+\.\d+.*)$", version)
    return "v0." + m.group(1) if m else version


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    unit_dir = os.path.abspath(sys.argv[1])
    unit = os.path.basename(unit_dir)
    env = read_env(os.path.join(unit_dir, "build.env"))
    module, version = env["MODULE"], env["VERSION"]
    staging = env.get("STAGING_VERSION") or staging_default(version)
    packages = env.get("PACKAGES", "").split()

    info = json.loads(go(["mod", "download", "-json", f"{module}@{version}"]))
    upstream = json.loads(go(["mod", "edit", "-json", info["GoMod"]]))

    replaces, dropped = [], []
    for r in upstream.get("Replace") or []:
        old, new = r["Old"], r["New"]
        lhs = old["Path"] + (" " + old["Version"] if old.get("Version") else "")
        target = new["Path"]
        if new.get("Version"):
            replaces.append("{} => {} {}".format(lhs, target, new["Version"]))
        elif "FORBIDDEN_DEPENDENCY" in target:
            dropped.append(lhs)
        elif target.startswith("./staging/src/"):
            replaces.append("{} => {} {}".format(lhs, old["Path"], staging))
        elif target.startswith("./") or target.startswith("../"):
            replaces.append("{} => {} {}".format(lhs, old["Path"], version))
        else:
            sys.exit(f"genwrap: cannot handle replace {lhs} => {target}")
    excludes = ["{} {}".format(e["Path"], e["Version"]) for e in upstream.get("Exclude") or []]

    tools = []
    for p in packages:
        if p == ".":
            continue  # the wrapper's own main package (e.g. etcd's main.go)
        tools.append(module if p == "" or p == "/" else module + "/" + p.strip("/"))

    out = [
        f"// Code generated by tools/genwrap.py from {module}@{version}; DO NOT EDIT.",
        f"// Regenerate: python3 tools/genwrap.py tools/{unit}",
        "",
        f"module csi-mock/tools/{unit}",
        "",
        "go 1.26.0",
        "",
        f"require {module} {version}",
        "",
    ]
    if tools:
        out += ["tool ("] + ["\t" + t for t in tools] + [")", ""]
    if replaces:
        out += ["replace ("] + ["\t" + r for r in replaces] + [")", ""]
    if excludes:
        out += ["exclude ("] + ["\t" + e for e in excludes] + [")", ""]
    if dropped:
        out += ["// upstream guard replaces not carried over: " + ", ".join(dropped), ""]

    gomod = os.path.join(unit_dir, "go.mod")
    with open(gomod, "w") as f:
        f.write("\n".join(out))
    gosum = os.path.join(unit_dir, "go.sum")
    if not os.path.exists(gosum):
        open(gosum, "w").close()
    go(["mod", "tidy"], cwd=unit_dir, capture=False)
    others = env.get("SHARE_VERSIONS_WITH", "").split()
    for _ in range(5):
        if not others or share_versions(unit_dir, others) == 0:
            break
    else:
        sys.exit("genwrap: SHARE_VERSIONS_WITH did not settle after 5 rounds")
    # `go mod tidy` records what the wrapper's tools import, not the imports of an
    # upstream package's tests; listing them with -mod=mod adds their go.sum lines.
    for p in env.get("TESTPACKAGES", "").split():
        if p != ".":  # the wrapper's own tests: `go mod tidy` saw their imports
            go(["list", "-test", "-deps", f"{module}/{p}"], cwd=unit_dir)
    print(
        f"genwrap: wrote {gomod} ({len(replaces)} replace, {len(excludes)} exclude,"
        f" {len(tools)} tool)"
    )


if __name__ == "__main__":
    main()
