"""Timing loops and their summaries."""

import statistics
import time

#: Timing loop settings per size: warm-up launches, most timed launches, and
#: the seconds after which a loop stops early (it always keeps MIN_SAMPLES).
PLANS = {
    "full": {"warmup": 3, "repeat": 50, "budget": 2.0, "tiny_warmup": 200,
             "tiny_repeat": 2000},
    "quick": {"warmup": 2, "repeat": 20, "budget": 2.0, "tiny_warmup": 20,
              "tiny_repeat": 300},
    "tiny": {"warmup": 1, "repeat": 3, "budget": 1.0, "tiny_warmup": 1, "tiny_repeat": 5},
}
MIN_SAMPLES = 3


def wall_times(run, synchronize, warmup, repeat, budget):
    """Seconds of ``run(); synchronize()``, once per timed launch.

    Each launch is followed by a synchronize, so a sample is the whole
    launch path plus the work plus the wait, as a user sees it.
    """
    for _ in range(warmup):
        run()
        synchronize()
    samples = []
    clock = time.perf_counter
    deadline = clock() + budget
    for _ in range(repeat):
        start = clock()
        run()
        synchronize()
        end = clock()
        samples.append(end - start)
        if end > deadline and len(samples) >= MIN_SAMPLES:
            break
    return samples


def round_robin(runs, rounds, launches=3):
    """Device seconds of several kernels launched in turns.

    ``runs`` holds ``(kernel_times, run)`` pairs: a backend's
    ``kernel_times`` and a function that launches once. Each round launches
    every run ``launches`` times in a row and keeps the median, so that a
    slow stretch of a shared machine falls on all of them alike. Returns one
    list per run, a median per round.
    """
    times = [[] for _ in runs]
    for _ in range(rounds):
        for samples, (kernel_times, run) in zip(times, runs):
            samples.append(statistics.median(kernel_times(run, launches)))
    return times


def summary(samples):
    """Median and spread of timing samples (seconds)."""
    if not samples:
        return None
    ordered = sorted(samples)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4)
    else:
        q1, q3 = ordered[0], ordered[-1]
    median = statistics.median(ordered)
    return {"median": median, "min": ordered[0], "max": ordered[-1], "q1": q1, "q3": q3,
            "iqr_rel": (q3 - q1) / median if median else None, "n": len(ordered)}
