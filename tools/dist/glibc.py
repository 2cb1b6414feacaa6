#!/usr/bin/env python3
"""Lists the glibc symbol versions a binary or shared library needs (objdump -T) and the shared
libraries it names (readelf -d), and fails when it needs a glibc newer than --max.

usage: glibc.py [--max 2.17] FILE...

A binary linked against glibc 2.17 runs on every x86-64 Linux with glibc >= 2.17 (CentOS 7,
Ubuntu 14.04 and everything newer): the dynamic linker refuses to load it only when one of the
GLIBC_x.y versions below is missing.
"""

import argparse
import re
import subprocess
import sys

VERSION = re.compile(r"\bGLIBC_(\d+(?:\.\d+)+)\b")
NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")


def key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def glibc_versions(path: str) -> list[str]:
    dump = subprocess.run(["objdump", "-T", path], check=True, capture_output=True, text=True)
    return sorted(set(VERSION.findall(dump.stdout)), key=key)


def needed(path: str) -> list[str]:
    dynamic = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True)
    return NEEDED.findall(dynamic.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max", default="2.17", help="the newest glibc allowed (default 2.17)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failed = False
    for path in args.files:
        versions = glibc_versions(path)
        newest = versions[-1] if versions else "none"
        print(f"{path}: glibc symbol versions {' '.join(versions) or '(none)'}; newest {newest}; "
              f"needs {', '.join(needed(path)) or 'no shared library'}")
        if versions and key(newest) > key(args.max):
            print(f"{path}: needs glibc {newest}, newer than {args.max}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
