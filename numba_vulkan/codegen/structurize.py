"""Give a kernel's control flow the structured shape that Vulkan requires.

SPIR-V for Vulkan needs structured control flow: every loop has one back
edge and one merge block, every branch has a merge block that nests inside
the enclosing construct. Optimised LLVM IR has no such shape: an early
``return`` jumps out of several loops, ``a and b`` makes two branches share
a target, a ``break`` leaves a loop from the middle. LLVM's SPIR-V backend
has a structurizer of its own, but it emits invalid modules (or aborts) on
exactly these shapes, so this pass rebuilds the control flow first, into a
form where the backend only has to find what is already there:

* every loop has one latch and one dedicated exit block (its merge block).
  An innermost loop with at most two exits (``while`` with a ``break``)
  leaves by breaks: each exit branches straight to the exit block. Other
  loops with several exits (``return`` from inside, exits from nested
  loops) get a new latch: each exit sets a flag and goes there, and the
  latch tests the flag. Either way a selector records where the loop was
  left for, and the exit block dispatches on it;
* in the acyclic part of every loop body and of the function, each branch
  has an immediate post-dominator that no other construct uses as its merge
  block, and the paths between the two never leave or enter from the side.
  Where paths share blocks, they are joined early in a new block that
  dispatches on a selector to the shared blocks;
* element pointers never cross blocks (logical SPIR-V cannot hold a
  pointer in a phi), and values that leave a loop reach their uses through
  a phi after it (see :meth:`_Function.join_after` for the driver bug this
  avoids).

Already structured code (a counted loop, if/else) keeps its shape; only the
parts that need it get flags and selectors. The pass runs on the optimised
IR of the kernel, with LLVM's ``reg2mem`` first (so that moving edges needs
no SSA repair) and SROA after (which turns flags and selectors back into
SSA values); neither changes the control flow graph.
"""

import llvmlite.binding as llvm

from numba_vulkan.llvmir import ir
from numba_vulkan.llvmir import markers
from numba_vulkan.base.errors import UnsupportedError

#: Most exits a loop may leave by as breaks. The backend's structurizer
#: gives a loop left by several edges a new exit block that branches on
#: which edge was taken; for three or more edges, and around nested loops,
#: that can be a switch without a merge instruction, which spirv-val
#: rejects. So only innermost loops with at most this many exits leave by
#: breaks; others leave through a flag tested in their latch.
_MAX_BREAKS = 2
#: The integer widths Vulkan has types for.
_INT_WIDTHS = ("1", "8", "16", "32", "64")


def _code(lines):
    """Instructions from their text (or the instructions themselves)."""
    return [ir.instruction(line.strip()) if isinstance(line, str) else line for line in lines]


class _Block:
    __slots__ = ("name", "body", "term")

    def __init__(self, name, body, term):
        self.name = name
        self.body = body
        self.term = term

    def succs(self):
        kind = self.term[0]
        if kind == "br":
            return [self.term[1]]
        if kind == "cbr":
            t, f = self.term[2], self.term[3]
            return [t] if t == f else [t, f]
        return []

    def retarget(self, old, new):
        kind = self.term[0]
        if kind == "br" and self.term[1] == old:
            self.term = ("br", new)
        elif kind == "cbr":
            _, cond, t, f = self.term
            self.term = ("cbr", cond, new if t == old else t, new if f == old else f)
            if self.term[2] == self.term[3]:
                self.term = ("br", self.term[2])

    def model(self):
        """The block as an :class:`~numba_vulkan.llvmir.ir.Block`."""
        kind = self.term[0]
        if kind == "br":
            term = f"br label %{self.term[1]}"
        elif kind == "cbr":
            term = f"br i1 {self.term[1]}, label %{self.term[2]}, label %{self.term[3]}"
        else:
            term = self.term[1]
        return ir.Block(self.name, self.body + [ir.instruction(term)])


class _Loop:
    __slots__ = ("header", "blocks", "latch", "exit")

    def __init__(self, header, blocks):
        self.header = header
        self.blocks = blocks
        self.latch = None
        self.exit = None


