"""``print()`` in kernels: the print buffer's layout and how the host reads it.

The one owner of the print record format, shared by the compiler, which
writes records (:mod:`numba_vulkan.frontend.printing`), and the dispatcher,
which decodes them after a launch; plain data and NumPy, no Numba.

A kernel that calls ``print`` gets one more storage buffer (a parameter of
kind ``"print"``, see :mod:`numba_vulkan.base.abi`) of 32-bit words:

* word 0: words reserved so far (records start at word :data:`HEADER_WORDS`);
* word 1: print calls dropped because their record did not fit;
* word 2: the number of record words the buffer has room for, written by
  the host before the launch;
* word 3: where the records end, which the host sets to word 2's value:
  the one call whose record would straddle the buffer's end stores its
  start there, so that the host never reads the words it reserved but
  could not write.

Each ``print`` call reserves its record's words with one atomic add on word
0 and, if the record fits, writes it: the id of its format, then the raw
bits of each value argument (a 64-bit value low word first); otherwise it
adds one to word 1. Reservations are made in order, so every record before
the straddling one fits. The formats (the constant strings and value types of
each call site) stay on the host, in the compiled kernel's
``metadata["print"]``: ``{str(format_id): [item, ...]}`` where an item is
``{"text": "constant"}`` or ``{"value": kind}``, ``kind`` one of
:data:`VALUE_WORDS`.
"""

import numpy as np

#: Words at the start of the buffer before the first record.
HEADER_WORDS = 4

#: Word offsets of the header's fields.
RESERVED, DROPPED, CAPACITY, END = 0, 1, 2, 3

#: The kinds of value a record holds, and the words each takes. A value of a
#: narrower type is stored widened (``int8`` as ``int32``, ``float16`` as
#: ``float32`` bits); ``float16`` and narrowed ``float64`` keep their own
#: kind so that they print as the host prints that type.
VALUE_WORDS = {
    "bool": 1, "int32": 1, "uint32": 1, "int64": 2, "uint64": 2,
    "float16": 1, "float32": 1, "float64": 2, "complex64": 2, "complex128": 4,
}

#: Most items a format may have, and longest constant text, in a checked
#: entry: beyond any kernel's, small enough that a hostile file cannot make
#: decoding slow.
_MAX_ITEMS = 256
_MAX_TEXT = 4096


def record_words(items):
    """Words of one record of a format: its id, then its values."""
    return 1 + sum(VALUE_WORDS[item["value"]] for item in items if "value" in item)


def check_formats(formats):
    """Raise ValueError unless ``formats`` is a well-formed ``metadata["print"]``."""
    if not isinstance(formats, dict):
        raise ValueError("print formats are not an object")
    for key, items in formats.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < 2 ** 32):
            raise ValueError(f"print format id {key!r} is not a 32-bit unsigned integer")
        if not isinstance(items, list) or len(items) > _MAX_ITEMS:
            raise ValueError(f"print format {key} is not a list of at most {_MAX_ITEMS} items")
        for item in items:
            if not isinstance(item, dict) or len(item) != 1:
                raise ValueError(f"print format {key} has an item that is not "
                                 "{'text': ...} or {'value': ...}")
            (name, value), = item.items()
            if name == "text":
                if not isinstance(value, str) or len(value) > _MAX_TEXT:
                    raise ValueError(f"print format {key} has a text item that is not a "
                                     f"string of at most {_MAX_TEXT} characters")
            elif name != "value" or value not in VALUE_WORDS:
                raise ValueError(f"print format {key} has an unknown item {item!r}")


#: How each kind's words read as NumPy values, and whether its values print
#: through their NumPy scalar (else through the Python value of ``tolist``,
#: which prints the same, faster).
_VIEWS = {"bool": (np.uint32, False), "int32": (np.int32, False),
          "uint32": (np.uint32, False), "int64": (np.int64, False),
          "uint64": (np.uint64, False), "float16": (np.float32, True),
          "float32": (np.float32, True), "float64": (np.float64, False),
          "complex64": (np.complex64, True), "complex128": (np.complex128, True)}


def _column(kind, words):
    """The text of a value of ``kind`` in each row of ``words`` (its words,
    one row per record), as the host prints a value of that type."""
    dtype, scalar = _VIEWS[kind]
    values = np.ascontiguousarray(words).view(dtype)[:, 0]
    if kind == "bool":
        return ["True" if v else "False" for v in values.tolist()]
    if kind == "float16":
        values = values.astype(np.float16)
    return [str(v) for v in (values if scalar else values.tolist())]


def _template(items):
    """The line of a format, ``str.format`` style, with a field per value."""
    parts = ["{}" if "value" in item else item["text"].replace("{", "{{").replace("}", "}}")
             for item in items]
    return " ".join(parts) + "\n"


def decode(words, formats):
    """The lines a print buffer's records stand for, in buffer order.

    Args:
        words: The buffer's words from the start (a NumPy uint32 array),
            at least the header and every reserved word that fits.
        formats: The kernel's ``metadata["print"]``.

    Returns:
        A list of lines, each ending in a newline; the last one says how
        many calls were dropped, if any were.
    """
    words = np.asarray(words, np.uint32)
    capacity = int(words[CAPACITY])
    used = min(int(words[RESERVED]), int(words[END]), capacity, len(words) - HEADER_WORDS)
    records = words[HEADER_WORDS:HEADER_WORDS + used]
    ids = records.tolist()
    sizes = {int(key): record_words(items) for key, items in formats.items()}
    # Walk the records once for where each starts; format them a format at a time.
    starts, position, lost = [], 0, None
    while position < used:
        size = sizes.get(ids[position])
        if size is None or position + size > used:
            lost = (f"[numba_vulkan: print record of unknown format {ids[position]}; "
                    "the rest of the output is lost]\n")
            break
        starts.append(position)
        position += size
    starts = np.array(starts, np.int64)
    kinds = records[starts] if len(starts) else np.zeros(0, np.uint32)
    lines = [None] * len(starts)
    for key in np.unique(kinds).tolist():
        items = formats[str(key)]
        rows = np.flatnonzero(kinds == key)
        record = records[starts[rows, None] + np.arange(sizes[key])]
        columns, offset = [], 1
        for item in items:
            if "value" in item:
                size = VALUE_WORDS[item["value"]]
                columns.append(_column(item["value"], record[:, offset:offset + size]))
                offset += size
        template = _template(items)
        texts = ([template.format(*row) for row in zip(*columns)] if columns
                 else [template.format()] * len(rows))
        for row, text in zip(rows.tolist(), texts):
            lines[row] = text
    if lost:
        lines.append(lost)
    dropped = int(words[DROPPED])
    if dropped:
        lines.append(f"[numba_vulkan: {dropped} print() call{'s' if dropped != 1 else ''} "
                     f"dropped: the print buffer ({4 * (capacity + HEADER_WORDS)} bytes) was "
                     "full; raise NUMBA_VULKAN_PRINT_BUFFER_BYTES]\n")
    return lines


def header(buffer_bytes):
    """The header words a buffer of ``buffer_bytes`` bytes starts a launch with."""
    capacity = buffer_bytes // 4 - HEADER_WORDS
    return np.array([0, 0, capacity, capacity], np.uint32)
