"""Every pin of constraints.txt in this environment: installed at that version, and each of its modules imported.

Usage: python docker/check_pins.py check CONSTRAINTS_FILE > result.json
       python docker/check_pins.py compare IMAGE.json REFERENCE.json

docker/test_image.sh runs `check` inside the image (the base release's Python) and in the Makefile's environment,
then `compare`: a pin installed at another version, or a module that imports in the reference and not in the
image, fails it (exit 1). torch and
torchvision are imported first, as the suite must (TensorFlow first, then torch, segfaults: NOTES.md).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import platform
import re
import sys
from pathlib import Path

FIRST = ("torch", "torchvision")


def read_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def modules_by_distribution() -> dict[str, list[str]]:
    """Importable top-level names of each installed distribution (private and dunder names left out)."""
    found: dict[str, list[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        if not module.isidentifier() or module.startswith("_"):
            continue
        for distribution in distributions:
            found.setdefault(canonical(distribution), []).append(module)
    return {name: sorted(set(modules)) for name, modules in found.items()}


def try_import(module: str) -> str:
    """'ok', or the error as one line."""
    try:
        importlib.import_module(module)
    except BaseException as error:  # noqa: BLE001 - any failure of a third-party import is the finding
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
    return "ok"


def check(constraints: Path) -> dict[str, object]:
    pins = read_pins(constraints)
    modules = modules_by_distribution()
    imports = {module: try_import(module) for module in FIRST}
    report: dict[str, dict[str, object]] = {}
    for name in sorted(pins):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report[name] = {"pinned": pins[name], "installed": None, "imports": {}}
            continue
        for module in modules.get(name, []):
            if module not in imports:
                imports[module] = try_import(module)
        report[name] = {"pinned": pins[name], "installed": version,
                        "imports": {module: imports[module] for module in modules.get(name, [])}}
    return {"python": platform.python_version(), "distributions": report}


def load(path: Path) -> dict:
    """The JSON line `check` printed last (imported libraries may have printed before it)."""
    return json.loads(path.read_text().strip().splitlines()[-1])


def compare(image: dict, reference: dict) -> tuple[list[str], list[str]]:
    """(problems, remarks) of the image against the reference environment."""
    problems, remarks = [], []
    ref = reference["distributions"]
    for name, entry in image["distributions"].items():
        if entry["installed"] is None:
            remarks.append(f"{name}=={entry['pinned']}: not installed (no requirement asks for it under "
                           f"Python {image['python']})")
            continue
        if entry["installed"] != entry["pinned"]:
            problems.append(f"{name}: pinned {entry['pinned']}, installed {entry['installed']}")
        for module, outcome in entry["imports"].items():
            before = ref.get(name, {}).get("imports", {}).get(module, "not checked")
            if outcome != "ok" and before == "ok":
                problems.append(f"{name}: import {module} fails ({outcome}), "
                                f"imports under Python {reference['python']}")
            elif outcome != "ok":
                remarks.append(f"{name}: import {module} fails here and under Python {reference['python']} too "
                               f"({outcome})")
    return problems, remarks


def summary(image: dict, problems: list[str], remarks: list[str]) -> str:
    entries = image["distributions"].values()
    installed = [e for e in entries if e["installed"] is not None]
    modules = sum(len(e["imports"]) for e in installed)
    imported = sum(outcome == "ok" for e in installed for outcome in e["imports"].values())
    lines = [f"Python {image['python']}: {len(installed)} of {len(entries)} pins installed at their version "
             f"({len(problems)} problems); {imported} of {modules} modules imported"]
    lines += [f"  PROBLEM {line}" for line in problems] + [f"  note: {line}" for line in remarks]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "check" and Path(argv[2]).is_file():
        result = check(Path(argv[2]))
        sys.stdout.flush()
        print("\n" + json.dumps(result, sort_keys=True))
        return 0
    if len(argv) == 4 and argv[1] == "compare" and all(Path(p).is_file() for p in argv[2:]):
        image, reference = load(Path(argv[2])), load(Path(argv[3]))
        problems, remarks = compare(image, reference)
        print(summary(image, problems, remarks))
        return 1 if problems else 0
    print("usage: python docker/check_pins.py check CONSTRAINTS_FILE | compare IMAGE.json REFERENCE.json",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