class _Function:
    """The blocks of one function in reg2mem form, and the rewrite."""

    def __init__(self, function, breaks=True):
        self.breaks = breaks
        self.blocks = {}
        self.order = []
        self.counter = 0
        self.allocas = []
        self.uses_push = False
        for block in function.blocks:
            name = "nv.entry" if block.label is None else block.label
            self.blocks[name] = _Block(name, block.instructions[:-1],
                                       self._terminator(block.terminator))
            self.order.append(name)
        self.entry = self.order[0]
        self.alloca_types = {inst.name: inst.type for inst in self.blocks[self.entry].body
                             if inst.opcode == "alloca"}
        self._unify_returns()
        self._remove_forwarders()

    # Parsing and printing ------------------------------------------------

    @staticmethod
    def _terminator(inst):
        """The terminator ``inst`` as ``("br", target)``, ``("cbr", condition,
        target, target)``, ``("ret", text)`` or ``("unreachable", text)``;
        loop metadata is dropped."""
        op = inst.opcode
        if op == "br":
            labels = [o.value[1:] for o in inst.operands if o.type == "label"]
            if len(labels) == 1:
                return ("br", labels[0])
            cond = inst.operands[0].value
            if cond == "true":
                return ("br", labels[0])
            if cond == "false":
                return ("br", labels[1])
            return ("cbr", cond, *labels)
        if op in ("ret", "unreachable"):
            return (op, str(inst))
        if op in ("switch", "indirectbr", "invoke", "callbr", "resume"):
            raise UnsupportedError(f"control flow instruction {op} in a kernel: {inst}")
        raise UnsupportedError(f"a block of the kernel ends in {inst}, not a terminator")

    def model(self):
        """The blocks, with the allocas added, as IR model blocks."""
        self.blocks[self.entry].body[0:0] = self.allocas
        return [self.blocks[name].model() for name in self.order]

    # Helpers ---------------------------------------------------------------

    def fresh(self, prefix):
        self.counter += 1
        return f"nv.{prefix}.{self.counter}"

    def new_block(self, prefix, body, term):
        name = self.fresh(prefix)
        self.blocks[name] = _Block(name, _code(body), term)
        self.order.append(name)
        return name

    def alloca(self, prefix, ty):
        name = "%" + self.fresh(prefix)
        self.allocas.append(ir.instruction(f"{name} = alloca {ty}, align 4"))
        return name

    def preds(self):
        preds = {name: [] for name in self.blocks}
        for name in self.order:
            for s in self.blocks[name].succs():
                preds[s].append(name)
        return preds

    def _unify_returns(self):
        """One return block; ``unreachable`` is treated as a return, which
        is a valid refinement and keeps every path ending in one place."""
        exits = [n for n in self.order if self.blocks[n].term[0] in ("ret", "unreachable")]
        rets = {self.blocks[n].term[1] for n in exits if self.blocks[n].term[0] == "ret"}
        if len(rets) > 1:
            raise UnsupportedError(f"the kernel returns values: {sorted(rets)}")
        ret = rets.pop() if rets else "ret void"
        self.exit = self.new_block("return", [], ("ret", ret))
        self.return_block = self.blocks[self.exit]
        for n in exits:
            self.blocks[n].term = ("br", self.exit)

    def _remove_forwarders(self):
        """Drop blocks that only branch on (reg2mem splits every critical
        edge into one): a loop whose exit test is in its latch then looks
        like one again, and needs no flags."""
        forward = {}
        for name in self.order:
            block = self.blocks[name]
            if name != self.entry and not block.body and block.term[0] == "br" and \
                    block.term[1] != name:
                forward[name] = block.term[1]

        def final(name):
            seen = set()
            while name in forward and name not in seen:
                seen.add(name)
                name = forward[name]
            return name

        for name in self.order:
            block = self.blocks[name]
            for s in block.succs():
                target = final(s)
                if target != s:
                    block.retarget(s, target)
        reachable = set(self.rpo())
        self.remove_unreachable(reachable)

    def reroute(self, source, old, new, stores):
        """Send ``source``'s edge to ``old`` to ``new`` instead, running
        ``stores`` on the way (in ``source`` itself when it branches
        unconditionally, else in a new block on the edge)."""
        block = self.blocks[source]
        stores = _code(stores)
        if not stores:
            block.retarget(old, new)
        elif block.term == ("br", old):
            block.body.extend(stores)
            block.term = ("br", new)
        else:
            block.retarget(old, self.new_block("edge", stores, ("br", new)))

    def dispatch(self, selector, targets, ids):
        """A new block (the head of a chain) that branches to ``targets``
        by the value of ``selector``."""
        if len(targets) == 1:
            return self.new_block("dispatch", [], ("br", targets[0]))
        following = targets[-1]
        for target in reversed(targets[:-1]):
            value, test = "%" + self.fresh("sel"), "%" + self.fresh("is")
            body = [f"  {value} = load i32, ptr {selector}, align 4",
                    f"  {test} = icmp eq i32 {value}, {ids[target]}"]
            following = self.new_block("dispatch", body, ("cbr", test, target, following))
        return following

    # Dominance and loops ---------------------------------------------------

    def rpo(self):
        seen, post = set(), []
        stack = [(self.entry, iter(self.blocks[self.entry].succs()))]
        seen.add(self.entry)
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(self.blocks[s].succs())))
                    break
            else:
                stack.pop()
                post.append(node)
        return post[::-1]

    def dominators(self, order):
        index = {n: i for i, n in enumerate(order)}
        preds = self.preds()
        idom = {self.entry: self.entry}
        changed = True
        while changed:
            changed = False
            for n in order[1:]:
                new = None
                for p in preds[n]:
                    if p not in idom:
                        continue
                    if new is None:
                        new = p
                        continue
                    a, b = p, new
                    while a != b:
                        while index[a] > index[b]:
                            a = idom[a]
                        while index[b] > index[a]:
                            b = idom[b]
                    new = a
                if idom.get(n) != new:
                    idom[n] = new
                    changed = True
        return idom

    @staticmethod
    def dominates(idom, a, b):
        while True:
            if a == b:
                return True
            parent = idom[b]
            if parent == b:
                return False
            b = parent

    def find_loops(self):
        """Natural loops by header; raises on irreducible control flow."""
        order = self.rpo()
        self.remove_unreachable(set(order))
        idom = self.idom = self.dominators(order)
        index = {n: i for i, n in enumerate(order)}
        preds = self.preds()
        loops = {}
        for u in order:
            for h in self.blocks[u].succs():
                if index[h] > index[u]:
                    continue
                if not self.dominates(idom, h, u):
                    raise UnsupportedError(
                        "the kernel's control flow is irreducible (a loop with two "
                        "entries); Vulkan cannot express it")
                body = loops.setdefault(h, {h})
                stack = [u]
                while stack:
                    n = stack.pop()
                    if n not in body:
                        body.add(n)
                        stack.extend(preds[n])
        return {h: _Loop(h, blocks) for h, blocks in loops.items()}

    def remove_unreachable(self, reachable):
        if len(reachable) != len(self.order):
            self.order = [n for n in self.order if n in reachable]
            self.blocks = {n: self.blocks[n] for n in self.order}

    # Loops -----------------------------------------------------------------

    def normalise_loops(self):
        """Give every loop one latch and a dedicated exit block, which every
        exit reaches directly (a break) or through the latch.

        Outer loops go first: their exits (a ``return`` from an inner loop)
        then lead to the outer latch, which lies inside every inner loop's
        parent, so that normalising an inner loop never touches an outer
        loop's edges.
        """
        done = {}
        while True:
            loops = self.find_loops()
            pending = [lp for h, lp in loops.items() if h not in done]
            if not pending:
                break
            loop = max(pending, key=lambda lp: len(lp.blocks))
            innermost = not any(h != loop.header and h in loop.blocks for h in loops)
            done[loop.header] = self._normalise(loop, innermost)
        loops = self.find_loops()
        for h, loop in loops.items():
            loop.latch, loop.exit = done[h]
        return loops

    def _normalise(self, loop, innermost):
        header, inside = loop.header, loop.blocks
        preds = self.preds()
        latches = [p for p in preds[header] if p in inside]
        exits, targets = [], []
        for u in self.order:
            if u in inside:
                for v in self.blocks[u].succs():
                    if v not in inside:
                        exits.append((u, v))
                        if v not in targets:
                            targets.append(v)
        if len(latches) == 1 and len(exits) == 1 and \
                self.dominates(self.idom, exits[0][0], latches[0]):
            # Already a loop with one exit test that runs every iteration (a
            # counted or a while loop): only the exit block is added.
            exiting, target = exits[0]
            dedicated = self.new_block("exit", [], ("br", target))
            self.blocks[exiting].retarget(target, dedicated)
            self.join_after(header, inside, preds, dedicated, target)
            return latches[0], dedicated
        if not exits:
            return self._endless(header, latches)
        selector = self.alloca("exitsel", "i32") if len(targets) > 1 else None
        ids = {v: k for k, v in enumerate(targets)}
        after = self.dispatch(selector, targets, ids)
        dedicated = self.new_block("exit", [], ("br", after))
        if self.breaks and innermost and len(exits) <= _MAX_BREAKS:
            latch = self._breaks(header, latches, exits, ids, selector, dedicated)
        else:
            latch = self._exit_flag(header, latches, exits, ids, selector, dedicated)
        self.join_after(header, inside, preds, dedicated, after)
        return latch, dedicated

    def _endless(self, header, latches):
        """A loop without an exit (``while True`` without a break, or one the
        optimiser proved endless) still needs a merge block: its latch leaves
        for the return block when there are no workgroups along x, which
        never holds but no compiler can fold. Returns the latch and the exit
        block."""
        if self.exit not in self.blocks:
            # Nothing returns: the return block was dropped as unreachable.
            self.blocks[self.exit] = self.return_block
            self.order.append(self.exit)
        dedicated = self.new_block("exit", [], ("br", self.exit))
        groups, never = "%" + self.fresh("groups"), "%" + self.fresh("never")
        latch = self.new_block("latch", [
            f"  {groups} = call i32 @{markers.PUSH}i32(i32 0)",
            f"  {never} = icmp eq i32 {groups}, 0"], ("cbr", never, dedicated, header))
        self.uses_push = True
        for u in latches:
            self.reroute(u, header, latch, [])
        return latch, dedicated

    def _breaks(self, header, latches, exits, ids, selector, dedicated):
        """Make every exit a break: a branch straight to the loop's merge
        block (after setting the selector). GPU compilers turn a break into
        a predicated exit; a flag tested in the latch instead costs a value
        and a branch that every lane runs every iteration. Returns the latch."""
        if len(latches) == 1 and self.blocks[latches[0]].term == ("br", header):
            latch = latches[0]
        else:
            latch = self.new_block("latch", [], ("br", header))
            for u in latches:
                self.reroute(u, header, latch, [])
        for u, v in exits:
            stores = [f"  store i32 {ids[v]}, ptr {selector}, align 4"] if selector else []
            self.reroute(u, v, dedicated, stores)
        return latch

    def _exit_flag(self, header, latches, exits, ids, selector, dedicated):
        """Send every exit and back edge to a new latch that leaves the loop
        when a flag says so. Returns the latch."""
        cont = self.alloca("cont", "i1")
        flag = "%" + self.fresh("cont")
        latch = self.new_block("latch", [f"  {flag} = load i1, ptr {cont}, align 1"],
                               ("cbr", flag, header, dedicated))
        for u in latches:
            self.reroute(u, header, latch, [f"  store i1 true, ptr {cont}, align 1"])
        for u, v in exits:
            stores = [f"  store i1 false, ptr {cont}, align 1"]
            if selector:
                stores.append(f"  store i32 {ids[v]}, ptr {selector}, align 4")
            self.reroute(u, v, latch, stores)
        return latch

    def join_after(self, header, inside, preds, exit_block, after):
        """Where values leave the loop, make its exit a join with a path
        that skips the loop, so that they reach their uses through phis.

        Lavapipe computes the instructions of a loop body for every lane
        while any lane still loops: a value used after the loop straight
        from the body holds what the last iteration computed, not what the
        lane had when it left (a driver bug). Through a phi after the loop
        each lane keeps its own value. The skip path's condition (no
        workgroups along x) never holds but no compiler can know that.
        """
        live = self.live_out(inside, [after])
        if not live:
            return
        zeroes = [f"  store {ty} zeroinitializer, ptr {a}" for a, ty in live.items()]
        join = self.new_block("join", [], ("br", after))
        skip = self.new_block("skip", zeroes, ("br", join))
        groups, never = "%" + self.fresh("groups"), "%" + self.fresh("never")
        guard = self.new_block("guard", [
            f"  {groups} = call i32 @{markers.PUSH}i32(i32 0)",
            f"  {never} = icmp eq i32 {groups}, 0"], ("cbr", never, skip, header))
        self.uses_push = True
        for p in preds[header]:
            if p not in inside:
                self.blocks[p].retarget(header, guard)
        self.blocks[exit_block].retarget(after, join)

    def live_out(self, inside, targets):
        """Allocas (of reg2mem) stored in the loop and loaded after it, with
        their types; handles and pointers stay as they are (a phi of them
        would need variable pointers, and they do not vary by lane)."""
        stored = {inst.operands[1].value for n in inside for inst in self.blocks[n].body
                  if inst.opcode == "store" and inst.operands[1].type == "ptr"}
        after, stack = set(), [t for t in targets]
        while stack:
            n = stack.pop()
            if n in after or n in inside:
                continue
            after.add(n)
            stack.extend(self.blocks[n].succs())
        loaded = {inst.operands[0].value for n in after for inst in self.blocks[n].body
                  if inst.opcode == "load" and inst.operands[0].type == "ptr"}
        return {a: self.alloca_types[a] for a in sorted(stored & loaded)
                if a in self.alloca_types and not self.alloca_types[a].startswith(("ptr", "target"))}

    # Acyclic regions -------------------------------------------------------

    def structure(self, loops):
        self.loops = loops
        # Blocks that already are a merge block, a loop header or a
        # continue target: a selection that ends there gets a new block.
        self.claimed = {lp.exit for lp in loops.values()} | set(loops) | \
            {lp.latch for lp in loops.values()} | {self.exit}
        self.process(self.entry, self.exit, None)
        for loop in loops.values():
            self.process(loop.header, loop.latch, loop.header)

    def dag_succs(self, node, stop, level):
        if node == stop:
            return []
        if node in self.loops and node != level:
            return [self.loops[node].exit]
        succs = self.blocks[node].succs()
        if level is not None:
            # A branch to the loop's merge block is a break, not a branch of
            # the loop body. A block that only breaks ends its path through
            # the body: for finding merge blocks it leads to the region's
            # end, so a selection with a breaking arm merges where its other
            # arms meet that end.
            succs = [s for s in succs if s != self.loops[level].exit] or [stop]
        return succs

    def region(self, start, stop, level):
        """Topological order of the region from ``start`` to ``stop``."""
        seen, post = {start}, []
        stack = [(start, iter(self.dag_succs(start, stop, level)))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in seen:
                    seen.add(s)
                    stack.append((s, iter(self.dag_succs(s, stop, level))))
                    break
            else:
                stack.pop()
                post.append(node)
        return post[::-1]

    def ipdom(self, start, stop, level):
        order = self.region(start, stop, level)
        if stop not in order:
            raise AssertionError(f"{start} does not reach {stop}")
        ipdom, depth = {stop: None}, {stop: 0}
        for node in reversed(order):
            if node == stop:
                continue
            succs = self.dag_succs(node, stop, level)
            a = succs[0]
            for b in succs[1:]:
                while a != b:
                    if depth[a] >= depth[b]:
                        a = ipdom[a]
                    else:
                        b = ipdom[b]
            ipdom[node] = a
            depth[node] = depth[a] + 1
        return ipdom[start], order

    def reach(self, start, stop, level):
        if start == stop:
            return set()
        seen, stack = {start}, [start]
        while stack:
            n = stack.pop()
            for s in self.dag_succs(n, stop, level):
                if s != stop and s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    def process(self, node, stop, level):
        """Structure the region from ``node`` (which dominates it) to ``stop``."""
        while node != stop:
            succs = self.dag_succs(node, stop, level)
            if len(succs) == 1:
                node = succs[0]
                continue
            merge, order = self.ipdom(node, stop, level)
            arms = {s: self.reach(s, merge, level) for s in succs}
            owners = {}
            for s, blocks in arms.items():
                for n in blocks:
                    owners.setdefault(n, []).append(s)
            shared = {n for n, o in owners.items() if len(o) > 1}
            if shared:
                merge = self.join(node, merge, arms, shared, order, level)
            else:
                merge = self.claim(node, merge, arms, level)
            for s in self.dag_succs(node, stop, level):
                if s != merge:
                    self.process(s, merge, level)
            node = merge

    def _edges_from(self, nodes, level):
        """The blocks among region ``nodes`` whose own edges are region edges:
        a nested loop stands for its blocks, and its header's edges are the
        loop's own."""
        return [n for n in nodes if n not in self.loops or n == level]

    def claim(self, header, merge, arms, level):
        """Make ``merge`` the merge block of ``header`` alone."""
        if merge not in self.claimed:
            self.claimed.add(merge)
            return merge
        fresh = self.new_block("merge", [], ("br", merge))
        for n in self._edges_from({header}.union(*arms.values()), level):
            if merge in self.blocks[n].succs():
                self.blocks[n].retarget(merge, fresh)
        self.claimed.add(fresh)
        return fresh

    def join(self, header, merge, arms, shared, order, level):
        """Send every path from ``header`` that enters a shared block (or
        the merge) to one new block that dispatches to where it was going."""
        private = {header}.union(*arms.values()) - shared
        position = {n: i for i, n in enumerate(order)}
        edges, targets = [], []
        for n in sorted(self._edges_from(private, level), key=position.get):
            for s in self.blocks[n].succs():
                if s in shared or s == merge:
                    edges.append((n, s))
                    if s not in targets:
                        targets.append(s)
        targets.sort(key=position.get)
        selector = self.alloca("joinsel", "i32")
        ids = {t: k for k, t in enumerate(targets)}
        head = self.dispatch(selector, targets, ids)
        for n, s in edges:
            self.reroute(n, s, head, [f"  store i32 {ids[s]}, ptr {selector}, align 4"])
        self.claimed.add(head)
        return head


_ELEMENT_CALLEES = ("@llvm.spv.resource.getpointer.", f"@{markers.ELEMENT}")


def _is_handle(inst):
    """Whether ``inst`` makes a buffer handle."""
    return (inst.opcode == "call" and inst.type.startswith("target(")
            and inst.callee.startswith("@llvm.spv.resource.handlefrombinding"))


def _element_pointer(inst):
    """Whether ``inst`` computes an element pointer of a buffer or a global."""
    return (inst.opcode == "call" and inst.type.startswith("ptr addrspace(")
            and inst.callee.startswith(_ELEMENT_CALLEES))


def _pointer_choice(inst, opcode):
    """Whether ``inst`` is a ``phi`` or ``select`` (``opcode``) of element pointers."""
    if inst.opcode != opcode:
        return False
    ty = inst.type if opcode == "phi" else inst.operands[1].type
    return (ty or "").startswith("ptr addrspace(")


def _call(name, like, operands):
    """A call of ``like``'s callee named ``name`` with ``operands``."""
    return ir.Instruction("call", [ir.Operand(o.type, o.value, o.attrs) for o in operands],
                          name=name, type=like.type, callee=like.callee)


class _PointerLocaliser:
    """Keep every element pointer in the block that uses it.

    Logical SPIR-V cannot keep a pointer in a variable or a phi, but LLVM's
    optimiser merges equal element-pointer computations across blocks (a
    phi of two pointers into one buffer, one computation hoisted for
    several blocks), and reg2mem would then store the pointer in memory.
    This pass turns a phi or select of element pointers into a phi or
    select of their indices with one element-pointer call after it, and
    repeats an element-pointer call in every other block that uses it.
    Buffer handles move to the entry block, which dominates every use.
    """

    def __init__(self, function):
        self.function = function
        self.counter = 0

    def fresh(self, name):
        self.counter += 1
        return f"{name}.nv{self.counter}"

    def run(self):
        self.hoist_handles()
        while self.merge_phis():
            pass
        self.split_selects()
        self.repeat_calls()

    def hoist_handles(self):
        """Move the handles to the entry block, one per binding.

        LLVM may duplicate a handle's call along with a block and join the
        copies in a phi; a phi of handles has no SPIR-V form, so copies
        become the first call and phis of one handle become that handle."""
        handles, same = {}, {}
        for inst in self.function.instructions():
            if _is_handle(inst):
                call = ir.Instruction("call", inst.operands, type=inst.type,
                                      callee=inst.callee, tail=inst.tail)
                same[inst.name] = handles.setdefault(str(call), (inst.name, call))[0]
        if not handles:
            return
        phis = [inst for inst in self.function.instructions() if inst.opcode == "phi"
                and (inst.type or "").startswith('target("spirv.VulkanBuffer"')]
        changed = True
        while changed:
            changed = False
            for phi in phis:
                if phi.name not in same:
                    incoming = {same.get(str(o.value), str(o.value)) for o in phi.operands}
                    incoming -= {"undef", "poison", phi.name}
                    if len(incoming) == 1 and incoming <= set(same.values()):
                        same[phi.name] = incoming.pop()
                        changed = True
        for block in self.function.blocks:
            block.instructions = [inst for inst in block.instructions
                                  if not (_is_handle(inst) or inst.name in same)]
            for inst in block.instructions:
                for holder, value in inst.values():
                    if value in same:
                        holder.value = same[value]
        calls = []
        for name, call in handles.values():
            call.name = name
            calls.append(call)
        self.function.blocks[0].instructions[0:0] = calls

    def calls(self):
        return {inst.name: inst for inst in self.function.instructions()
                if _element_pointer(inst)}

    def merge_phis(self):
        """Rewrite one phi of element pointers whose incoming values are all
        element-pointer calls on one object; return whether it did."""
        calls = self.calls()
        for block in self.function.blocks:
            for i, inst in enumerate(block.instructions):
                if not _pointer_choice(inst, "phi"):
                    continue
                values = [str(o.value) for o in inst.operands]
                known = [calls.get(v) for v in values]
                if any(k is None and v not in ("undef", "poison")
                       for k, v in zip(known, values)):
                    continue
                defined = [k for k in known if k is not None]
                if not defined:
                    continue
                shape = self._shape(defined[0])
                if any(self._shape(k) != shape for k in defined):
                    raise UnsupportedError(f"a pointer may point into two different arrays: "
                                           f"{inst}")
                indices = []
                for j in range(shape[2]):
                    index = ir.Instruction(
                        "phi", [ir.Operand(None, k.operands[1 + j].value if k is not None
                                           else "undef") for k in known],
                        name=self.fresh(f"{inst.name}.index{j}"), type="i32",
                        labels=list(inst.labels))
                    indices.append(index)
                del block.instructions[i]
                # The element pointer itself goes after the block's last phi.
                at = i
                while at < len(block.instructions) and block.instructions[at].opcode == "phi":
                    at += 1
                block.instructions[at:at] = [_call(inst.name, defined[0], [
                    defined[0].operands[0], *(ir.Operand("i32", p.name) for p in indices)])]
                block.instructions[i:i] = indices
                return True
        for inst in self.function.instructions():
            if _pointer_choice(inst, "phi"):
                raise UnsupportedError(f"a pointer phi Vulkan cannot express: {inst}")
        return False

    @staticmethod
    def _shape(call):
        return call.callee, str(call.operands[0]), len(call.operands) - 1

    def split_selects(self):
        """A select of two element pointers becomes, at each load through
        it, a select of two loads; the pointers may be in two arrays."""
        selects = {}
        for block in self.function.blocks:
            selects.update((inst.name, inst) for inst in block.instructions
                           if _pointer_choice(inst, "select"))
            block.instructions = [inst for inst in block.instructions
                                  if inst.name not in selects]
        if not selects:
            return
        for block in self.function.blocks:
            out = []
            for inst in block.instructions:
                if inst.opcode == "load" and inst.operands[0].value in selects:
                    cond, a, b = selects[inst.operands[0].value].operands
                    loads = []
                    for side, pointer in (("a", a), ("b", b)):
                        load = ir.Instruction("load", [ir.Operand(pointer.type, pointer.value)],
                                              name=self.fresh(f"{inst.name}.{side}"),
                                              flags=list(inst.flags), type=inst.type,
                                              tail=inst.tail)
                        loads.append(load)
                    out += loads + [ir.instruction(
                        f"{inst.name} = select {cond}, {inst.type} {loads[0].name}, "
                        f"{inst.type} {loads[1].name}")]
                    continue
                if any(value in selects for _, value in inst.values()):
                    raise UnsupportedError(f"a pointer select Vulkan cannot express: {inst}")
                out.append(inst)
            block.instructions = out

    def repeat_calls(self):
        calls = self.calls()
        home = {}
        for block in self.function.blocks:
            for inst in block.instructions:
                if inst.name in calls:
                    home[inst.name] = block.label
        for block in self.function.blocks:
            out = []
            for inst in block.instructions:
                copies = {}
                for holder, value in list(inst.values()):
                    if value in calls and value != inst.name and home[value] != block.label:
                        if value not in copies:
                            call = calls[value]
                            copies[value] = self.fresh(value)
                            out.append(_call(copies[value], call, call.operands))
                        holder.value = copies[value]
                out.append(inst)
            block.instructions = out


def _run(module, tm, add_passes):
    pto = llvm.create_pipeline_tuning_options(speed_level=0)
    pb = llvm.create_pass_builder(tm, pto)
    pm = llvm.create_new_module_pass_manager()
    add_passes(pm)
    pm.run(module, pb)


def structurize(module, tm, entry="main", breaks=True, instrument=None):
    """Restructure the control flow of ``entry`` in ``module``.

    Args:
        module: An optimised :class:`llvmlite.binding.ModuleRef` in which
            everything is inlined into ``entry``.
        tm: The SPIR-V target machine.
        breaks: Let innermost loops with few exits leave by breaks; False
            sends every exit through a flag in the loop's latch.
        instrument: Called with the structured function (in ``reg2mem``
            form) and its loops, if it has any, to add code that keeps the
            structure (:func:`numba_vulkan.codegen.looplimit.count_trips`);
            returns the module-level declarations that code needs.

    Returns:
        A new module whose ``entry`` has structured control flow.
    """
    _run(module, tm, lambda pm: (pm.add_lower_switch_pass(),
                                 pm.add_instruction_namer_pass()))
    model = ir.parse(str(module))
    _PointerLocaliser(_function(model, entry)).run()
    module = llvm.parse_assembly(str(model))
    _run(module, tm, lambda pm: pm.add_register_to_memory_pass())
    model = ir.parse(str(module))
    kernel = _function(model, entry)
    function = _Function(kernel, breaks)
    loops = function.normalise_loops()
    function.structure(loops)
    declarations = [f"declare i32 @{markers.PUSH}i32(i32)"] if function.uses_push else []
    if instrument is not None and loops:
        declarations += instrument(function, loops)
    kernel.blocks = function.model()
    for declaration in declarations:
        item = ir.parse(declaration).items[0]
        if item.name not in model.globals and all(f.name != item.name
                                                  for f in model.functions):
            model.add(item, before=kernel)
    result = llvm.parse_assembly(str(model))
    result.verify()
    # No instruction combining here: it would fold the computations after
    # a loop into the phis that join_after placed there.
    _run(result, tm, lambda pm: (pm.add_sroa_pass(), pm.add_dead_code_elimination_pass()))
    check_integer_widths(str(result))
    return result


def _function(model, entry):
    """The definition of ``entry`` in the IR model ``model``."""
    function = next((f for f in model.functions if f.name == f"@{entry}"), None)
    if function is None or function.blocks is None:
        raise UnsupportedError(f"the module has no function {entry}")
    return function


def _odd_integer(word):
    """Whether ``word`` is an integer type Vulkan has no type for."""
    return word[:1] == "i" and word[1:].isdigit() and word[1:] not in _INT_WIDTHS


#: Punctuation that separates the words of IR text, as spaces.
_SEPARATORS = str.maketrans("()[]{}<>,=*", " " * 11)


def check_integer_widths(text):
    """Raise if the IR uses an integer type that Vulkan has no type for."""
    if not any(_odd_integer(w) for w in text.translate(_SEPARATORS).split()):
        # Only a word that could be one is looked at again, line by line.
        return
    for line in text.splitlines():
        if line.lstrip().startswith((";", "declare", "!")):
            continue
        odd = next((w for w in ir.words(line) if _odd_integer(w)), None)
        if odd is not None:
            raise UnsupportedError(f"the optimised kernel uses the integer type {odd}, "
                                   f"which Vulkan cannot express: {line.strip()}")
