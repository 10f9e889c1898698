"""The CPU as `make test` prints it: model name, generation and widest vector extension, from /proc/cpuinfo."""

from __future__ import annotations

from trainbench.telemetry.env import cpu_class

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma

processor\t: 1
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx avx2 fma
"""


def test_two_generations_of_one_model_name_are_told_apart() -> None:
    assert cpu_class(ZEN3) == "AMD EPYC, family 25 model 1, AVX2"
    zen4 = ZEN3.replace("model\t\t: 1", "model\t\t: 17").replace("avx2 fma", "avx2 fma avx512f avx512dq")
    assert cpu_class(zen4) == "AMD EPYC, family 25 model 17, AVX-512"


def test_a_cpu_without_vector_flags_or_family_says_what_it_has() -> None:
    assert cpu_class("model name\t: Some Arm core\nflags\t: fp asimd\n") == "Some Arm core, no AVX"
    assert cpu_class("model name\t: Bare\n") == "Bare"
