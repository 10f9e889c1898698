"""What the machine is and how it is set (``env``: versions, CPU, GPU, driver, clocks), recorded next to every
result, and what it does while a window runs: GPU telemetry sampled through NVML (``sampler``, ``recorder``,
``summary``) and hardware counters."""
