"""Hugging Face transformers, kept off the network: the builders make their models from a config with random
weights and never download (offline before transformers is first imported, whoever imports it first)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import transformers

__all__ = ["transformers"]
