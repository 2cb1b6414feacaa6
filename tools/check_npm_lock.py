#!/usr/bin/env python3
"""Checks that an npm lock file installs from an empty cache.

`npm ci` with a warm cache fills in what a lock file lacks; with an empty cache (a fresh machine,
CI) an entry without a `version` fails with `Invalid Version`, and one with neither `resolved` nor
`integrity` cannot be fetched and verified. Every package entry of `packages` (lockfileVersion 2
and 3) must therefore carry a `version` and at least one of `resolved` / `integrity`; links (a
workspace member, `"link": true`) and the root entry (`""`) are exempt.

Usage: check_npm_lock.py LOCKFILE [LOCKFILE ...]   (exit 1 and one line per bad entry)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def problems(lock: dict) -> list[str]:
    """One message per entry that an empty cache could not install."""
    if not isinstance(lock, dict):
        return ["the lock file is not a JSON object"]
    version = lock.get("lockfileVersion")
    if version not in (2, 3):
        return [f"lockfileVersion {version!r}: only 2 and 3 (npm 7 and later) are supported"]
    packages = lock.get("packages")
    if not isinstance(packages, dict):
        return ["no `packages` map"]
    found = []
    for path, entry in packages.items():
        if path == "":
            continue
        if not isinstance(entry, dict):
            found.append(f"{path}: not an object")
            continue
        if entry.get("link") is True:
            continue
        if not isinstance(entry.get("version"), str) or not entry["version"]:
            found.append(f"{path}: no version")
        if not entry.get("resolved") and not entry.get("integrity"):
            found.append(f"{path}: neither resolved nor integrity")
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    failed = False
    for name in argv:
        try:
            lock = json.loads(Path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            print(f"{name}: cannot read: {error}", file=sys.stderr)
            failed = True
            continue
        found = problems(lock)
        for line in found:
            print(f"{name}: {line}", file=sys.stderr)
        if found:
            print(
                f"{name}: {len(found)} entries would fail `npm ci` from an empty cache; regenerate with"
                " `rm package-lock.json && npm install --package-lock-only --ignore-scripts"
                ' --cache "$(mktemp -d)"`',
                file=sys.stderr,
            )
            failed = True
        else:
            print(f"{name}: {len(lock['packages']) - 1} entries, each with a version and a source")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
