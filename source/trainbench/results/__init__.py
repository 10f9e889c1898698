"""The results model and run files: typed, versioned records every command writes and every reader reads.

A bottom layer, above ``errors``, ``frameworks`` and ``workloads`` (whose descriptors say what a sample holds:
tokens per sample for the derived figures' check): any layer above may import it; it imports neither frameworks
nor the layers above.
"""
