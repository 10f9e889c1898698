"""The workload registry (``trainbench.workloads``): descriptors looked up by name, importing no framework."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from tests.conftest import run_main
from trainbench import workloads
from trainbench.config import ModelConfig, field_default
from trainbench.errors import UsageError
from trainbench.workloads import Param, Workload


def test_resnet50_is_registered_with_the_settings_modelconfig_checks() -> None:
    resnet = workloads.get("resnet50")
    assert workloads.names() == ("bert", "gpt2", "llama", "resnet50", "retinanet", "transformer")
    assert resnet.frameworks == ("torch", "tf") and resnet.sample_unit == "image"
    for name in ("image_size", "num_classes"):  # the descriptor's defaults are the network's, and its bounds hold
        param = resnet.params[name]
        assert field_default(ModelConfig, name) is None and ModelConfig().param(name) == param.default
        ModelConfig(**{name: param.maximum})
        with pytest.raises(UsageError):
            ModelConfig(**{name: param.minimum - 1})


def test_an_unknown_name_is_one_line_naming_the_known_ones() -> None:
    known = "bert, gpt2, llama, resnet50, retinanet, transformer"
    with pytest.raises(UsageError, match=rf"^unknown workload 'bret': choose one of {known}$"):
        workloads.get("bret")


def test_a_name_registered_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads, "_WORKLOADS", dict(workloads._WORKLOADS))
    twin = Workload("resnet50", "ResNet-50", "image classification", "image", {"image_size": Param(224, 32, 64, "")},
                    {"full": ""}, {"torch": "x"}, "imagenet")
    with pytest.raises(ValueError, match="registered twice"):
        workloads.register(twin)


def test_the_record_kind_decides_the_pipeline_and_the_learnable_set() -> None:
    """What the harness asks instead of a workload's name: which pipeline reads its --data, which learnable set
    `train` draws from, whether `train --data` reads its records, and which workload a folder's kind feeds."""
    learnable = {workload.name: workload.learnable_set for workload in workloads.all_workloads()}
    assert learnable == {"bert": "tokens", "gpt2": "tokens", "llama": "tokens", "resnet50": "images",
                         "retinanet": None, "transformer": "tokens"}
    assert [w.name for w in workloads.all_workloads() if w.image_input] == ["resnet50"]
    assert [w.name for w in workloads.all_workloads() if w.trains_on_data] == ["resnet50"]
    # A kind feeds the first workload registered that reads it: Llama reads GPT-2's records (input-bench: GPT-2's).
    readers = [workloads.reader_of(w.record_kind).name for w in workloads.all_workloads()]
    assert readers == [name if name != "llama" else "gpt2" for name in workloads.names()]
    with pytest.raises(UsageError, match=r"^no workload reads parquet records$"):
        workloads.reader_of("parquet")
    assert workloads.get("retinanet").train_problem() is not None and workloads.get("bert").train_problem() is None
    boxes = dataclasses.replace(workloads.get("retinanet"), untrainable=None)  # no set to learn from: still refused
    assert "no learnable synthetic set" in str(boxes.train_problem())


def test_the_registry_loads_no_framework() -> None:
    """The command line, campaigns and the report ask the registry before any worker: it must stay cheap."""
    code = "import sys, trainbench.workloads; print(sorted({'torch', 'tensorflow'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_the_command_lists_each_workload_with_its_references() -> None:
    result = run_main("workloads")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "\nresnet50: ResNet-50, image classification; one sample is one image (images/s)\n" in out
    assert "--image-size: default 224 (tiny: 64), 32 to 4096" in out and "torch: torchvision.models.resnet50" in out
    assert "one sample is one sentence pair (sentence pairs/s, and tokens/s)" in out
    assert "  --size tiny: 2 layers, hidden 32" in out  # each size's Size.about
    assert "  tf: refused: the pinned tf-models-official has no GPT-2" in out  # gpt2's refused framework and why
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == list(workloads.names())


# Trainable parameters each framework's builder makes at --size full: held exactly by tests/test_torch_workloads.py
# and test_tf_workloads.py, compared across frameworks and with the published figure here.
BUILT_PARAMETERS = {
    "resnet50": {"torch": 25_557_032, "tf": 25_557_032},
    "gpt2": {"torch": 124_439_808},
    "llama": {"torch": 8_030_261_248},  # Llama-3.1-8B (1b: 1,235,814,400, tests/test_llama.py)
    "bert": {"torch": 110_106_428, "tf": 110_106_428},
    "retinanet": {"torch": 34_068_119, "tf": 34_091_159},
    "transformer": {"torch": 61_399_040, "tf": 61_362_176},
}
# How far the two frameworks' builds of one network may differ (the issue's bar): detection heads differ in detail.
AGREEMENT = {"retinanet": 0.02}


@pytest.mark.parametrize("workload", workloads.all_workloads(), ids=workloads.names())
def test_each_framework_builds_the_published_network(workload: Workload) -> None:
    """The counts are what each framework's builder makes (tests/test_torch_workloads.py and test_tf_workloads.py
    hold them exactly); here they must agree across frameworks and with the published figure."""
    built = BUILT_PARAMETERS[workload.name]
    assert set(built) == set(workload.frameworks)
    counts = list(built.values())
    tolerance = AGREEMENT.get(workload.name, 0.005)
    assert max(counts) - min(counts) <= tolerance * min(counts), built
    for count in counts:
        assert count == pytest.approx(workload.published_parameters, rel=max(tolerance, 0.01))


def test_the_command_shows_the_published_parameters() -> None:
    out = run_main("workloads").stdout
    assert "  parameters at --size full: about 110.0 M (published)" in out
