#!/usr/bin/env python3
"""Builds libagentbreaker (cdylib + staticlib) and collects what the C build needs from cargo's
JSON messages (mk/c.mk runs it):

- the header cbindgen generated in the build script's OUT_DIR, copied to OUT/agentbreaker.h;
- the native libraries a static link needs (rustc's `--print native-static-libs`), written to
  OUT/native-static-libs;
- the package version, written to OUT/version.

usage: build_lib.py PROFILE OUT [CARGO_ARG...]   (PROFILE: a cargo profile, e.g. release or dev)

CARGO_ARGs go to cargo before rustc's arguments (make dist: `--target x86_64-unknown-linux-gnu.2.17`
with CARGO=cargo-zigbuild, linked against glibc 2.17).

Cargo replays the cached rustc output on a fresh build, so the native libraries are reported
even when nothing is recompiled.
"""

import json
import os
import shutil
import subprocess
import sys

PACKAGE = "agentbreaker-c"


def main() -> int:
    profile, out, cargo_args = sys.argv[1], sys.argv[2], sys.argv[3:]
    cargo = os.environ.get("CARGO", "cargo")
    command = [cargo, "rustc", "-p", PACKAGE, "--lib", "--profile", profile,
               "--message-format=json", *cargo_args, "--", "--print", "native-static-libs"]

    header_dir = native_libs = version = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as cargo_run:
        assert cargo_run.stdout is not None
        for line in cargo_run.stdout:
            message = json.loads(line)
            reason = message.get("reason")
            package = message.get("package_id", "")
            ours = f"#{PACKAGE}@" in package or f"/{PACKAGE}#" in package
            if reason == "compiler-message":
                text = message["message"]["rendered"] or ""
                if "native-static-libs:" in text:
                    native_libs = text.split("native-static-libs:", 1)[1].strip()
                elif "link against the following native artifacts" not in text:
                    sys.stderr.write(text)
            elif reason == "build-script-executed" and ours:
                header_dir = message["out_dir"]
                version = package.rsplit("@", 1)[-1] if "@" in package else None
    if cargo_run.returncode != 0:
        return cargo_run.returncode
    if header_dir is None or native_libs is None:
        print("cargo did not report the header or the native libraries", file=sys.stderr)
        return 1

    os.makedirs(out, exist_ok=True)
    shutil.copyfile(os.path.join(header_dir, "agentbreaker.h"), os.path.join(out, "agentbreaker.h"))
    with open(os.path.join(out, "native-static-libs"), "w", encoding="utf-8") as f:
        f.write(native_libs + "\n")
    with open(os.path.join(out, "version"), "w", encoding="utf-8") as f:
        f.write((version or "0.0.0") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
