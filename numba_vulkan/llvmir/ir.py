"""One model of an LLVM module, as LLVM's optimiser prints it.

Codegen passes parse the module text once, transform the model and print it
once, instead of matching lines with regular expressions of their own.

The model::

    Module.items          in order: Global, Function, or a verbatim line
                          (target triple, type definitions, attribute
                          groups, metadata)
    Module.globals        {"@name": Global}; Module.functions: [Function]
    Global                name, prefix (linkage, addrspace(N), ... words),
                          kind ("global" or "constant"), type, init (a value
                          or None), tail (", align 16", verbatim)
    Function              header (the ``define``/``declare`` line without
                          its ``{``, verbatim), name, blocks (None for a
                          declaration)
    Block                 label (None for an unnamed entry block),
                          instructions
    Instruction           name ("%x" or None), opcode, flags, type,
                          operands, tail; see its docstring
    Operand               type (None where the instruction implies it),
                          value, attrs (call parameter attributes)

A value is a string (``%x``, ``@g``, ``42``, ``poison``, an aggregate
constant written out) or an :class:`Instruction` without a name: a constant
expression such as ``getelementptr (i8, ptr @g, i64 4)``, whose operands are
parsed like an instruction's. Types are strings as LLVM prints them
(``ptr addrspace(3)``, ``[16 x float]``). Attributes and metadata are kept
verbatim in ``flags`` and ``tail``.

:func:`words` and :func:`map_words` read and rename the bare words of a
type or an attribute list (``double``, ``i64``, not ``%double``);
:func:`elements` splits an aggregate constant into its typed elements.
:func:`parse` reads the module as LLVM prints it; Numba's own printer's
form (a body opened on a line of its own) parses too, which
:mod:`numba_vulkan.codegen.optimize` relies on to read its ``define`` lines.

Parts of the model compare by identity (``inst in block.instructions``
finds that very instruction). Passes build new instructions from text with
:func:`instruction`, e.g.
``ir.instruction(f"{name} = add i64 {a}, 1")``. ``str()`` of any part of the
model prints it as LLVM IR.
"""

import functools
import re
from dataclasses import dataclass, field

#: Opcodes whose text is ``op FLAGS OPERAND to TYPE``.
CASTS = frozenset("trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint "
                  "inttoptr bitcast addrspacecast".split())
#: Opcodes that may open a constant expression: ``op FLAGS (OPERANDS)``.
CONSTANT_OPCODES = CASTS | {"getelementptr", "add", "sub", "mul", "xor", "shl",
                            "extractelement", "insertelement", "shufflevector"}
_TYPE_WORDS = frozenset("void half bfloat float double fp128 x86_fp80 ptr label metadata "
                        "token opaque".split())
_CLOSE = {"(": ")", "[": "]", "{": "}", "<": ">"}


# Tokens ---------------------------------------------------------------------

def tokens(text):
    """Split ``text`` into words and commas; a bracketed group (with what
    precedes it up to a space, as in ``addrspace(3)``) or a quoted string
    is one word. A ``;`` outside quotes ends the text."""
    if "\t" not in text and "\n" not in text and (
            '"' not in text or text.count('"') % 2 == 0 and not _QUOTED_SPECIAL.search(text)):
        # Most lines: one regular expression (in C) finds the words, and
        # its answer is the loop's below wherever what it left out is
        # spaces only: then every bracket of the text is in a group it
        # matched, none deeper than it reads, so that no depth goes below
        # zero and the words are the text's runs between spaces and
        # commas outside brackets. Quoted strings without a space, comma,
        # bracket or ``;`` in them are letters of a word to both; a ``;``
        # is then outside quotes, and outside brackets where the text
        # before it passes.
        head = text.partition(";")[0] if ";" in text else text
        found = _WORDS.findall(head)
        kept = "".join(found)
        if len(head) - len(kept) == head.count(" ") - kept.count(" "):
            return found
    return _tokens(text)


