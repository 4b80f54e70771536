#!/usr/bin/env python3
"""Generate the Python gRPC bindings for the CSI and kubelet plugin registration protocols.

Runs ``grpc_tools.protoc`` on ``proto/csi.proto`` and ``proto/pluginregistration.proto``
and writes into ``csi_mock/proto/``, for each ``<name>`` of ``csi`` and
``pluginregistration``:

* ``<name>_pb2.py`` / ``<name>_pb2_grpc.py``   - protobuf messages and gRPC stubs/servicers
* ``<name>_pb2.pyi`` / ``<name>_pb2_grpc.pyi`` - type stubs from mypy-protobuf
* ``__init__.py``                              - package marker

and ``csi_mock/csi_methods.py``: the CSI methods, their messages and fields as plain data,
for the layers that must not import protobuf (configuration validates fault rules with it).

grpc_tools emits ``import <name>_pb2`` in the gRPC modules, which only works when
the output directory is on ``sys.path``; it is rewritten to a package-relative
import so that ``from csi_mock.proto import csi_pb2, csi_pb2_grpc`` works.

The output depends only on the proto files and the installed grpcio-tools /
mypy-protobuf versions, so repeated runs produce identical files.

Usage::

    python scripts/gen_proto.py           # (re)generate csi_mock/proto/
    python scripts/gen_proto.py --check   # exit 1 if the committed files are stale
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "csi_mock" / "proto"

CATALOGUE = ROOT / "csi_mock" / "csi_methods.py"
CATALOGUE_NAME = "csi_methods.py"
CSI_SERVICES = ("Identity", "Controller", "Node")
MAX_LINE = 100
"""The project's line length (pyproject.toml): longer catalogue lines are wrapped."""

PROTOS = ("csi", "pluginregistration")
"""proto/<name>.proto becomes csi_mock/proto/<name>_pb2{,_grpc}.py{,i}."""

INIT_PY = (
    '"""Generated CSI v1 and kubelet plugin registration v1 protocol bindings'
    ' (see scripts/gen_proto.py)."""\n'
)

# Generated files, in the order they are reported.
GENERATED = (
    "__init__.py",
    *(
        f"{name}_pb2{suffix}"
        for name in PROTOS
        for suffix in (".py", ".pyi", "_grpc.py", "_grpc.pyi")
    ),
)

# file name -> (import emitted by the generator, package-relative replacement)
IMPORT_REWRITES: dict[str, tuple[str, str]] = {
    f"{name}_pb2_grpc{suffix}": (
        f"import {name}_pb2 as {alias}\n",
        f"from . import {name}_pb2 as {alias}\n",
    )
    for name in PROTOS
    for suffix, alias in ((".py", f"{name}__pb2"), (".pyi", f"_{name}_pb2"))
}

REGENERATE_HINT = "run python scripts/gen_proto.py"


class GenerationError(Exception):
    """Raised when protoc or one of its plugins fails or produces unexpected output."""


def find_plugin(name: str) -> Path:
    """Locate a protoc plugin executable installed alongside this interpreter."""
    candidates = [Path(sysconfig.get_path("scripts")) / name, Path(sys.executable).parent / name]
    on_path = shutil.which(name)
    if on_path is not None:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise GenerationError(f"protoc plugin {name!r} not found; pip install mypy-protobuf")


def run_protoc(out_dir: Path) -> None:
    """Run protoc with the python, grpc_python, mypy and mypy_grpc generators."""
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",  # adds grpc_tools' bundled google/protobuf/*.proto to -I
        f"--proto_path={PROTO_DIR}",
        f"--plugin=protoc-gen-mypy={find_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={find_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out=quiet:{out_dir}",
        f"--mypy_grpc_out=quiet:{out_dir}",
        *(str(PROTO_DIR / f"{proto}.proto") for proto in PROTOS),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise GenerationError(
            f"protoc failed (exit {result.returncode}):\n{result.stderr or result.stdout}"
        )


