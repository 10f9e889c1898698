"""Framework-independent parts of end-to-end training: learning-rate schedule, metrics, run folder."""