def _tokens(text):
    """:func:`tokens`, a piece at a time."""
    # The text is cut at its spaces (in C) and the pieces are put back
    # together inside brackets and quotes; only pieces with a quote, a
    # comment, a tab or an inner comma are read character by character.
    out, parts, depth, quoted = [], [], 0, False
    for piece in text.split(" "):
        if not (quoted or depth or piece):
            continue
        if not quoted and len(piece.translate(_PLAIN)) == len(piece) \
                and "," not in piece[:-1]:
            if len(piece.translate(_NO_BRACKETS)) != len(piece):
                depth += _bracket_balance(piece)
            if depth > 0:
                parts.append(piece)
                continue
            depth = 0
            if piece[-1:] == ",":
                parts.append(piece[:-1])
                word = " ".join(parts) if len(parts) > 1 else parts[0]
                if word:
                    out.append(word)
                out.append(",")
            elif parts:
                parts.append(piece)
                out.append(" ".join(parts))
            else:
                out.append(piece)
            parts = []
            continue
        start = 0
        for k, ch in enumerate(piece):
            if ch == '"':
                quoted = not quoted
            elif quoted:
                continue
            elif ch in "([{<":
                depth += 1
            elif ch in ")]}>":
                depth -= 1
            elif depth <= 0 and ch in ",;\t\n":
                parts.append(piece[start:k])
                _flush(parts, out)
                parts = []
                if ch == ";":
                    return out
                if ch == ",":
                    out.append(",")
                start = k + 1
        parts.append(piece[start:])
        if not (quoted or depth > 0):
            depth = 0
            _flush(parts, out)
            parts = []
    _flush(parts, out)
    return out


def _nested_groups(levels):
    """A regular expression of a bracketed group (any opening bracket, any
    closing one, as :func:`_bracket_balance` counts them) with groups
    inside it ``levels - 1`` deep."""
    # Unrolled (text, then group and text again), so that an unclosed
    # bracket fails in time linear in the text, not exponential.
    group = r"[([{<][^()\[\]{}<>]*[)\]}>]"
    for _ in range(levels - 1):
        group = r"[([{<][^()\[\]{}<>]*(?:" + group + r"[^()\[\]{}<>]*)*[)\]}>]"
    return group


#: Two quotes with what separates words of :func:`tokens` between them.
_QUOTED_SPECIAL = re.compile(r'"[^"]*[ ,;()\[\]{}<>\t\n][^"]*"')

#: A word of :func:`tokens` (brackets nested up to 8 deep), or a comma.
_WORDS = re.compile(r"(?:[^ ,()\[\]{}<>]+|" + _nested_groups(8) + r")+|,")

#: Deleting what only the slow path of tokens() reads, and brackets.
_PLAIN = str.maketrans("", "", '";\t\n')
_NO_BRACKETS = str.maketrans("", "", "([{<)]}>")


def _flush(parts, out):
    if len(parts) > 1 or parts and parts[0]:
        out.append(" ".join(parts))


def _bracket_balance(text):
    """Opening brackets less closing ones in ``text`` (no quotes in it)."""
    return (text.count("(") + text.count("[") + text.count("{") + text.count("<")
            - text.count(")") - text.count("]") - text.count("}") - text.count(">"))


def _depth(text):
    """How many brackets ``text`` opens and leaves open (negative: closes),
    outside quotes and before a comment."""
    if '"' not in text and ";" not in text:
        return _bracket_balance(text)
    depth, quoted = 0, False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == ";":
            break
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
    return depth


def _groups(words):
    """Split a token list at its commas."""
    groups = [[]]
    for word in words:
        if word == ",":
            groups.append([])
        else:
            groups[-1].append(word)
    return groups


def items(text):
    """The comma-separated items of ``text`` at its top level (a type list
    such as a struct's fields), brackets and quoted strings kept whole."""
    return [" ".join(group) for group in _groups(tokens(text)) if group]


def is_type(word):
    """Whether a token starts a type."""
    return (word in _TYPE_WORDS or word[0] in "[{<%" or word.startswith("target(")
            or (word[0] == "i" and word[1:].isdigit()))