def fix_imports(out_dir: Path) -> None:
    """Rewrite the top-level ``import <name>_pb2`` in the gRPC modules to a relative import."""
    for name, (old, new) in IMPORT_REWRITES.items():
        path = out_dir / name
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise GenerationError(f"{name}: expected exactly one {old.strip()!r} to rewrite")
        path.write_text(text.replace(old, new), encoding="utf-8", newline="\n")


def generate(out_dir: Path) -> None:
    """Generate all files listed in GENERATED, and the method catalogue, into ``out_dir``."""
    run_protoc(out_dir)
    fix_imports(out_dir)
    (out_dir / "__init__.py").write_text(INIT_PY, encoding="utf-8", newline="\n")
    missing = [name for name in GENERATED if not (out_dir / name).is_file()]
    if missing:
        raise GenerationError(f"protoc did not produce: {', '.join(missing)}")
    (out_dir / CATALOGUE_NAME).write_text(
        method_catalogue(out_dir / "csi_pb2.py"), encoding="utf-8", newline="\n"
    )


def method_catalogue(csi_pb2: Path) -> str:
    """csi_methods.py: each CSI method's response fields, its request and response types
    and the schema of every message they hold, read from the fresh bindings."""
    spec = importlib.util.spec_from_file_location("_fresh_csi_pb2", csi_pb2)
    if spec is None or spec.loader is None:
        raise GenerationError(f"cannot load {csi_pb2}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = [
        '"""The CSI methods this driver serves, their messages and fields, as plain data.',
        "",
        "Generated from proto/csi.proto by scripts/gen_proto.py; do not edit. Configuration",
        "validates fault rules with it without importing protobuf.",
        '"""',
        "",
        "RESPONSE_FIELDS: dict[str, tuple[str, ...]] = {",
    ]
    outputs = {
        method.name: method.output_type
        for service in CSI_SERVICES
        for method in module.DESCRIPTOR.services_by_name[service].methods
    }
    methods = {name: tuple(f.name for f in output.fields) for name, output in outputs.items()}
    lines.extend(f"    {name!r}: {fields!r}," for name, fields in sorted(methods.items()))
    lines.append("}")
    lines.extend(_method_types("REQUEST_TYPES", "request", module, "input_type"))
    lines.extend(_method_types("RESPONSE_TYPES", "response", module, "output_type"))
    messages, enums = _message_schema([*_inputs(module), *outputs.values()])
    lines += [
        "",
        "# Every message a request or a reply holds, by full name: each field's label",
        '# ("single", "repeated", or "map" from string keys), its type (a scalar such as',
        '# "int64", or the full name of a message in MESSAGES or of an enum in ENUMS) and',
        '# its oneof ("" for none). Fault rules walk field paths with it.',
        "MESSAGES: dict[str, dict[str, tuple[str, str, str]]] = {",
    ]
    for name, fields in sorted(messages.items()):
        if not fields:
            lines.append(f"    {name!r}: {{}},")
            continue
        lines.append(f"    {name!r}: {{")
        for field, info in fields:
            line = f"        {field!r}: {info!r},"
            if len(line) > MAX_LINE:  # as ruff format wraps it
                line = "\n".join(
                    [
                        f"        {field!r}: (",
                        *(f"            {part!r}," for part in info),
                        "        ),",
                    ]
                )
            lines.append(line)
        lines.append("    },")
    lines.append("}")
    lines += [
        "",
        "# Each enum's value names, in number order.",
        "ENUMS: dict[str, tuple[str, ...]] = {",
    ]
    for name, values in sorted(enums.items()):
        lines.append(f"    {name!r}: (")
        lines.extend(f"        {value!r}," for value in values)
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines).replace("'", '"') + "\n"


def _inputs(module: Any) -> list[Any]:
    return [
        method.input_type
        for service in CSI_SERVICES
        for method in module.DESCRIPTOR.services_by_name[service].methods
    ]


def _method_types(variable: str, what: str, module: Any, attribute: str) -> list[str]:
    types = {
        method.name: getattr(method, attribute).full_name
        for service in CSI_SERVICES
        for method in module.DESCRIPTOR.services_by_name[service].methods
    }
    lines = [
        "",
        f"# The {what} message of each method (a key of MESSAGES).",
        f"{variable}: dict[str, str] = {{",
    ]
    lines.extend(f"    {name!r}: {full_name!r}," for name, full_name in sorted(types.items()))
    lines.append("}")
    return lines


