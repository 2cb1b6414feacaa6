#!/usr/bin/env python3
"""One version for every artifact: the workspace version of Cargo.toml.

The Rust crates (core, CLI, C library, Python, Node and Lua bindings) inherit it
(`version.workspace = true`); maturin gives it to the wheel and the sdist, build_lib.py to the C
library's pkg-config files. What cannot inherit it is checked against it here: node/package.json
and its lock file, the platform packages in node/npm/, the version check napi writes into
node/index.js, the source rockspec's name, version and tag, the README's `VERSION=` download
commands, a version given to a path dependency on a workspace crate (the CLI's on the core, for
crates.io), Cargo.lock (`--write` updates the workspace crates in it, as cargo would).
CHANGELOG.md must have an [Unreleased] section or one for the version.

usage: versions.py                  check; prints the version (make dist runs it first)
       versions.py --release TAG    also: TAG is v<version> and CHANGELOG.md has the dated entry
                                    `## [<version>] - YYYY-MM-DD` (the release workflow runs it)
       versions.py --write          after changing the workspace version: write it into every
                                    file above (the rockspec is renamed, and the files naming it)
       versions.py --root DIR       another checkout (the tests use a copy)
"""

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# napi-rs's platform names (`platformArchABI`) of the targets a release builds; a package
# `agentbreaker-<platform>` holds `agentbreaker.<platform>.node`.
NAPI_PLATFORMS = {
    "x86_64-unknown-linux-gnu": "linux-x64-gnu",
    "aarch64-unknown-linux-gnu": "linux-arm64-gnu",
    "x86_64-apple-darwin": "darwin-x64",
    "aarch64-apple-darwin": "darwin-arm64",
    "x86_64-pc-windows-msvc": "win32-x64-msvc",
    "aarch64-pc-windows-msvc": "win32-arm64-msvc",
}

INDEX_JS_VERSIONS = re.compile(r"bindingPackageVersion !== '([^']*)'|expected ([^ ]+) but got")
# `name = { path = "...", version = "..." }` (or with `package = "..."`), on one line.
INLINE_DEPENDENCY = re.compile(r'^([\w-]+) = \{([^}\n]*)\}', re.M)
README_VERSION = re.compile(r"^VERSION=(\S+)", re.M)
ROCKSPEC_NAME = re.compile(r"^agentbreaker-(.+)-(\d+)\.rockspec$")


def workspace_version(root: Path = ROOT) -> str:
    with open(root / "Cargo.toml", "rb") as f:
        return str(tomllib.load(f)["workspace"]["package"]["version"])


def napi_platforms(manifest: dict) -> list[str]:
    """The platform names of node/package.json's `napi.targets`."""
    targets = manifest.get("napi", {}).get("targets", [])
    unknown = [target for target in targets if target not in NAPI_PLATFORMS]
    if unknown:
        raise SystemExit(f"node/package.json: napi targets without a platform name here: {unknown}"
                         " (add them to NAPI_PLATFORMS in tools/dist/versions.py)")
    return [NAPI_PLATFORMS[target] for target in targets]


def member_manifests(root: Path) -> list[Path]:
    with open(root / "Cargo.toml", "rb") as f:
        members = tomllib.load(f)["workspace"]["members"]
    found: list[Path] = []
    for pattern in members:
        found += sorted(path for path in root.glob(f"{pattern}/Cargo.toml"))
    return found


def source_rockspecs(root: Path) -> list[Path]:
    return sorted((root / "lua").glob("agentbreaker-*.rockspec"))


