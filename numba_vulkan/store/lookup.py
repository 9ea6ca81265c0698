"""Finding an entry through the tiers, and storing one in them: one loop each.

The tiers (:data:`TIERS`: the disk, then the remote server where
``NUMBA_VULKAN_REMOTE_CACHE`` is set) are asked in order. What a tier
holds is decoded (:func:`numba_vulkan.store.entry.decode`) and checked by
the caller's ``check``, whatever tier it came from, told whether the tier
is shared (whose entries are untrusted input, checked as a shipped module
is, spirv-val included); anything that does not check out is counted
``rejected`` and the next tier is asked. A hit is kept
in the tiers that missed it (the disk, for a hit on the server). A store
goes to every tier; the remote one sends it from a background thread.

An entry may have a portable name as well
(:class:`numba_vulkan.store.keys.FunctionKey`), the same in every
checkout: a portable tier (the server) is asked under that one, and an
``adapt`` function makes what it returns this checkout's entry before it
is checked. ``docs/remote.md`` says what this trusts.
"""

from numba_vulkan.base import config
from numba_vulkan.store import counters
from numba_vulkan.store import entry as entries
from numba_vulkan.store.disk import DiskTier
from numba_vulkan.store.entry import DAMAGED
from numba_vulkan.store.remote import RemoteTier

#: The environment variable that turns the cache off when set to 0.
ENV_VAR = "NUMBA_VULKAN_CACHE"

DISK = DiskTier()
REMOTE = RemoteTier()
#: Every tier, fastest first.
TIERS = (DISK, REMOTE)

#: The portable name of :func:`lookup` and :func:`put` by default: the
#: entry has one name in every tier.
SAME = object()


def enabled():
    """Whether kernels are cached.

    Returns:
        bool: False when ``NUMBA_VULKAN_CACHE`` is ``0``.
    """
    return config.cache_enabled()


def _asked(tier, portable):
    """Whether ``tier`` is asked for an entry with this portable name."""
    return tier.usable() and not (tier.portable and portable is None)


def lookup(section, name, label=None, check=None, portable=SAME, tiers=TIERS):
    """Read an entry from the first tier that has it, counting and logging
    each tier's answer; None on any failure.

    Args:
        section: ``"kernels"``, ``"functions"`` or ``"aot"``.
        name: The entry's name (64 hexadecimal digits).
        label: What the debug log calls the entry (default: its name).
        check: Called with the decoded entry and whether it came from a
            shared tier (untrusted: its ``validated`` claim is not taken,
            spirv-val runs); raising one of
            :data:`~numba_vulkan.store.entry.DAMAGED` rejects it. It may add
            to the entry what is not data (a checked kernel object).
        portable: The entry's name in portable tiers and a function that
            makes what they hold this checkout's entry, raising ValueError
            if it cannot; None to ask no portable tier.
        tiers: The tiers to ask, of those that are usable.
    """
    if not enabled():
        return None
    label = label or name
    valid = entries.is_name(name)
    missed = []
    for tier in tiers:
        if not _asked(tier, portable):
            continue
        theirs = portable[0] if tier.portable and portable is not SAME else name
        where = tier.where(section)
        try:
            data = tier.get(section, theirs) if valid else None
            if data is None:
                tier.count(section, "misses")
                counters.log(where, "miss", label,
                             theirs[:16] if valid else "not an entry name")
                missed.append(tier)
                continue
            found = entries.decode(section, theirs, data)
            if theirs != name:
                portable[1](found)
                # Before the check, which adds what is not data.
                data = entries.encode(section, name, found)
            if check is not None:
                check(found, tier.shared)
        except DAMAGED as exc:
            tier.count(section, "rejected")
            counters.log(where, "rejected", label, f"{name[:16]}: {exc}")
            missed.append(tier)
            continue
        tier.count(section, "hits")
        counters.log(where, "hit", label, name[:16])
        tier.used(section, name)
        for faster in missed:
            faster.put(section, name, data, copy=True)
        return found
    return None


def put(section, name, value, portable=SAME, tiers=TIERS):
    """Store an entry in every usable tier; failures to write are counted, not raised.

    Args:
        section, name: As for :func:`lookup`.
        value: A dict of str keys and bytes or JSON-serialisable values.
        portable: The entry's name in portable tiers, or None to store it
            in no portable tier.
        tiers: The tiers to store it in, of those that are usable.

    Raises:
        ValueError: ``name`` is not an entry name.
        TypeError: A value is neither bytes nor JSON-serialisable.
    """
    data = entries.encode(section, name, value)
    if not enabled():
        return
    for tier in tiers:
        if not _asked(tier, portable):
            continue
        theirs = portable if tier.portable and portable is not SAME else name
        tier.put(section, theirs,
                 data if theirs == name else entries.encode(section, theirs, value))
