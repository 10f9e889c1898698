"""The results model and run files: typed, versioned records every command writes and every reader reads.

The bottom layer beside ``config`` and ``errors``: any layer may import it, it imports neither frameworks nor
the layers above.
"""
