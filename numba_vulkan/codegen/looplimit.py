"""Drivers that stop loops: fewer counted trips, and a report when a kernel hits the limit.

Lavapipe (Mesa's llvmpipe) runs the invocations of a SIMD group together
and counts, per group, every trip of every loop against one limit (65535
in Mesa 22.3): each loop construct the group reaches counts at least one
trip, even when every lane skips it (a loop in an ``if`` arm that no lane
takes), and each further trip counts one. Past the limit every loop is
left at its next back edge, silently. A target whose description has a
``loop_limit`` gets two things here:

* :func:`hint_unrolling` asks LLVM to unroll every innermost loop
  :data:`UNROLL` times (a counted loop with a remainder loop, a ``while``
  with an exit test in each copy), so that the driver counts one trip per
  :data:`UNROLL` of the source;
* :func:`count_trips` counts, per invocation, what the driver counts for
  the invocation's path, and at the end of the kernel writes
  :data:`numba_vulkan.base.abi.LOOP_LIMIT_CODE` to the status buffer if the count
  reached the limit, from which the launch raises a LaunchError. The count
  is exact when the lanes of a group take the same path; lanes that diverge
  make the group count more than any lane does (docs/limitations.md).
"""

from numba_vulkan.base import abi
from numba_vulkan.llvmir import ir

#: How many copies of an innermost loop's body one trip runs on a target
#: with a loop limit: with 16, a counted loop of 10**6 trips stays under
#: lavapipe's 65535 (62,500 trips and a remainder of at most 15).
UNROLL = 16

#: How many instructions the copies of one unrolled loop body (and of its
#: remainder loop) may hold in all: a larger body is unrolled fewer times,
#: not at all below two copies. Sixteen copies of a body that inlines
#: float64 math (``math.exp``, a normal draw of ``cuda.random``) made
#: modules of 1 MB and compiles of 12 s where the rolled loop took 1 s; a
#: loop with such a body reaches the driver's limit in fewer trips, and the
#: trip count reports that.
UNROLL_BUDGET = 1024


def _metadata_id(item):
    """The number of a metadata definition ``!N = ...``, or None."""
    if isinstance(item, str) and item.startswith("!"):
        number, equals, _ = item[1:].partition(" = ")
        if equals and number.isdigit():
            return int(number)
    return None


def _loop_latches(function, innermost, latch_exits_only=False, bodies=False):
    """The latch blocks of each loop of ``function`` (an
    :class:`~numba_vulkan.llvmir.ir.Function`), of innermost loops only if
    ``innermost``, of loops left only from their latches if
    ``latch_exits_only``; loops that already carry loop metadata are left out.
    With ``bodies``, each loop is ``(latches, blocks of the loop)``."""
    blocks = {block.label: block for block in function.blocks}
    succs = {label: [op.value.lstrip("%") for op in block.terminator.operands
                     if op.type == "label"]
             for label, block in blocks.items()}
    preds = {label: [] for label in blocks}
    for label, targets in succs.items():
        for t in targets:
            preds[t].append(label)
    back, on_stack, seen = {}, set(), set()
    entry = function.blocks[0].label
    stack = [(entry, iter(succs[entry]))]
    on_stack.add(entry)
    seen.add(entry)
    while stack:
        node, it = stack[-1]
        for s in it:
            if s in on_stack:
                back.setdefault(s, []).append(node)
            elif s not in seen:
                seen.add(s)
                on_stack.add(s)
                stack.append((s, iter(succs[s])))
                break
        else:
            stack.pop()
            on_stack.discard(node)
    loop_bodies = {}
    for header, latches in back.items():
        inside, work = {header}, list(latches)
        while work:
            n = work.pop()
            if n not in inside:
                inside.add(n)
                work.extend(preds[n])
        loop_bodies[header] = inside

    def exits_elsewhere(header, inside):
        return any(t not in inside for n in inside if n not in back[header] for t in succs[n])

    found = [([blocks[latch] for latch in back[header]], [blocks[n] for n in inside])
             for header, inside in loop_bodies.items()
             if not (innermost and any(other != header and other in inside
                                       for other in loop_bodies))
             and not (latch_exits_only and exits_elsewhere(header, inside))
             and not any("!llvm.loop" in blocks[latch].terminator.tail
                         for latch in back[header])]
    return found if bodies else [latches for latches, _ in found]


