"""docker/: the Dockerfile's layout, the Apptainer definition and the helper scripts its build runs, without an engine.

The image itself is built and run for real by the opt-in `make image-test` (docker/test_image.sh); these tests hold
what can be held without one: the helper scripts run against stand-in apt/dpkg, the requirements stage's code run on
real pyproject files, the Apptainer definition's %test line run in this environment.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
DEFINITION = DOCKER / "trainbench.def"
BASH = shutil.which("bash") or "/bin/bash"


def instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [line.strip() for line in joined.splitlines() if line.strip()]


def stages(text: str) -> dict[str, list[str]]:
    """Instructions per build stage, by stage name (the unnamed last stage is 'final')."""
    found: dict[str, list[str]] = {}
    current = "preamble"
    for line in instructions(text):
        if line.startswith("FROM "):
            named = re.search(r" AS (\w+)$", line)
            current = named.group(1) if named else "final"
        found.setdefault(current, []).append(line)
    return found


DOCKER_TEXT = DOCKERFILE.read_text()
STAGES = stages(DOCKER_TEXT)


def env_value(name: str) -> str:
    match = re.search(rf"\b{name}=(\S+)", " ".join(line for line in STAGES["system"] if line.startswith("ENV ")))
    assert match, f"docker/Dockerfile sets no {name}"
    return match.group(1)


# ---------------------------------------------------------------- base, Python, layers


def test_base_image_is_the_cuda_devel_image_unless_replaced() -> None:
    assert "ARG BASE_IMAGE=nvidia/cuda:${CUDA_VERSION}-cudnn-devel-ubuntu${UBUNTU_VERSION}" in STAGES["preamble"]
    assert STAGES["system"][0] == "FROM ${BASE_IMAGE} AS system"
    assert STAGES["requirements"][0] == "FROM system AS requirements" and STAGES["final"][0] == "FROM system"


def test_no_step_needs_a_keyserver_or_a_ppa_python_is_the_releases_own() -> None:
    lowered = " ".join(instructions(DOCKER_TEXT)).lower()
    for word in ("keyserver", "ppa", "deadsnakes", "add-apt-repository", "gpg ", "curl"):
        assert word not in lowered, word
    apt = next(line for line in STAGES["system"] if "apt-get install" in line)
    version = re.search(r'"python(3\.\d+)=\1\.\*"', apt)
    assert version, "the system stage installs pythonX.Y=X.Y.* from the base release"
    python = f"python{version.group(1)}"
    assert f'"{python}-venv={version.group(1)}.*"' in apt and f'"{python}-dev={version.group(1)}.*"' in apt
    # Every later use names that same Python: the venv, the requirements stage, the CUDA 12 folder, XLA's path.
    assert f"{python} -m venv /opt/venv" in DOCKER_TEXT
    assert re.findall(r"/opt/venv/lib/(python3\.\d+)", DOCKER_TEXT) and \
        set(re.findall(r"/opt/venv/lib/(python3\.\d+)", DOCKER_TEXT)) == {python}
    assert set(re.findall(r"\b(python3\.\d+) -c", DOCKER_TEXT)) == {python}


def test_big_layers_depend_on_the_pins_and_requirements_only() -> None:
    final = STAGES["final"]
    suite_copy = final.index(next(line for line in final if line.startswith("COPY --chown=") and " . /app" in line))
    before = final[:suite_copy]
    copies = [line for line in before if line.startswith("COPY ")]
    assert copies == ["COPY docker/with_build_ca.sh /usr/local/bin/with-build-ca", "COPY constraints.txt ./",
                      "COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt",
                      "COPY constraints-extrap.txt ./"]
    downloads = [line for line in before if line.startswith("RUN ") and "pip install" in line]
    assert len(downloads) == 5, "venv tools, torch, the requirements, TensorFlow's CUDA 12 wheels, Extra-P"
    for line in downloads:
        assert line.startswith("RUN --mount=type=secret,id=ca_bundle "), line
        assert re.search(r"with-build-ca (/opt/extrap/bin/)?pip install --no-cache-dir (-c constraints\.txt|--no-deps)",
                         line), line
    # pyproject.toml reaches only the requirements stage; the suite's install downloads nothing.
    assert [line for line in instructions(DOCKER_TEXT) if "pyproject.toml" in line and line.startswith("COPY")] == \
        ["COPY pyproject.toml /tmp/pyproject.toml"]
    assert "COPY pyproject.toml /tmp/pyproject.toml" in STAGES["requirements"]
    install = final[suite_copy + 1]
    assert 'pip install --no-cache-dir --no-build-isolation -c constraints.txt ".[tf,torch,dev]"' in install
    assert "pip check" in install


def requirements_code() -> str:
    line = next(line for line in STAGES["requirements"] if line.startswith("RUN "))
    match = re.search(r"-c '(.*)'\s+> /tmp/requirements\.txt$", line)
    assert match, line
    return match.group(1)


def requirements_of(pyproject: Path) -> str:
    code = requirements_code().replace("/tmp/pyproject.toml", str(pyproject))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_requirements_stage_lists_every_requirement_and_ignores_other_edits(tmp_path: Path) -> None:
    listed = requirements_of(REPO / "pyproject.toml").split()
    makefile_extras = re.search(r'-c constraints\.txt -e "\.\[([\w,]+)\]"', (REPO / "Makefile").read_text())
    assert makefile_extras
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    expected = list(project["dependencies"])
    for extra in makefile_extras.group(1).split(","):
        expected += project["optional-dependencies"][extra]
    assert sorted(listed) == sorted(requirement.replace(" ", "") for requirement in expected)
    # A ruff setting changed: the same requirements.txt, so the layers that install it stay cached.
    edited = tmp_path / "pyproject.toml"
    edited.write_text((REPO / "pyproject.toml").read_text().replace("line-length = 120", "line-length = 100"))
    assert requirements_of(edited) == requirements_of(REPO / "pyproject.toml")
    edited.write_text((REPO / "pyproject.toml").read_text().replace('"scipy>=1.11",', '"scipy>=1.11", "rich",'))
    assert "rich" in requirements_of(edited).split()


def test_tf_cuda_wheels_are_tensorflows_and_cuda_extra_less_nccl() -> None:
    try:
        requires = importlib.metadata.requires("tensorflow") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("tensorflow is not installed")
    from packaging.requirements import Requirement

    extra = {}
    for line in requires:
        req = Requirement(line)
        if req.marker and req.marker.evaluate({"extra": "and-cuda"}) and not req.marker.evaluate({"extra": ""}):
            extra[req.name] = req.specifier
    pins = dict(re.findall(r"^\s+(nvidia-[\w-]+-cu12)==(\S+)", DOCKER_TEXT, re.M))
    # TensorFlow 2.20 links NCCL statically: its wheel would be installed and never loaded.
    assert set(pins) == set(extra) - {"nvidia-nccl-cu12"}
    for name, version in pins.items():
        assert extra[name].contains(version), (name, version, str(extra[name]))
    pinned = {line.split("==")[0].lower() for line in (REPO / "constraints.txt").read_text().splitlines()}
    assert not set(pins) & pinned
    # XLA is pointed at the ptxas and libdevice of those wheels, in the folder they are installed into.
    target = re.search(r"--no-deps --target (\S+)", DOCKER_TEXT)
    assert target and env_value("XLA_FLAGS") == f"--xla_gpu_cuda_data_dir={target.group(1)}/nvidia/cuda_nvcc"
    assert "nvidia-cuda-nvcc-cu12" in pins


def test_any_uid_can_write_app_and_home() -> None:
    assert env_value("HOME") == "/home/trainbench" and env_value("USER") == "trainbench"
    root_runs = [line for line in STAGES["final"] if line.startswith("RUN ")]
    assert "chmod 1777 /home/trainbench" in root_runs[-2]
    assert "chmod 1777 /app" in root_runs[-1]
    # what the build's root processes left in HOME (a root-owned ~/.config) is removed: any uid makes its own
    assert root_runs[-1].endswith("find /home/trainbench -mindepth 1 -maxdepth 1 -user root -exec rm -rf {} +")
    assert re.findall(r"^USER (\S+)$", DOCKER_TEXT, re.M) == ["${USER_UID}:${USER_GID}"]
    assert STAGES["final"][-2:] == ["USER ${USER_UID}:${USER_GID}", 'CMD ["bash"]']


def test_nsight_links_come_before_the_base_images_cuda_bin() -> None:
    path = env_value("PATH").split(":")
    assert path[:3] == ["/opt/venv/bin", "/opt/trainbench/bin", "${PATH}"]
    assert any("install_nsight.sh" in line and '"${NSIGHT_PACKAGES}" /opt/trainbench/bin' in line
               for line in STAGES["system"])


# ---------------------------------------------------------------- docker/install_nsight.sh against stand-in apt/dpkg


def fake_system(tmp_path: Path, packages: dict[str, list[str]], depends: dict[str, str] | None = None) -> dict:
    """A root with the packages' files (executables print their path) and apt-get/dpkg/dpkg-query stand-ins."""
    root = tmp_path / "root"
    lists = tmp_path / "lists"
    lists.mkdir()
    for name, files in packages.items():
        for relative in files:
            path = root / relative.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"#!/bin/sh\necho {path} \"$@\"\n")
            path.chmod(0o755)
        (lists / name).write_text("".join(f"{root / f.lstrip('/')}\n" for f in files))
        (lists / f"{name}.depends").write_text((depends or {}).get(name, ""))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    scripts = {
        "apt-get": f'echo "$@" >> {log}\n',
        "dpkg": f'shift; for p in "$@"; do cat "{lists}/$p"; done\n',
        "dpkg-query": f'cat "{lists}/${{3}}.depends"\n',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return {"root": root, "bin": bin_dir, "log": log, "links": tmp_path / "links"}


def install_nsight(system: dict, cuda: str, requested: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{system['bin']}:{os.environ['PATH']}"}
    return subprocess.run([BASH, str(DOCKER / "install_nsight.sh"), cuda, requested, str(system["links"])],
                          env=env, capture_output=True, text=True, timeout=60)


TOOLKIT = {
    "cuda-nsight-compute-13-0": ["/usr/local/cuda-13.0/nsight-compute-2025.3.1/ncu",
                                 "/usr/local/cuda-13.0/nsight-compute-2025.3.1/host/target-linux-x64/nsys"],
    "cuda-nsight-systems-13-0": [],
    "nsight-systems-2025.3.2": ["/opt/nvidia/nsight-systems/2025.3.2/bin/nsys"],
}


def test_nsight_defaults_to_the_toolkits_releases_and_never_nsight_computes_nsys(tmp_path: Path) -> None:
    system = fake_system(tmp_path, TOOLKIT, {"cuda-nsight-systems-13-0": "nsight-systems-2025.3.2 (>= 2025.3.2)"})
    result = install_nsight(system, "13.0.3", "")
    assert result.returncode == 0, result.stderr
    assert system["log"].read_text().split() == [
        "install", "-y", "--no-install-recommends", "cuda-nsight-compute-13-0=13.0.3-1",
        "cuda-nsight-systems-13-0=13.0.3-1"]
    root = system["root"]
    assert os.readlink(system["links"] / "ncu") == str(root / "usr/local/cuda-13.0/nsight-compute-2025.3.1/ncu")
    # cuda-nsight-systems is a thin package: nsys comes from the nsight-systems release it depends on.
    assert os.readlink(system["links"] / "nsys") == str(root / "opt/nvidia/nsight-systems/2025.3.2/bin/nsys")
    assert "nsight-systems/2025.3.2/bin/nsys --version" in result.stdout


def test_nsight_packages_asked_for_win_over_the_base_images_ncu(tmp_path: Path) -> None:
    packages = {**TOOLKIT,
                "nsight-compute-2025.3.1": ["/opt/nvidia/nsight-compute/2025.3.1/ncu",
                                            "/opt/nvidia/nsight-compute/2025.3.1/sections/ncu"],
                "nsight-systems-2025.5.1": ["/opt/nvidia/nsight-systems/2025.5.1/bin/nsys"]}
    system = fake_system(tmp_path, packages)
    (system["root"] / "opt/nvidia/nsight-compute/2025.3.1/sections/ncu").chmod(0o644)  # not executable
    result = install_nsight(system, "13.0.3", "nsight-compute-2025.3.1 nsight-systems-2025.5.1")
    assert result.returncode == 0, result.stderr
    assert system["log"].read_text().split()[-2:] == ["nsight-compute-2025.3.1", "nsight-systems-2025.5.1"]
    assert os.readlink(system["links"] / "ncu") == str(system["root"] / "opt/nvidia/nsight-compute/2025.3.1/ncu")
    assert os.readlink(system["links"] / "nsys") == str(system["root"] / "opt/nvidia/nsight-systems/2025.5.1/bin/nsys")


def test_nsight_none_installs_nothing_and_a_package_without_the_tool_fails(tmp_path: Path) -> None:
    system = fake_system(tmp_path, {"nsight-compute-2025.3.1": ["/opt/nvidia/nsight-compute/2025.3.1/ncu"],
                                    "nsight-systems-2025.5.1": ["/opt/nvidia/nsight-systems/2025.5.1/README"]})
    result = install_nsight(system, "13.0.3", "none")
    assert result.returncode == 0 and "no ncu and no nsys" in result.stdout
    assert not system["log"].exists() and not system["links"].exists()
    result = install_nsight(system, "13.0.3", "nsight-compute-2025.3.1 nsight-systems-2025.5.1")
    assert result.returncode != 0
    assert "no executable nsys in nsight-systems-2025.5.1" in result.stderr
    result = install_nsight(system, "13.0.3", "nsight-compute-2025.3.1")
    assert result.returncode != 0 and "no nsight-systems package" in result.stderr


# ---------------------------------------------------------------- docker/with_build_ca.sh


def with_build_ca(tmp_path: Path, secret: Path) -> tuple[str, Path]:
    system = tmp_path / "system.crt"
    system.write_text("SYSTEM CERTS\n")
    probe = tmp_path / "probe"
    env = {"PATH": os.environ["PATH"], "BUILD_CA_SECRET": str(secret), "SYSTEM_CA_BUNDLE": str(system),
           "TMPDIR": str(tmp_path)}
    script = (f'echo "$PIP_CERT" > {probe}; cat "${{PIP_CERT:-/dev/null}}" >> {probe}; '
              'test "$SSL_CERT_FILE" = "$PIP_CERT"')
    result = subprocess.run(["sh", str(DOCKER / "with_build_ca.sh"), "sh", "-c", script], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 or not secret.exists(), result.stderr
    return probe.read_text(), system


def test_with_build_ca_adds_the_secret_to_the_system_bundle_for_one_command(tmp_path: Path) -> None:
    secret = tmp_path / "ca_bundle"
    secret.write_text("PROXY CA\n")
    seen, _ = with_build_ca(tmp_path, secret)
    bundle, *content = seen.splitlines()
    assert content == ["SYSTEM CERTS", "PROXY CA"]
    assert not Path(bundle).exists(), "the combined bundle is removed after the command"


def test_with_build_ca_without_a_secret_changes_nothing(tmp_path: Path) -> None:
    seen, _ = with_build_ca(tmp_path, tmp_path / "absent")
    assert seen == "\n"


# ---------------------------------------------------------------- Apptainer definition


def definition_section(name: str) -> list[str]:
    section, current = [], None
    for line in DEFINITION.read_text().splitlines():
        if line.startswith("%"):
            current = line.split()[0]
        elif current == name and line.strip() and not line.strip().startswith("#"):
            section.append(line.strip())
    return section


def test_apptainer_definition_applies_to_a_saved_image() -> None:
    text = DEFINITION.read_text()
    assert re.search(r"^Bootstrap: docker-archive$", text, re.M)
    assert re.search(r"^From: trainbench\.tar$", text, re.M)
    assert "%runscript" in text and "--nv" in text
    environment = " ".join(definition_section("%environment"))
    assert 'PATH="/opt/venv/bin:/opt/trainbench/bin:${PATH}"' in environment
    assert env_value("XLA_FLAGS") in environment


@pytest.mark.slow
def test_apptainer_test_line_imports_both_frameworks_in_one_process() -> None:
    """The %test python line, run here as it is written there: torch must come before TensorFlow."""
    line = next(line for line in definition_section("%test") if line.startswith("python -c"))
    code = re.fullmatch(r'python -c "(.*)"', line)
    assert code, line
    imported = re.match(r"import ([\w, ]+(?: as \w+)?(?:, [\w ]+)*);", code.group(1))
    assert imported and imported.group(1).split(",")[0].strip() == "torch"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1"}
    result = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"^torch \S+ tf 2\.20\.\S+$", result.stdout, re.M), result.stdout


# ---------------------------------------------------------------- docker/check_pins.py


def check_pins(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DOCKER / "check_pins.py"), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_check_pins_reports_versions_and_imports_of_this_environment(tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    packaging_version = importlib.metadata.version("packaging")
    constraints.write_text(f"# comment\npackaging=={packaging_version}\nsix==0.0.1\nnot-a-real-dist==1.0\n")
    result = check_pins("check", str(constraints))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    found = report["distributions"]
    assert found["packaging"] == {"pinned": packaging_version, "installed": packaging_version,
                                  "imports": {"packaging": "ok"}}
    assert found["six"]["installed"] == importlib.metadata.version("six") and found["six"]["pinned"] == "0.0.1"
    assert found["not-a-real-dist"]["installed"] is None


def test_check_pins_compare_fails_on_a_new_import_failure_or_another_version(tmp_path: Path) -> None:
    def result(python: str, **distributions: dict) -> Path:
        path = tmp_path / f"{python}.json"
        path.write_text("banner printed by an entry point\n" +
                        json.dumps({"python": python, "distributions": distributions}))
        return path

    reference = result("3.11", a={"pinned": "1", "installed": "1", "imports": {"a": "ok"}},
                       b={"pinned": "2", "installed": "2", "imports": {"b": "OSError: no credentials"}},
                       c={"pinned": "3", "installed": "3", "imports": {"c": "ok"}})
    good = result("3.12", a={"pinned": "1", "installed": "1", "imports": {"a": "ok"}},
                  b={"pinned": "2", "installed": "2", "imports": {"b": "OSError: no credentials"}},
                  c={"pinned": "3", "installed": None, "imports": {}})
    passed = check_pins("compare", str(good), str(reference))
    assert passed.returncode == 0, passed.stdout
    assert "2 of 3 pins installed at their version (0 problems); 1 of 2 modules imported" in passed.stdout
    assert "c==3: not installed" in passed.stdout and "fails here and under Python 3.11 too" in passed.stdout
    bad = result("3.12", a={"pinned": "1", "installed": "1", "imports": {"a": "ImportError: gone"}},
                 b={"pinned": "2", "installed": "2.1", "imports": {"b": "OSError: no credentials"}},
                 c={"pinned": "3", "installed": "3", "imports": {"c": "ok"}})
    failed = check_pins("compare", str(bad), str(reference))
    assert failed.returncode == 1
    assert "PROBLEM a: import a fails (ImportError: gone), imports under Python 3.11" in failed.stdout
    assert "PROBLEM b: pinned 2, installed 2.1" in failed.stdout
    assert check_pins("compare", str(bad)).returncode == 2


def test_pinned_setuptools_still_has_pkg_resources() -> None:
    """tensorflow_hub (imported by tf-models-official's tensorflow_models) needs pkg_resources, gone in setuptools 81.

    `make image-test`'s pin check found both imports failing with setuptools 84 pinned in constraints.txt.
    """
    import importlib.util

    assert importlib.util.find_spec("pkg_resources") is not None
    pinned = re.search(r"^setuptools==(\d+)\.", (REPO / "constraints.txt").read_text(), re.M)
    assert pinned and int(pinned.group(1)) < 81
