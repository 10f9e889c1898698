"""The TFRecord schemas the converters write and the input pipelines read: one place for feature names and types.

Each record kind is the standard schema of its workload's reference reader in tf-models-official, so shards made
here are read by that reader unchanged (and by the suite's own pipelines in both frameworks):

- ``imagenet``: ``official.vision.dataloaders.classification_input`` (written by ``data convert``);
- ``bert``: ``official.nlp.data.pretrain_dataloader`` with its default feature names (``input_ids``,
  ``segment_ids``), as Google's ``create_pretraining_data.py`` writes them;
- ``translation``: ``official.legacy.transformer.data_pipeline`` (``inputs``/``targets``, variable length, ending
  in the end-of-sentence id, padding id 0);
- ``gpt2``: no reader in the pinned packages; blocks of ``seq_len + 1`` token ids (inputs are the first
  ``seq_len``, targets the last ``seq_len``), as Hugging Face's ``run_clm`` packs its blocks;
- ``coco``: ``official.vision.dataloaders.tf_example_decoder`` (boxes normalised to [0, 1], as
  ``official/vision/data/create_coco_tf_record.py`` writes them).

A converted folder's ``manifest.json`` names its kind (``"kind"``) and the settings a reader needs (``seq_len``,
``max_predictions_per_seq``, ``vocab_size``, ...); a folder without ``"kind"`` is ImageNet's (the first format).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

FeatureType = Literal["int64", "float", "bytes"]
RecordKind = Literal["imagenet", "bert", "gpt2", "translation", "coco"]
RECORD_KINDS: tuple[RecordKind, ...] = ("imagenet", "bert", "gpt2", "translation", "coco")

# Token ids every text kind reserves. The legacy Transformer pads with 0 and ends each sentence with 1 (its
# Subtokenizer's RESERVED_TOKENS <pad>, <EOS>); WordPiece vocabularies start [PAD], [UNK], [CLS], [SEP], [MASK].
PAD_ID = 0
EOS_ID = 1
BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TRANSLATION_SPECIAL_TOKENS = ("<pad>", "<EOS>", "<unk>")
GPT2_END_OF_TEXT = "<|endoftext|>"


@dataclass(frozen=True)
class Feature:
    """One feature of a record: its type, and its length (a setting's name, a number, or None: variable)."""

    type: FeatureType
    length: str | int | None = None

    def size(self, settings: Mapping[str, int]) -> int | None:
        """The fixed length with the folder's settings; None for a variable-length feature."""
        if self.length is None or isinstance(self.length, int):
            return self.length
        return settings[self.length]


SCHEMAS: dict[RecordKind, dict[str, Feature]] = {
    "imagenet": {  # the features the pipelines read; the converter writes more (colorspace, text, boxes)
        "image/encoded": Feature("bytes", 1),
        "image/format": Feature("bytes", 1),
        "image/height": Feature("int64", 1),
        "image/width": Feature("int64", 1),
        "image/class/label": Feature("int64", 1),  # 1-based: label_offset 1
        "image/class/synset": Feature("bytes", 1),
        "image/filename": Feature("bytes", 1),
    },
    "bert": {
        "input_ids": Feature("int64", "seq_len"),
        "input_mask": Feature("int64", "seq_len"),
        "segment_ids": Feature("int64", "seq_len"),
        "masked_lm_positions": Feature("int64", "max_predictions_per_seq"),
        "masked_lm_ids": Feature("int64", "max_predictions_per_seq"),
        "masked_lm_weights": Feature("float", "max_predictions_per_seq"),  # 1.0 real, 0.0 padding
        "next_sentence_labels": Feature("int64", 1),  # 0: B follows A, 1: B is random (BERT's convention)
    },
    "gpt2": {
        "input_ids": Feature("int64", "block_len"),  # block_len = seq_len + 1
    },
    "translation": {
        "inputs": Feature("int64"),  # source sentence ids, EOS_ID last
        "targets": Feature("int64"),  # target sentence ids, EOS_ID last
    },
    "coco": {
        "image/encoded": Feature("bytes", 1),  # the image file's bytes, untouched
        "image/format": Feature("bytes", 1),  # "jpeg" or "png"
        "image/height": Feature("int64", 1),
        "image/width": Feature("int64", 1),
        "image/filename": Feature("bytes", 1),
        "image/source_id": Feature("bytes", 1),  # the COCO image id, as text
        "image/key/sha256": Feature("bytes", 1),
        "image/object/bbox/xmin": Feature("float"),  # normalised by the width
        "image/object/bbox/xmax": Feature("float"),
        "image/object/bbox/ymin": Feature("float"),  # normalised by the height
        "image/object/bbox/ymax": Feature("float"),
        "image/object/class/text": Feature("bytes"),
        "image/object/class/label": Feature("int64"),  # the COCO category id (1..90 for COCO 2017)
        "image/object/is_crowd": Feature("int64"),
        "image/object/area": Feature("float"),  # in pixels, as the annotation gives it
    },
}

