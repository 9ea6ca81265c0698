"""Calls that must return within a time, whatever the other side does.

A socket's timeout bounds each read, not a reply that trickles in a little
at a time, nor a peer that accepts and never answers; so the call runs in a
daemon thread of its own, which is abandoned if it is late (it holds
nothing the caller waits for).
"""

import threading


def call_within(seconds, late, name, function, *args):
    """``function(*args)`` if it returns within ``seconds``, raising what it
    raises; else the exception ``late()`` makes. ``name`` names the thread."""
    outcome = []

    def run():
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise late()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
