"""Framework-independent parts of end-to-end training: the loop and its run folder (``loop``), the trainer
protocol each engine implements (``trainer``), the learning-rate schedule and the accuracy metrics."""
