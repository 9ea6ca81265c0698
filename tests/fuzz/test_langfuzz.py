"""The language fuzzer (:mod:`langfuzz`) with a fixed seed: generated kernels
over every dtype, array kind, index form, atomics, math, device functions
and tuples give numba.njit's results on Vulkan.

Features known to fail on main are off (``langfuzz.KNOWN_BROKEN``, empty
now). Many more cases by hand: ``python -m tests.fuzz.langfuzz --seed S --cases
1000``.
"""

import os

from tests.fuzz import langfuzz

CI_SEED = 20261201
CI_CASES = 300


def _cases():
    return [langfuzz.Case(CI_SEED, k) for k in range(CI_CASES)]


def test_cases_reproduce_from_seed_and_index():
    assert langfuzz.case_source(CI_SEED, 41) == langfuzz.case_source(CI_SEED, 41)
    assert langfuzz.case_source(CI_SEED, 41) != langfuzz.case_source(CI_SEED, 42)
    assert langfuzz.case_source(CI_SEED + 1, 41) != langfuzz.case_source(CI_SEED, 41)


def test_known_broken_features_are_off_by_default():
    assert set(langfuzz.KNOWN_BROKEN) <= set(langfuzz.FEATURES)
    assert not set(langfuzz.KNOWN_BROKEN) & langfuzz.DEFAULT_FEATURES
    for case in _cases()[:60]:
        assert not case.features & set(langfuzz.KNOWN_BROKEN), case.index


def test_generated_cases_cover_the_language():
    cases = _cases()
    counts = {}
    for case in cases:
        for feature in case.features:
            counts[feature] = counts.get(feature, 0) + 1
    assert set(counts) == set(langfuzz.DEFAULT_FEATURES), counts
    assert all(n >= 5 for n in counts.values()), counts
    assert set().union(*(c.dtypes for c in cases)) == set(langfuzz.DTYPES)
    families = {c.family.number: c.family for c in cases}.values()
    args = [a for f in families for a in f.inputs]
    assert {a.dtype for a in args} == set(langfuzz.DTYPES)
    assert {a.ndim for a in args} == {1, 2, 3}
    assert {cut for a in args for cut in a.cuts} == {"all", "step", "neg", "negstep", "off"}
    assert any(a.transpose for a in args)


def test_generated_kernels_match_njit():
    jobs = min(2, os.cpu_count() or 1)
    outcome = langfuzz.run(CI_SEED, CI_CASES, jobs=jobs)
    assert outcome.cases == CI_CASES
    report = "\n".join(f"[{cls}] seed={s} index={i}: {message[:400]}\n"
                       f"  python -m tests.fuzz.langfuzz --seed {s} --reduce {i}"
                       for s, i, cls, message in outcome.failures[:10])
    assert not outcome.failures, f"{outcome}:\n{report}"
