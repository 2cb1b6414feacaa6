#!/usr/bin/env python3
"""Packs the npm packages of a release as the registry will serve them (make dist-node).

- `agentbreaker-<version>.tgz`: the package in node/ as `npm pack` makes it, with the files its
  `files` field lists, except the addon and the build step: no `*.node`, no `scripts/install.js`,
  no `scripts` at all (so no install script, nothing that needs the napi CLI or Rust), and one
  `optionalDependencies` entry per napi target (`agentbreaker-linux-x64-gnu`, ...), the layout
  napi-rs's `napi pre-publish` gives: npm installs only the one whose `os`/`cpu`/`libc` fit, and
  the generated index.js loads it.
- `agentbreaker-<platform>-<version>.tgz` for each addon given: node/npm/<platform>/ (written by
  `napi create-npm-dirs`) with the addon as `agentbreaker.<platform>.node`.

usage: node_packages.py --out DIR [--addon PLATFORM=FILE ...] [--node-dir node]

Every version must be the workspace version of Cargo.toml (tools/dist/versions.py checks the
committed files; this refuses to pack anything else).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from versions import ROOT, napi_platforms, workspace_version  # noqa: E402

# Lifecycle scripts npm runs when a package is installed: the published package has none.
INSTALL_SCRIPTS = ("preinstall", "install", "postinstall", "prepare")


def npm_pack(directory: Path, out: Path) -> Path:
    """`npm pack` of directory into out; returns the tarball."""
    result = subprocess.run(
        ["npm", "pack", "--json", "--ignore-scripts", "--pack-destination", str(out)],
        cwd=directory, check=True, capture_output=True, text=True)
    return out / json.loads(result.stdout)[0]["filename"]


def packed_files(node_dir: Path) -> list[str]:
    """The files `npm pack` takes from node_dir (its `files` field, package.json, README...)."""
    result = subprocess.run(["npm", "pack", "--dry-run", "--json", "--ignore-scripts"],
                            cwd=node_dir, check=True, capture_output=True, text=True)
    return [entry["path"] for entry in json.loads(result.stdout)[0]["files"]]


def main_package(node_dir: Path, stage: Path, out: Path, version: str) -> Path:
    manifest = json.loads((node_dir / "package.json").read_text(encoding="utf-8"))
    name = manifest["name"]
    for path in packed_files(node_dir):
        if path.endswith(".node") or path == "scripts/install.js" or path == "package.json":
            continue
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(node_dir / path, stage / path)
    if not any(stage.glob("README*")):
        shutil.copy2(ROOT / "README.md", stage / "README.md")
    manifest.pop("scripts", None)
    manifest["files"] = [pattern for pattern in manifest.get("files", [])
                         if pattern not in ("*.node", "scripts/install.js")]
    optional = dict(manifest.get("optionalDependencies", {}))
    for platform in napi_platforms(manifest):
        optional[f"{name}-{platform}"] = version
    manifest["optionalDependencies"] = optional
    (stage / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tarball = npm_pack(stage, out)
    check_main(tarball, manifest)
    return tarball


def check_main(tarball: Path, manifest: dict) -> None:
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        packed = json.load(tar.extractfile("package/package.json"))
    problems = [f"{name} is an addon" for name in names if name.endswith(".node")]
    problems += [f"script {script}" for script in INSTALL_SCRIPTS
                 if script in packed.get("scripts", {})]
    if packed.get("optionalDependencies") != manifest["optionalDependencies"]:
        problems.append("optionalDependencies differ from the napi targets")
    main = packed.get("main", "index.js")
    if f"package/{main}" not in names:
        problems.append(f"main {main} is not in the tarball")
    for target in export_targets(packed.get("exports")):
        if "*" not in target and f"package/{target.removeprefix('./')}" not in names:
            problems.append(f"exports names {target}, which is not in the tarball")
    if problems:
        sys.exit(f"{tarball.name}: " + "; ".join(problems))


def export_targets(exports: object) -> list[str]:
    """The file paths of a package.json `exports` field (strings at any depth)."""
    if isinstance(exports, str):
        return [exports]
    if isinstance(exports, dict):
        return [path for value in exports.values() for path in export_targets(value)]
    if isinstance(exports, list):
        return [path for value in exports for path in export_targets(value)]
    return []


def platform_package(node_dir: Path, platform: str, addon: Path, stage: Path, out: Path,
                     version: str) -> Path:
    source = node_dir / "npm" / platform
    if not (source / "package.json").is_file():
        sys.exit(f"{source}/package.json is missing: run `napi create-npm-dirs` in node/")
    manifest = json.loads((source / "package.json").read_text(encoding="utf-8"))
    if manifest["version"] != version:
        sys.exit(f"{source}/package.json has version {manifest['version']}, not {version}")
    stage.mkdir(parents=True)
    for file in source.iterdir():
        shutil.copy2(file, stage / file.name)
    shutil.copy2(addon, stage / manifest["main"])
    tarball = npm_pack(stage, out)
    with tarfile.open(tarball) as tar:
        if f"package/{manifest['main']}" not in tar.getnames():
            sys.exit(f"{tarball.name}: the addon {manifest['main']} is not in it")
    return tarball


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--node-dir", default=ROOT / "node", type=Path)
    parser.add_argument("--addon", action="append", default=[], metavar="PLATFORM=FILE")
    args = parser.parse_args()

    version = workspace_version()
    node_dir = args.node_dir.resolve()
    manifest = json.loads((node_dir / "package.json").read_text(encoding="utf-8"))
    if manifest["version"] != version:
        sys.exit(f"node/package.json has version {manifest['version']}, the workspace {version}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentbreaker-npm-") as temp:
        stage = Path(temp)
        (stage / "main").mkdir()
        print(main_package(node_dir, stage / "main", out, version).name)
        for pair in args.addon:
            platform, _, addon = pair.partition("=")
            if platform not in napi_platforms(manifest):
                sys.exit(f"{platform} is not one of the napi targets of node/package.json")
            tarball = platform_package(node_dir, platform, Path(addon), stage / platform, out,
                                       version)
            print(tarball.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
