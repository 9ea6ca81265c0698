"""The control-flow fuzzer with a fixed seed: generated programs with nested
loops, ``break``, ``continue``, early ``return`` and short-circuit
conditions give numba.njit's results on Vulkan.

Many more cases, with other seeds, by hand: ``python -m tests.fuzz.fuzzrun --seed
7 --cases 2000`` (see :mod:`fuzzrun`).
"""

from tests.fuzz import fuzzgen, fuzzrun

CI_SEED = 20261130
CI_CASES = 120
BATCH = 30


def test_generated_programs_cover_the_shapes_that_need_restructuring():
    assert fuzzgen.function_source(CI_SEED, 3) == fuzzgen.function_source(CI_SEED, 3)
    counts = {}
    for k in range(CI_CASES):
        for feature in fuzzgen.function_features(CI_SEED, k):
            counts[feature] = counts.get(feature, 0) + 1
    expected = {"for", "while", "break", "continue", "return from a loop",
                "return from nested loops", "nested loop", "loop else", "short circuit",
                "conditional expression", "elif", "load", "value leaving a loop"}
    assert set(counts) == expected
    assert all(n >= CI_CASES // 20 for n in counts.values()), counts


def test_generated_programs_match_njit():
    outcome = fuzzrun.run(CI_SEED, CI_CASES, batch=BATCH)
    assert outcome.cases == CI_CASES
    report = "\n".join(f"seed={s} index={i}: {r}\n  python -m tests.fuzz.fuzzgen {s} {i}"
                       for s, i, r in outcome.failures[:10])
    assert not outcome.failures, f"{outcome}:\n{report}"


def test_programs_compiled_for_a_gpu_target_match_njit(monkeypatch):
    """Programs the H200 run of the fuzzer failed on (seed 11): a GPU target
    (no loop limit) gives loops with 64-bit bounds a 32-bit copy, whose exit
    block had its phis and casts interleaved."""
    from numba_vulkan.runtime.device import current_device
    device = current_device()
    monkeypatch.setattr(device, "target", device.target.with_features(loop_limit=0))
    for index in (28, 89, 91):
        outcome = fuzzrun.run(11, 1, batch=1, start=index)
        assert outcome.cases == 1 and not outcome.failures, outcome.failures
