"""The benchmark harness, framework-free: the timed window (``timing``) and its statistics (``stats``), sweeps
over batch sizes in worker processes (``sweep``, ``worker``, ``launch``), the input pipeline measured alone
(``input_bench``), variability and machine load, the merge of several processes' results (``ranks``) and
``compare`` between runs. It reaches a framework only through ``trainbench.engines``."""