def _take_type(words, i):
    """The type starting at ``words[i]`` and the index after it."""
    if words[i] == "ptr" and i + 1 < len(words) and words[i + 1].startswith("addrspace("):
        return f"ptr {words[i + 1]}", i + 2
    return words[i], i + 1


def _take_value(words, i):
    """The value starting at ``words[i]`` (a constant expression is parsed)
    and the index after it."""
    word = words[i]
    if word in CONSTANT_OPCODES:
        j = i + 1
        while j < len(words) and not words[j].startswith("("):
            j += 1
        if j < len(words):
            expr = Instruction(word, flags=words[i + 1:j])
            _fill(expr, tokens(words[j][1:-1]))
            return expr, j + 1
    return word, i + 1


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-$._")


def _segments(text):
    """``text`` cut into pieces, each with whether it is a bare word: a type
    or keyword word (``double``, ``i64``), not a name (``%double``,
    ``@i64``, ``!5``, ``#0``) or a quoted string."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        bare = False
        if ch == '"':
            j = text.index('"', i + 1) + 1
        elif ch in "%@!#" or ch in _NAME_CHARS:
            j = i + 1
            if ch in "%@" and j < n and text[j] == '"':
                j = text.index('"', j + 1) + 1
            while j < n and text[j] in _NAME_CHARS:
                j += 1
            bare = ch not in "%@!#"
        else:
            j = i + 1
        yield text[i:j], bare
        i = j


def words(text):
    """The bare words of ``text`` (see :func:`map_words`), in order."""
    return [piece for piece, bare in _segments(text) if bare]


def map_words(text, mapping):
    """``text`` with each bare word found in ``mapping`` replaced: type and
    keyword words (``double``, ``i64``), not names (``%double``, ``@i64``),
    quoted strings or parts of longer words."""
    return "".join(mapping.get(piece, piece) if bare else piece
                   for piece, bare in _segments(text))


def elements(value):
    """The elements of an aggregate constant (``[i32 1, i32 2]``, ``{ float
    1.0, ptr @g }``, ``<2 x ...>``'s ``<i32 1, i32 2>``) as Operands, or None
    for any other value; :func:`aggregate` writes them back."""
    if not isinstance(value, str) or value[:1] not in ("[", "{", "<"):
        return None
    inner = value[2:-2] if value.startswith("<{") else value[1:-1]
    out = []
    for group in _groups(tokens(inner)):
        if group:
            ty, j = _take_type(group, 0)
            out.append(Operand(ty, _take_value(group, j)[0]))
    return out


def aggregate(value, operands):
    """The aggregate constant shaped like ``value`` holding ``operands``."""
    body = ", ".join(str(o) for o in operands)
    if value.startswith("<{"):
        return f"<{{ {body} }}>"
    if value.startswith("{"):
        return f"{{ {body} }}"
    return f"{value[0]}{body}{_CLOSE[value[0]]}"


# The model -------------------------------------------------------------------

@dataclass(eq=False)
class Operand:
    """A typed value: ``type attrs value``."""

    type: object
    value: object
    attrs: str = ""

    def __str__(self):
        return " ".join(p for p in (self.type, self.attrs, str(self.value)) if p)


@dataclass(eq=False)
class Instruction:
    """One instruction, or (without a name) a constant expression.

    ``flags`` are the words between the opcode and the first operand
    (``nsw``, ``inbounds``, ``eq``, ``volatile``, a call's ``fast`` or
    ``noundef``); ``prefix`` a call's ``tail``. ``type`` is the type an
    instruction names apart from its operands: the element type of ``load``,
    ``getelementptr`` and ``alloca``, a cast's target, the result of
    ``phi`` and ``call`` (a call's may carry its function type), ``ret
    void``'s ``void``. ``operands`` are a call's arguments (``callee``
    names the function), a phi's incoming values (``labels`` their blocks),
    a switch's condition, default and then each case's value and label.
    ``tail`` is the verbatim text after the operands (``, align 4``, a
    call's ``#3``, an atomic's ordering, metadata).
    """

    opcode: str
    operands: list = field(default_factory=list)
    name: object = None
    flags: list = field(default_factory=list)
    type: object = None
    tail: str = ""
    prefix: str = ""
    callee: str = ""
    labels: list = field(default_factory=list)

    def __str__(self):
        ops = [str(o) for o in self.operands]
        if self.opcode == "phi":
            body = [self.type, ", ".join(f"[ {o.value}, {b} ]"
                                         for o, b in zip(self.operands, self.labels))]
        elif self.opcode == "call":
            body = [self.type, f"{self.callee}({', '.join(ops)})"]
        elif self.opcode == "switch":
            cases = " ".join(f"{ops[k]}, {ops[k + 1]}" for k in range(2, len(ops), 2))
            body = [f"{ops[0]}, {ops[1]} [ {cases} ]"]
        elif self.opcode in CASTS:
            body = [f"{ops[0]} to {self.type}"]
        else:
            body = [", ".join(([self.type] if self.type else []) + ops)]
        words = [self.prefix, self.opcode, *self.flags]
        if self.name is None and self.opcode in CONSTANT_OPCODES:
            return " ".join(w for w in words if w) + f" ({' '.join(b for b in body if b)})"
        text = " ".join(w for w in words + body if w) + self.tail
        return f"{self.name} = {text}" if self.name else text

    def values(self):
        """Every value this instruction reads, constant expressions'
        operands included, as ``(holder, value)`` pairs: assigning
        ``holder.value`` replaces it."""
        for operand in self.operands:
            yield operand, operand.value
            if isinstance(operand.value, Instruction):
                yield from operand.value.values()


def _fill(inst, words):
    """Parse the words after an instruction's opcode into ``inst``."""
    if inst.opcode == "call":
        _fill_call(inst, words)
        return
    i = 0
    while i < len(words) and not is_type(words[i]) and words[i] != ",":
        i += 1
    inst.flags.extend(words[:i])
    words = words[i:]
    if inst.opcode == "phi":
        inst.type, i = _take_type(words, 0)
        for incoming in words[i:]:
            if incoming != ",":
                value, label = _groups(tokens(incoming[1:-1]))
                inst.operands.append(Operand(None, _take_value(value, 0)[0]))
                inst.labels.append(label[0])
        return
    if inst.opcode == "switch":
        first, second, *rest = _groups(words)
        inst.tail = (", " + _join(rest)) if rest else ""
        inst.operands = [Operand(*_take_type(first, 0)[:1], first[-1]),
                         Operand("label", second[1])]
        cases = [w for w in tokens(second[2][1:-1]) if w != ","]
        for k in range(0, len(cases), 4):
            ty, value, _, label = cases[k:k + 4]
            inst.operands += [Operand(ty, value), Operand("label", label)]
        return
    groups = _groups(words)
    for k, group in enumerate(groups):
        if not group:
            continue
        if not is_type(group[0]) and (group[0] == "align" or group[0][0] in "!#"
                                      or group[0].isalpha() and group[0] not in (
                                          "true", "false", "null", "poison", "undef",
                                          "zeroinitializer", "none")
                                      and group[0] not in CONSTANT_OPCODES):
            inst.tail = ", " + _join(groups[k:])
            return
        j, ty = 0, None
        if is_type(group[0]) and (len(group) > 1 or k == 0):
            ty, j = _take_type(group, 0)
        if j == len(group):
            # A type alone: what load, getelementptr and alloca name.
            inst.type = ty
            continue
        value, j = _take_value(group, j)
        inst.operands.append(Operand(ty, value))
        rest = group[j:]
        if rest and rest[0] == "to":
            inst.type, j = _take_type(rest, 1)
            rest = rest[j:]
        if rest:
            inst.tail = " " + _join([rest] + groups[k + 1:])
            return


def _fill_call(inst, words):
    i = 0
    while not is_type(words[i]):
        i += 1
    inst.flags.extend(words[:i])
    inst.type, i = _take_type(words, i)
    if words[i].startswith("("):
        inst.type += " " + words[i]
        i += 1
    callee, _, args = words[i].partition("(")
    inst.callee = callee
    for group in _groups(tokens(args[:-1])):
        if not group:
            continue
        ty, j = _take_type(group, 0)
        value, end = _take_value(group, len(group) - 1)
        # A constant expression argument spans several words.
        for start in range(j, len(group)):
            if group[start] in CONSTANT_OPCODES:
                value, end = _take_value(group, start)
                break
        else:
            start = len(group) - 1
        inst.operands.append(Operand(ty, value, " ".join(group[j:start])))
    rest = words[i + 1:]
    inst.tail = (" " + _join(_groups(rest))) if rest else ""


def _join(groups):
    return ", ".join(" ".join(g) for g in groups)


#: Instructions parsed so far, by their text, as nested tuples of strings
#: (:func:`_freeze`); each parse builds a new Instruction from them: most
#: lines of a module come back unchanged from one pass to the next, and from
#: one kernel to another, and building is a tenth of parsing. Tuples of
#: strings leave the garbage collector's lists at its next young collection,
#: so thousands of entries do not bring on full collections, which walk
#: every object of Numba's (tens of milliseconds each).
_parsed = {}
_PARSED_LIMIT = 200_000


def instruction(text):
    """Parse one instruction: ``[%name = ] opcode ...``."""
    frozen = _parsed.get(text)
    if frozen is not None:
        return _thaw(frozen)
    if len(_parsed) >= _PARSED_LIMIT:
        _parsed.clear()
    # Nothing else holds what was just parsed: it is the caller's, as a
    # copy built from its frozen form would be.
    inst = _parse_instruction(text)
    _parsed[text] = _freeze(inst)
    return inst


def _freeze(inst):
    """``inst`` as nested tuples; a tuple value is a constant expression."""
    return (inst.opcode, tuple([(o.type, _freeze(o.value) if isinstance(o.value, Instruction)
                                 else o.value, o.attrs) for o in inst.operands]),
            inst.name, tuple(inst.flags), inst.type, inst.tail, inst.prefix, inst.callee,
            tuple(inst.labels))


def _thaw(frozen):
    """A new Instruction from what :func:`_freeze` made."""
    opcode, operands, name, flags, ty, tail, prefix, callee, labels = frozen
    return Instruction(opcode, [Operand(t, _thaw(v) if isinstance(v, tuple) else v, a)
                                for t, v, a in operands],
                       name, list(flags), ty, tail, prefix, callee, list(labels))


def _parse_instruction(text):
    words = tokens(text)
    name = None
    if len(words) > 1 and words[1] == "=":
        name, words = words[0], words[2:]
    prefix = ""
    if words[0] in ("tail", "musttail", "notail"):
        prefix, words = words[0], words[1:]
    inst = Instruction(words[0], name=name, prefix=prefix)
    _fill(inst, words[1:])
    return inst


@dataclass(eq=False)
class Block:
    """A basic block."""

    label: object
    instructions: list = field(default_factory=list)

    def __str__(self):
        head = [f"{self.label}:"] if self.label is not None else []
        return "\n".join(head + [f"  {inst}" for inst in self.instructions])

    @property
    def terminator(self):
        return self.instructions[-1]


@dataclass(eq=False)
class Function:
    """A function definition (``blocks``) or declaration (``blocks`` None)."""

    header: str
    blocks: object = None

    @property
    def name(self):
        return _function_name(self.header)

    def instructions(self):
        """Every instruction, in block order."""
        for block in self.blocks or ():
            yield from block.instructions

    def __str__(self):
        if self.blocks is None:
            return self.header
        return "\n".join([self.header + " {"] + [str(b) for b in self.blocks] + ["}"])


@functools.lru_cache(maxsize=4096)
def _function_name(header):
    """The ``@name`` a ``define`` or ``declare`` line defines: passes ask for
    it once per instruction they rewrite."""
    return next(w for w in tokens(header) if w.startswith("@")).partition("(")[0]


@dataclass(eq=False)
class Global:
    """A module-level variable: ``name = prefix kind type init tail``."""

    name: str
    prefix: list
    kind: str
    type: str
    init: object = None
    tail: str = ""

    @property
    def addrspace(self):
        for word in self.prefix:
            if word.startswith("addrspace("):
                return int(word[len("addrspace("):-1])
        return 0

    def __str__(self):
        words = [self.name, "=", *self.prefix, self.kind, self.type]
        if self.init is not None:
            words.append(str(self.init))
        return " ".join(words) + self.tail


def _global(line):
    words = tokens(line)
    k = next(i for i, w in enumerate(words) if w in ("global", "constant"))
    ty, j = _take_type(words, k + 1)
    init = None
    if j < len(words) and words[j] != ",":
        init, j = _take_value(words, j)
    tail = words[j:]
    return Global(words[0], words[2:k], words[k], ty, init,
                  (", " + _join(_groups(tail[1:]))) if tail else "")


@dataclass(eq=False)
class Module:
    """A whole module; see the module docstring."""

    items: list = field(default_factory=list)

    @property
    def functions(self):
        return [item for item in self.items if isinstance(item, Function)]

    @property
    def globals(self):
        return {item.name: item for item in self.items if isinstance(item, Global)}

    def function(self, name):
        """The function ``@name``."""
        return next(f for f in self.functions if f.name == name)

    def named_types(self):
        """``{"%T": "{ i32, float }"}`` of the module's type definitions."""
        types = {}
        for item in self.items:
            if isinstance(item, str) and item.startswith("%") and " = type " in item:
                name, _, ty = item.partition(" = type ")
                types[name] = ty
        return types

    def add(self, item, before=None):
        """Add a Global, Function or verbatim line (text is parsed), before
        the first function where ``before`` is None."""
        if isinstance(item, str):
            item = parse(item).items[0]
        if before is None:
            before = next((x for x in self.items if isinstance(x, Function)), None)
        self.items.insert(self.items.index(before) if before is not None else len(self.items),
                          item)
        return item

    def __str__(self):
        return "\n\n".join(str(item) for item in self.items) + "\n"


def parse(text):
    """Parse module text as LLVM prints it into a :class:`Module`."""
    module, function = Module(), None
    # An instruction continued on the next lines (a switch's cases): its
    # lines so far and the brackets they leave open, counted line by line.
    pending, depth = [], 0
    for raw in text.splitlines():
        stripped = raw.strip()
        if pending:
            pending.append(stripped)
            depth += _depth(stripped)
            if depth > 0:
                continue
            line = stripped = " ".join(pending)
            pending = []
        else:
            line = raw.rstrip()
            if not stripped or stripped.startswith(";"):
                continue
            if function is not None and stripped == "{" and not function.blocks:
                # Numba's own printer opens the body on a line of its own.
                continue
            if function is not None:
                frozen = _parsed.get(stripped) if line[0].isspace() else None
                if frozen is not None:
                    # An instruction parsed before: whole, as no line that
                    # continues on the next is cached.
                    if not function.blocks:
                        function.blocks.append(Block(None))
                    function.blocks[-1].instructions.append(_thaw(frozen))
                    continue
                depth = _depth(stripped)
                if depth > 0:
                    pending = [stripped]
                    continue
        if function is not None:
            if stripped == "}":
                function = None
            elif not line[0].isspace() and tokens(stripped)[0].endswith(":"):
                function.blocks.append(Block(tokens(stripped)[0][:-1]))
            else:
                if not function.blocks:
                    function.blocks.append(Block(None))
                function.blocks[-1].instructions.append(instruction(stripped))
        elif stripped.startswith("define "):
            function = Function(stripped.removesuffix("{").rstrip(), [])
            module.items.append(function)
        elif stripped.startswith("declare "):
            module.items.append(Function(stripped))
        elif stripped.startswith("@") and any(w in ("global", "constant")
                                              for w in tokens(stripped)[2:]):
            module.items.append(_global(stripped))
        else:
            module.items.append(stripped)
    return module
