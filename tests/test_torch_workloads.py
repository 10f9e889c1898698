"""The PyTorch builders of every workload (engines/torch/workloads/): FLOP counting and batches at --size tiny on
the CPU (what every runner promises is the engine contract's), and the full sizes' parameter counts and training
FLOPs against published figures, built on the meta device (shapes only, nothing allocated).

FlopCounterMode counts matrix products, convolutions and attention, a multiply-add as 2, and nothing element-wise:
the analytic formulas below count the same things.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn

from tests.test_workloads import BUILT_PARAMETERS
from trainbench.config import BenchConfig, ModelConfig
from trainbench.engines.torch.engine import ENGINE, _cloned, _tensors
from trainbench.engines.torch.workloads import TorchBuilder, builder_of, flops, retinanet
from trainbench.workloads import bert as bert_task

BATCH = 2
SMOOTHING = 0.1


def builder(model: ModelConfig) -> TorchBuilder:
    return builder_of(model)


# Every workload's tiny runner (samples, tokens, parameters, FLOPs, every layer trained) is the engine contract's,
# for both frameworks: tests/test_engine_contract.py.


@pytest.mark.slow
def test_counting_flops_leaves_the_network_as_built() -> None:
    # RetinaNet has batch norm: after counting, its running statistics must still be those of a fresh network.
    model = ModelConfig(workload="retinanet", size="tiny", device="cpu")
    runner = ENGINE.make_runner(BenchConfig(model=model, batch_size=BATCH))
    torch.manual_seed(model.seed)
    fresh = builder(model).build(model)
    for (name, counted), untouched in zip(runner.network.state_dict().items(), fresh.state_dict().values(),
                                          strict=True):
        assert torch.equal(counted, untouched), name
    assert all(parameter.grad is None for parameter in runner.network.parameters())


def test_the_transformer_tiny_flops_count_cpu_attention() -> None:
    # On the CPU scaled_dot_product_attention runs a kernel PyTorch's counter has no formula for; ours maps it.
    model = ModelConfig(workload="transformer", size="tiny", device="cpu")
    runner = ENGINE.make_runner(BenchConfig(model=model, batch_size=BATCH))
    assert runner.train_flops_per_sample == pytest.approx(transformer_flops(model), rel=1e-9)


def test_batches_are_random_tokens_and_valid_boxes() -> None:
    bert = ModelConfig(workload="bert", size="tiny", device="cpu")
    inputs, targets = builder(bert).synthetic_batch(bert, 4, "cpu", 0)
    positions = inputs["masked_positions"]
    assert positions.shape == (4, round(0.15 * bert.param("seq_len")))
    assert all(len(set(row)) == len(row) for row in positions.tolist())  # distinct positions in each sequence
    assert (inputs["input_ids"].gather(1, positions) == bert_task.MASK_ID).all()  # [MASK] where the labels are
    assert (inputs["input_ids"] == bert_task.MASK_ID).sum() == positions.numel()  # and nowhere else
    assert (positions > 0).all()  # never the [CLS] place
    assert set(targets["next_sentence_label"].tolist()) <= {0, 1}
    detector = ModelConfig(workload="retinanet", size="tiny", device="cpu")
    images, boxes = builder(detector).synthetic_batch(detector, 4, "cpu", 0)
    size = detector.param("image_size")
    assert images.shape == (4, 3, size, size)
    corners = boxes["boxes"]
    assert corners.shape == (4, detector.spec.dims("tiny")["boxes_per_image"], 4)
    assert (corners[..., 0] < corners[..., 2]).all() and (corners[..., 1] < corners[..., 3]).all()
    assert (corners >= 0).all() and (corners <= size).all()
    assert (boxes["labels"] >= 1).all() and (boxes["labels"] < detector.param("num_classes")).all()


def test_tiny_retinanet_has_the_tiny_fpn_and_heads() -> None:
    model = ModelConfig(workload="retinanet", size="tiny", device="cpu")
    with torch.device("meta"):
        network = builder(model).build(model)
    dims = model.spec.dims("tiny")
    assert network.backbone.out_channels == dims["fpn_channels"]
    assert len(network.head.classification_head.conv) == len(network.head.regression_head.conv) == dims["head_convs"]
    assert network.anchor_generator.num_anchors_per_location() == [dims["anchors"]] * 5


def test_the_cuda_graph_buffers_copy_every_tensor_of_a_nested_batch() -> None:
    # What _GraphedStep does with a batch (the capture itself needs a GPU): static copies of every tensor, in the
    # same structure and layout, and the same order of tensors for the copy before each replay.
    images = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    batch = (images, {"boxes": torch.rand(2, 3, 4), "labels": torch.tensor([[1, 2, 3], [3, 2, 1]])})
    static = _cloned(batch)
    assert isinstance(static, tuple) and isinstance(static[1], dict) and list(static[1]) == ["boxes", "labels"]
    buffers, originals = _tensors(static), _tensors(batch)
    assert len(buffers) == 3
    assert all(torch.equal(copy, tensor) and copy.data_ptr() != tensor.data_ptr()
               for copy, tensor in zip(buffers, originals, strict=True))
    assert buffers[0].is_contiguous(memory_format=torch.channels_last) and not buffers[0].is_contiguous()
    nested = ((torch.zeros(1), torch.ones(2)), torch.full((3,), 2.0))  # the transformer's ((source, target), out)
    assert [tensor.numel() for tensor in _tensors(_cloned(nested))] == [1, 2, 3]


# --- the full sizes, on the meta device -----------------------------------------------------------------------------


@pytest.fixture
def no_packed_sequence_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """transformers looks at GPT-2's position ids for packed sequences (a value check a meta tensor cannot
    answer); ours never are packed, so the answer is None, as it would find on a real device."""
    from transformers import masking_utils

    monkeypatch.setattr(masking_utils, "find_packed_sequence_indices", lambda position_ids: None)
    yield


def full(name: str) -> tuple[ModelConfig, nn.Module]:
    model = ModelConfig(workload=name, size="full", device="cpu")
    with torch.device("meta"):
        network = builder(model).build(model)
    network.train()
    return model, network


def trainable(network: nn.Module) -> int:
    return sum(parameter.numel() for parameter in network.parameters() if parameter.requires_grad)


def measured_flops(model: ModelConfig, network: nn.Module) -> float:
    batch = builder(model).synthetic_batch(model, 1, "meta", model.seed)
    return flops.count_step_flops(lambda: builder(model).loss(network, batch, SMOOTHING))


def transformer_flops(model: ModelConfig) -> float:
    """Training = 3 x forward. Forward per token 2 x the weights it multiplies: encoder layers 4h^2 (attention
    projections) + 2hf (feed-forward), decoder layers 8h^2 (self and cross attention) + 2hf, the tied output
    projection hV; attention scores and weighted sums 4 h s^2 per layer and attention (encoder self, decoder self,
    cross). Per sentence pair, source and target of s tokens."""
    dims, s = model.spec.dims(model.size), model.param("seq_len")
    h, f, layers, vocab = dims["hidden"], dims["ffn"], dims["layers"], dims["vocab"]
    weights_per_token = layers * (4 * h * h + 2 * h * f) + layers * (8 * h * h + 2 * h * f) + h * vocab
    return 3 * (2 * weights_per_token * s + layers * 3 * 4 * h * s * s)


def language_model_flops(model: ModelConfig, head: int, per_sequence: int) -> float:
    """6 x (non-embedding matrix weights + the output projection ``head``) x tokens + attention 12 x layers x
    hidden x seq^2 (training; causal masks not discounted), + ``per_sequence`` weights used once a sequence."""
    dims, s = model.spec.dims(model.size), model.param("seq_len")
    h, layers = dims["hidden"], dims["layers"]
    ffn = dims.get("ffn", 4 * h)
    per_token = layers * (4 * h * h + 2 * h * ffn) + head
    return 6 * per_token * s + 12 * layers * h * s * s + 6 * per_sequence


PUBLISHED_PARAMETERS = {  # trainable parameters of the published networks
    "resnet50": (25_557_032, 0.001),  # torchvision's ResNet-50
    "bert": (110e6, 0.01),  # BERT-base, "110M"
    "gpt2": (124_439_808, 0.001),  # GPT-2 small as Hugging Face's gpt2 checkpoint holds it (tied head)
    "llama": (8_030_261_248, 0.0),  # Llama-3.1-8B as Meta's checkpoint holds it (untied head)
    "transformer": (61e6, 0.01),  # Transformer-base with a 33,708-token shared vocabulary
    "retinanet": (34.0e6, 0.02),  # torchvision's RetinaNet R50-FPN (34,014,999 with frozen batch norm)
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMETERS))
def test_full_sizes_have_the_published_parameter_counts(name: str) -> None:
    published, tolerance = PUBLISHED_PARAMETERS[name]
    model, network = full(name)
    assert trainable(network) == pytest.approx(published, rel=tolerance)
    assert trainable(network) == BUILT_PARAMETERS[model.workload]["torch"]


def test_full_retinanet_is_what_its_parts_build() -> None:
    # Tiny builds RetinaNet from its parts: at the full dims those parts make the factory's network.
    model, factory = full("retinanet")
    dims = model.spec.dims("full")
    with torch.device("meta"):
        parts = retinanet.from_parts(model.param("num_classes"), dims["fpn_channels"], dims["head_convs"],
                                     model.param("image_size"))
    assert {name: value.shape for name, value in parts.state_dict().items()} == \
        {name: value.shape for name, value in factory.state_dict().items()}


def test_full_resnet50_trains_at_three_times_8_2_gflop_an_image() -> None:
    model, network = full("resnet50")
    assert measured_flops(model, network) == pytest.approx(3 * 8.2e9, rel=0.05)  # 4.1 G multiply-adds forward


def test_full_transformer_flops_follow_the_formula() -> None:
    model, network = full("transformer")
    assert measured_flops(model, network) == pytest.approx(transformer_flops(model), rel=0.05)


def test_full_bert_flops_follow_the_formula() -> None:
    model, network = full("bert")
    h, vocab = model.spec.dims("full")["hidden"], model.spec.dims("full")["vocab"]
    # Masked-LM head (a dense h x h, then the tied decoder h x V) on the 15 % masked positions only, as TF's
    # reference gathers them; pooler and NSP once a sequence.
    masked = round(0.15 * model.param("seq_len"))
    expected = language_model_flops(model, head=0, per_sequence=masked * (h * h + h * vocab) + h * h + 2 * h)
    assert measured_flops(model, network) == pytest.approx(expected, rel=0.05)


@pytest.mark.usefixtures("no_packed_sequence_check")
def test_full_gpt2_flops_follow_the_formula() -> None:
    model, network = full("gpt2")
    h, vocab = model.spec.dims("full")["hidden"], model.spec.dims("full")["vocab"]
    expected = language_model_flops(model, head=h * vocab, per_sequence=0)  # the tied LM head on every token
    assert measured_flops(model, network) == pytest.approx(expected, rel=0.05)
