"""Writes a wheel that installs prebuilt programs as commands (`pip install`, `pipx install`, `uvx`).

    python3 packaging/python/bin_wheel.py --name pacerelle-mcp --version 0.1.0 --summary TEXT \
        --out DIR PROGRAM...

Each PROGRAM goes into `<name>-<version>.data/scripts/`, which pip installs into the environment's `bin/`,
executable. The platform tag is read from the programs themselves: on Linux the newest glibc symbol
version they need (`objdump -T`) gives `manylinux_2_<minor>_<arch>`, the rule auditwheel applies to the
symbols; no other system is handled here. Standard library only. Prints the wheel's path.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import platform
import re
import subprocess
import sys
import zipfile
from pathlib import Path

# The machine names of `uname -m` as wheel tags spell them.
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def glibc_needed(program: Path) -> tuple[int, int]:
    """The newest GLIBC_x.y version among the dynamic symbols `program` needs."""
    out = subprocess.run(["objdump", "-T", str(program)], check=True, capture_output=True, text=True).stdout
    versions = {(int(a), int(b)) for a, b in re.findall(r"GLIBC_(\d+)\.(\d+)", out)}
    if not versions:
        raise SystemExit(f"{program}: no glibc symbol version found (a static or non-glibc program?)")
    return max(versions)


def platform_tag(programs: list[Path]) -> str:
    if sys.platform != "linux":
        raise SystemExit(f"bin_wheel.py tags Linux programs only, not {sys.platform}")
    arch = ARCHES.get(platform.machine())
    if arch is None:
        raise SystemExit(f"no wheel tag for the machine {platform.machine()}")
    major, minor = max(glibc_needed(p) for p in programs)
    if major != 2:
        raise SystemExit(f"glibc {major}.{minor}?")
    return f"manylinux_2_{max(minor, 17)}_{arch}"


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("programs", nargs="+", type=Path)
    args = parser.parse_args()

    tag = f"py3-none-{platform_tag(args.programs)}"
    dist = args.name.replace("-", "_")
    info = f"{dist}-{args.version}.dist-info"
    scripts = f"{dist}-{args.version}.data/scripts"
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {args.name}\n"
        f"Version: {args.version}\n"
        f"Summary: {args.summary}\n"
        "Home-page: https://github.com/pacerelle/pacerelle\n"
        "License: Apache-2.0\n"
        "Classifier: Programming Language :: Rust\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Description-Content-Type: text/markdown\n\n"
        f"{args.summary}\n\n"
        f"Installs the command{'s' if len(args.programs) > 1 else ''} "
        f"{', '.join('`' + p.name + '`' for p in args.programs)}, the same binaries as the release archive.\n"
    ).encode()
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: pacerelle packaging/python/bin_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n"
    ).encode()

    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{dist}-{args.version}-{tag}.whl"
    records = []
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as whl:

        def add(name: str, data: bytes, mode: int) -> None:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o100000 | mode) << 16
            whl.writestr(entry, data)
            records.append(record_line(name, data))

        for program in args.programs:
            add(f"{scripts}/{program.name}", program.read_bytes(), 0o755)
        add(f"{info}/METADATA", metadata, 0o644)
        add(f"{info}/WHEEL", wheel, 0o644)
        record = "\n".join([*records, f"{info}/RECORD,,", ""]).encode()
        entry = zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        entry.external_attr = 0o100644 << 16
        whl.writestr(entry, record)
    print(target)


if __name__ == "__main__":
    main()