def check(root: Path, release: str | None) -> list[str]:
    version = workspace_version(root)
    problems: list[str] = []

    # The crates: each inherits the version; a path dependency on one of them that names a
    # version (needed to publish) names this one; the lock file agrees.
    names = set()
    for manifest_path in member_manifests(root):
        with open(manifest_path, "rb") as f:
            manifest = tomllib.load(f)
        names.add(manifest["package"]["name"])
        if manifest["package"].get("version") != {"workspace": True}:
            problems.append(f"{manifest_path.relative_to(root)}: version must be "
                            "`version.workspace = true`")
    for manifest_path in member_manifests(root):
        with open(manifest_path, "rb") as f:
            manifest = tomllib.load(f)
        for section in ("dependencies", "build-dependencies", "dev-dependencies"):
            for name, spec in manifest.get(section, {}).items():
                if isinstance(spec, dict) and "path" in spec and "version" in spec:
                    wanted = spec["version"].lstrip("=^~ ")
                    if wanted != version:
                        problems.append(f"{manifest_path.relative_to(root)}: {section}.{name} "
                                        f"has version {spec['version']}, not {version}")
    with open(root / "Cargo.lock", "rb") as f:
        lock = tomllib.load(f)
    for package in lock.get("package", []):
        if package["name"] in names and "source" not in package and package["version"] != version:
            problems.append(f"Cargo.lock: {package['name']} {package['version']}, not {version} "
                            "(run cargo build)")

    # Python: maturin takes the version of bindings/python/Cargo.toml.
    with open(root / "python" / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    if "version" in project or "version" not in project.get("dynamic", []):
        problems.append("python/pyproject.toml: the version must be dynamic (maturin reads Cargo)")

    # Node: package.json, its lock file, the platform packages, the loader napi generated.
    node = root / "node"
    manifest = json.loads((node / "package.json").read_text(encoding="utf-8"))
    if manifest["version"] != version:
        problems.append(f"node/package.json: version {manifest['version']}, not {version}")
    lock_json = json.loads((node / "package-lock.json").read_text(encoding="utf-8"))
    for where, value in (("version", lock_json.get("version")),
                         ('packages[""].version', lock_json["packages"][""].get("version"))):
        if value != version:
            problems.append(f"node/package-lock.json: {where} {value}, not {version}")
    platforms = napi_platforms(manifest)
    if not platforms:
        problems.append("node/package.json: napi.targets lists no target")
    npm_dirs = sorted(path.name for path in (node / "npm").glob("*") if path.is_dir())
    if npm_dirs != sorted(platforms):
        problems.append(f"node/npm/ has {npm_dirs}, the napi targets are {sorted(platforms)} "
                        "(run `npx napi create-npm-dirs` in node/)")
    for platform in npm_dirs:
        package = json.loads((node / "npm" / platform / "package.json").read_text(encoding="utf-8"))
        if package.get("version") != version:
            problems.append(f"node/npm/{platform}/package.json: version {package.get('version')}")
        if package.get("name") != f"{manifest['name']}-{platform}":
            problems.append(f"node/npm/{platform}/package.json: name {package.get('name')}")
    found = {a or b for a, b in INDEX_JS_VERSIONS.findall((node / "index.js").read_text("utf-8"))}
    if found != {version}:
        problems.append(f"node/index.js checks the addon's version against {sorted(found)}, not "
                        f"{version} (run `make node`: napi build regenerates it)")

    # Lua: one source rockspec, named, versioned and tagged after the version.
    rockspecs = source_rockspecs(root)
    wanted = f"agentbreaker-{version}-1.rockspec"
    if [path.name for path in rockspecs] != [wanted]:
        problems.append(f"lua/: rockspecs {[p.name for p in rockspecs]}, wanted [{wanted!r}]")
    for path in rockspecs:
        text = path.read_text(encoding="utf-8")
        match = ROCKSPEC_NAME.match(path.name)
        assert match
        if f'version = "{match[1]}-{match[2]}"' not in text:
            problems.append(f"lua/{path.name}: its version field is not {match[1]}-{match[2]}")
        if f'tag = "v{version}"' not in text:
            problems.append(f"lua/{path.name}: source.tag is not v{version}")

    # The README's download commands (`VERSION=x.y.z` before a release URL).
    readme = (root / "README.md").read_text(encoding="utf-8")
    for stated in sorted(set(README_VERSION.findall(readme))):
        if stated != version:
            problems.append(f"README.md: VERSION={stated}, not {version}")

    # The changelog.
    changelog = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    dated = re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M)
    if release is not None:
        if release != f"v{version}":
            problems.append(f"the tag {release} is not v{version}")
        if not dated:
            problems.append(f"CHANGELOG.md has no entry `## [{version}] - YYYY-MM-DD`")
    elif not dated and not re.search(r"^## \[Unreleased\]$", changelog, re.M):
        problems.append(f"CHANGELOG.md has neither [Unreleased] nor [{version}]")
    return problems