def _mark(module, loops, prop):
    """Give each loop (its latch blocks) a loop ID with the property ``prop``."""
    ids = [n for n in map(_metadata_id, module.items) if n is not None]
    first = max(ids, default=-1) + 1
    module.items.append(f"!{first} = !{{{prop}}}")
    for k, latches in enumerate(loops, start=1):
        loop_id = first + k
        module.items.append(f"!{loop_id} = distinct !{{!{loop_id}, !{first}}}")
        for latch in latches:
            latch.terminator.tail += f", !llvm.loop !{loop_id}"


def hint_unrolling(module, entry="main", count=UNROLL, budget=UNROLL_BUDGET):
    """Mark every innermost loop of ``entry`` in the IR model ``module``, in
    place, for LLVM's loop unroller to
    unroll ``count`` times (``llvm.loop.unroll.count``), or as many times as
    copies of its body fit in ``budget`` instructions; loops that already
    carry loop metadata (see :func:`keep_library_loops`) are left alone."""
    if count < 2:
        return
    function = next((f for f in module.functions if f.name == f"@{entry}"), None)
    if function is None or function.blocks is None:
        return
    # A loop with exits besides its latch (a break, a return) is left rolled:
    # unrolled, each copy of its exits became one more exit through a flag,
    # and some nests of `while True` then computed wrong results (the cause is
    # not yet known). Such loops keep the driver's limit, and the trip count
    # reports a launch that reaches it.
    # LLVM will not unroll a loop that calls a convergent function (a
    # barrier, a subgroup operation), and says so on stderr at every compile.
    convergent = _convergent_callees(module)
    by_count = {}
    for latches, body in _loop_latches(function, innermost=True, latch_exits_only=True,
                                       bodies=True):
        if any(inst.opcode == "call" and inst.callee in convergent
               for block in body for inst in block.instructions):
            continue
        size = sum(len(block.instructions) for block in body)
        # A counted loop unrolled keeps one more copy, rolled, for the remainder.
        copies = min(count, budget // max(size, 1) - 1)
        if copies >= 2:
            by_count.setdefault(copies, []).append(latches)
    for copies, loops in sorted(by_count.items()):
        _mark(module, loops, f'!"llvm.loop.unroll.count", i32 {copies}')


def _convergent_callees(module):
    """Names of the functions ``module`` declares or defines as convergent."""
    groups = {item.partition(" = ")[0].split()[-1] for item in module.items
              if isinstance(item, str) and item.startswith("attributes #")
              and "convergent" in item}
    return {f.name for f in module.functions
            if "convergent" in f.header or groups & set(ir.tokens(f.header))}


def _definitions(text):
    """Names of the functions ``text`` defines, read from their headers alone."""
    return {ir.Function(line.removesuffix("{").rstrip()).name
            for line in text.splitlines() if line.startswith("define ")}


def keep_library_loops(texts, own):
    """Mark the loops of the functions in ``texts`` that the kernel's own
    modules ``own`` do not define (libclc's), so that :func:`hint_unrolling`
    leaves them as they are: their trips are few, and unrolled they would
    double the code of a kernel that calls a few math functions. The mark is
    ``llvm.loop.mustprogress``, true of every library loop."""
    defined = {name for text in own for name in _definitions(text)}
    out = []
    for text in texts:
        if _definitions(text) <= defined:
            out.append(text)
            continue
        module = ir.parse(text)
        loops = [latches for f in module.functions
                 if f.blocks is not None and f.name not in defined
                 for latches in _loop_latches(f, innermost=False)]
        if loops:
            _mark(module, loops, '!"llvm.loop.mustprogress"')
            text = str(module)
        out.append(text)
    return out


_STATUS_TYPE = 'target("spirv.VulkanBuffer", [0 x i32], 12, 1)'
_STATUS_MANGLED = "tspirv.VulkanBuffer_a0i32_12_1t"


def count_trips(function, loops, limit, status_binding):
    """Count, per invocation, the loop trips lavapipe counts, and report
    reaching ``limit`` in the status buffer at ``status_binding``.

    ``function`` is the structurizer's function in ``reg2mem`` form (see
    :mod:`numba_vulkan.codegen.structurize`) with its normalised ``loops``.
    The driver counts, in each trip of a loop (and once for the kernel),
    one trip for each loop directly inside it, whether the lane enters it or
    not, and one more for each further trip of that loop: so each header
    adds its number of child loops, each back edge one.

    Returns the module-level declarations the added code needs.
    """
    parent = {}
    for header, loop in loops.items():
        around = [h for h, other in loops.items() if h != header and header in other.blocks]
        parent[header] = min(around, key=lambda h: len(loops[h].blocks)) if around else None
    children = {h: 0 for h in loops}
    top = 0
    for header in loops:
        if parent[header] is None:
            top += 1
        else:
            children[parent[header]] += 1
    counter = function.alloca("trips", "i32")
    function.blocks[function.entry].body.append(
        ir.instruction(f"store i32 {top}, ptr {counter}, align 4"))
    for header, loop in loops.items():
        if children[header]:
            function.blocks[header].body.extend(_add(function, counter, str(children[header])))
        latch = function.blocks[loop.latch]
        if latch.term[0] == "br":
            latch.body.extend(_add(function, counter, "1"))
        else:
            _, cond, taken, other = latch.term
            step = "%" + function.fresh("backedge")
            back = "true" if taken == header else "false"
            latch.body.append(ir.instruction(f"{step} = zext i1 {cond} to i32" if back == "true"
                                             else f"{step} = select i1 {cond}, i32 0, i32 1"))
            latch.body.extend(_add(function, counter, step))
    return _report(function, counter, limit, status_binding)


def _add(function, counter, step):
    old, new = "%" + function.fresh("trips"), "%" + function.fresh("trips")
    return [ir.instruction(text) for text in (f"{old} = load i32, ptr {counter}, align 4",
                                              f"{new} = add i32 {old}, {step}",
                                              f"store i32 {new}, ptr {counter}, align 4")]


def _report(function, counter, limit, binding):
    """At the kernel's end: if the count reached ``limit``, write the code
    and the invocation's id to the status buffer."""
    handle = None
    for inst in function.blocks[function.entry].body:
        if inst.opcode == "call" and inst.callee.startswith(
                "@llvm.spv.resource.handlefrombinding.") and inst.type == _STATUS_TYPE and \
                inst.operands[1].value == str(binding):
            handle = inst.name
    declarations = []
    if handle is None:
        handle = "%" + function.fresh("status")
        name = f"@nv.loopstatus.{binding}"
        function.blocks[function.entry].body.insert(0, ir.instruction(
            f"{handle} = call {_STATUS_TYPE} @llvm.spv.resource.handlefrombinding."
            f"{_STATUS_MANGLED}(i32 0, i32 {binding}, i32 1, i32 0, ptr {name})"))
        label = f"b{binding}"
        declarations += [
            f'{name} = private unnamed_addr constant [{len(label) + 1} x i8] c"{label}\\00"',
            f"declare {_STATUS_TYPE} @llvm.spv.resource.handlefrombinding.{_STATUS_MANGLED}"
            "(i32, i32, i32, i32, ptr)",
            f"declare ptr addrspace(11) @llvm.spv.resource.getpointer.p11.{_STATUS_MANGLED}"
            f"({_STATUS_TYPE}, i32)"]
    declarations.append("declare i32 @llvm.spv.thread.id.i32(i32)")
    fresh = function.fresh
    trips, reached = "%" + fresh("trips"), "%" + fresh("reached")
    word, old = "%" + fresh("word"), "%" + fresh("old")
    done = function.new_block("done", [], function.blocks[function.exit].term)
    ids = [f"  {word}.0 = call ptr addrspace(11) @llvm.spv.resource.getpointer.p11."
           f"{_STATUS_MANGLED}({_STATUS_TYPE} {handle}, i32 0)"]
    for axis in range(3):
        ids += [f"  {word}.id{axis} = call i32 @llvm.spv.thread.id.i32(i32 {axis})",
                f"  {word}.{axis + 1} = call ptr addrspace(11) @llvm.spv.resource.getpointer."
                f"p11.{_STATUS_MANGLED}({_STATUS_TYPE} {handle}, i32 {axis + 1})",
                f"  store i32 {word}.id{axis}, ptr addrspace(11) {word}.{axis + 1}, align 4"]
    # The code replaces any other: a lane whose loop was cut left it by
    # whichever exit its stale state picked, an exception's among them.
    report = function.new_block("looplimit", ids[0:1] + [
        f"  {old} = atomicrmw xchg ptr addrspace(11) {word}.0, i32 {abi.LOOP_LIMIT_CODE} "
        'syncscope("device") monotonic, align 4'] + ids[1:], ("br", done))
    exit_block = function.blocks[function.exit]
    exit_block.body += [ir.instruction(f"{trips} = load i32, ptr {counter}, align 4"),
                        ir.instruction(f"{reached} = icmp uge i32 {trips}, {limit}")]
    exit_block.term = ("cbr", reached, report, done)
    function.exit = done
    return declarations
