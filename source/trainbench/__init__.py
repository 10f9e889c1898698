"""trainbench: ResNet-50 training benchmarks for TensorFlow and PyTorch, and the tools to explain them."""

__version__ = "0.1.0"