def write(root: Path) -> list[str]:
    """Writes the workspace version into the files that cannot inherit it; returns them."""
    version = workspace_version(root)
    changed: list[str] = []

    def save(path: Path, text: str) -> None:
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(str(path.relative_to(root)))

    names = set()
    for manifest_path in member_manifests(root):
        with open(manifest_path, "rb") as f:
            names.add(tomllib.load(f)["package"]["name"])

    def with_version(match: re.Match[str]) -> str:
        package = re.search(r'\bpackage = "([^"]*)"', match[2])
        name = package[1] if package else match[1]
        if name not in names or "path = " not in match[2]:
            return match[0]
        return re.sub(r'\bversion = "([=^~]?)[^"]*"', rf'version = "\g<1>{version}"', match[0])

    # A path dependency on a workspace crate that names a version (to be published).
    for manifest_path in member_manifests(root):
        save(manifest_path, INLINE_DEPENDENCY.sub(
            with_version, manifest_path.read_text(encoding="utf-8")))
    # Cargo.lock: the workspace crates (cargo would write the same at its next build).
    lock_path = root / "Cargo.lock"
    save(lock_path, re.sub(
        r'(\[\[package\]\]\nname = "([^"]+)"\nversion = ")[^"]*("\n(?!source))',
        lambda m: f"{m[1]}{version}{m[3]}" if m[2] in names else m[0],
        lock_path.read_text(encoding="utf-8")))

    node = root / "node"
    for path in [node / "package.json", *sorted((node / "npm").glob("*/package.json"))]:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["version"] = version
        save(path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    lock_path = node / "package-lock.json"
    lock_json = json.loads(lock_path.read_text(encoding="utf-8"))
    lock_json["version"] = version
    lock_json["packages"][""]["version"] = version
    save(lock_path, json.dumps(lock_json, indent=2, ensure_ascii=False) + "\n")
    index = node / "index.js"
    save(index, INDEX_JS_VERSIONS.sub(
        lambda m: (f"bindingPackageVersion !== '{version}'" if m[1] is not None
                   else f"expected {version} but got"), index.read_text(encoding="utf-8")))

    readme = root / "README.md"
    save(readme, README_VERSION.sub(f"VERSION={version}", readme.read_text(encoding="utf-8")))

    for path in source_rockspecs(root):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r'^version = "[^"]*"', f'version = "{version}-1"', text, flags=re.M)
        text = re.sub(r'tag = "v[^"]*"', f'tag = "v{version}"', text)
        new_path = path.with_name(f"agentbreaker-{version}-1.rockspec")
        if new_path != path:
            path.rename(new_path)
            changed.append(f"{path.relative_to(root)} -> {new_path.relative_to(root)}")
            old_name, new_name = path.name, new_path.name
            for mentioning in [root / "README.md", root / "lua" / "README.md",
                               *sorted((root / "mk").glob("*.mk")),
                               *sorted((root / "docs").glob("*.md"))]:
                if mentioning.is_file():
                    save(mentioning, mentioning.read_text(encoding="utf-8")
                         .replace(old_name, new_name))
        save(new_path, text)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--release", metavar="TAG")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    root = args.root.resolve()
    if args.write:
        for name in write(root):
            print(f"wrote {name}")
    problems = check(root, args.release)
    for problem in problems:
        print(f"version mismatch: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(workspace_version(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
