"""The interface every tier of the cache has, so that one loop
(:func:`numba_vulkan.store.lookup.lookup`) asks them all.

A tier keeps entry files' bytes (:mod:`numba_vulkan.store.entry`) under a
section and a name; it does not read them. Tiers are asked in order, the
fastest first: the disk (:class:`numba_vulkan.store.disk.DiskTier`), then
the remote server (:class:`numba_vulkan.store.remote.RemoteTier`).
"""


class Tier:
    """Where entries are kept; subclasses implement every method."""

    #: Whether the tier is shared between machines: it is asked under an
    #: entry's portable name (the same in every checkout) where it has one.
    portable = False
    #: Whether others write to the tier: its entries are untrusted input,
    #: checked as a shipped module is (spirv-val included) before use.
    shared = False

    def usable(self):
        """Whether the tier is configured in this process."""
        raise NotImplementedError

    def where(self, section):
        """What the debug log and :func:`numba_vulkan.store.stats` call the
        tier's lookups in ``section``."""
        raise NotImplementedError

    def get(self, section, name):
        """The bytes stored under ``section/name``, or None if there are none.

        Raises:
            OSError: There is something there that cannot be read.
        """
        raise NotImplementedError

    def put(self, section, name, data, copy=False):
        """Keep ``data`` under ``section/name``; failures are counted, not raised.

        ``copy`` says the entry was found in a later tier and is kept here
        too, which is not counted as a store."""
        raise NotImplementedError

    def used(self, section, name):
        """Note a hit (for eviction's order)."""

    def count(self, section, what):
        """Add one to the tier's counter ``what`` (hits, misses, rejected)."""
        raise NotImplementedError