_SCALAR_TYPES = {3: "int64", 4: "uint64", 5: "int32", 13: "uint32", 8: "bool", 9: "string"}
_SCALAR_TYPES |= {1: "double", 2: "float", 12: "bytes", 6: "uint64", 7: "uint32"}
_SCALAR_TYPES |= {15: "int32", 16: "int64", 17: "int32", 18: "int64"}
"""FieldDescriptor.TYPE_* numbers of the scalar types, by their range (fixed and
zigzag encodings hold what the plain ones hold)."""
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14


def _message_schema(
    roots: list[Any],
) -> tuple[dict[str, list[tuple[str, tuple[str, str, str]]]], dict[str, tuple[str, ...]]]:
    """Every message reachable from `roots`, and every enum they use."""
    messages: dict[str, list[tuple[str, tuple[str, str, str]]]] = {}
    enums: dict[str, tuple[str, ...]] = {}
    pending = list(roots)
    while pending:
        message = pending.pop()
        if message.full_name in messages:
            continue
        fields = []
        for field in message.fields:
            label, target = "repeated" if field.is_repeated else "single", field
            if field.type == _TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
                key = field.message_type.fields_by_name["key"]
                if key.type != 9:
                    raise GenerationError(
                        f"{message.full_name}.{field.name}: a map not keyed by strings"
                    )
                label, target = "map", field.message_type.fields_by_name["value"]
            if target.type == _TYPE_MESSAGE:
                kind = target.message_type.full_name
                pending.append(target.message_type)
            elif target.type == _TYPE_ENUM:
                kind = target.enum_type.full_name
                values = sorted(target.enum_type.values, key=lambda value: value.number)
                enums[kind] = tuple(value.name for value in values)
            elif target.type in _SCALAR_TYPES:
                kind = _SCALAR_TYPES[target.type]
            else:
                raise GenerationError(f"{message.full_name}.{field.name}: type {target.type}")
            oneof = field.containing_oneof.name if field.containing_oneof is not None else ""
            fields.append((field.name, (label, kind, oneof)))
        messages[message.full_name] = fields
    return messages, enums


def stale_files(fresh_dir: Path, target_dir: Path) -> list[str]:
    """Names of generated files that are missing from or differ in ``target_dir``."""
    stale = []
    for name in GENERATED:
        target = target_dir / name
        if not target.is_file() or target.read_bytes() != (fresh_dir / name).read_bytes():
            stale.append(name)
    fresh = (fresh_dir / CATALOGUE_NAME).read_bytes()
    if not CATALOGUE.is_file() or CATALOGUE.read_bytes() != fresh:
        stale.append(CATALOGUE_NAME)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate csi_mock/proto/ from proto/*.proto.")
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the files in csi_mock/proto/ are out of date",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gen_proto_") as tmp:
        fresh_dir = Path(tmp)
        try:
            generate(fresh_dir)
        except GenerationError as exc:
            print(f"gen_proto: error: {exc}", file=sys.stderr)
            return 2

        stale = stale_files(fresh_dir, OUT_DIR)
        rel_out = OUT_DIR.relative_to(ROOT).as_posix()
        if args.check:
            if stale:
                print(
                    f"gen_proto: generated code in {rel_out}/ is stale or missing: "
                    f"{', '.join(stale)}\n"
                    f"  {REGENERATE_HINT} (with grpcio-tools "
                    f"{metadata.version('grpcio-tools')} installed here) and commit the result",
                    file=sys.stderr,
                )
                return 1
            print(f"gen_proto: {rel_out}/ is up to date")
            return 0

        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for name in stale:
            target = CATALOGUE if name == CATALOGUE_NAME else OUT_DIR / name
            shutil.copyfile(fresh_dir / name, target)
        print(f"gen_proto: updated {len(stale)} of {len(GENERATED)} files in {rel_out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
