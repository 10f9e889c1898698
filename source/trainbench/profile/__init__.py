"""Profiling a window of training iterations: the in-process side (CUDA profiler API, NVTX, framework profilers)
and the external profilers (ncu, nsys, nvprof) that run a worker under them."""
