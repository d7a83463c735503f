"""The source of one fused function (graph/codegen.py compiles and runs it).

:class:`Gen` walks the expression trees of the names an evaluation needs, in topological
order, and writes one straight-line Python function; equal subexpressions (same operator
on the same registers) are computed once, across nodes too. Variants (see codegen.py):
scalar (floats, real branches, raises at a non-finite value), array (numpy, every place a
non-finite value could be swallowed is checked and recorded per row) and fast (array code
without those checks, for callers that only look at the outputs: ``check=False``).

Only checked trees reach here: names become argument positions, numbers go through
``repr(float)``; no file text is ever part of the source.
"""
from __future__ import annotations

import math

from .compile import text

_CMP_S = {"==": "_s_eq", "!=": "_s_ne", "<": "_s_lt", "<=": "_s_le", ">": "_s_gt", ">=": "_s_ge"}
_CMP_A = {"==": "_ss_eq", "!=": "_ss_ne", "<": "_ss_lt", "<=": "_ss_le", ">": "_ss_gt",
          ">=": "_ss_ge"}
_UN_S = {"sqrt": "_sqrt", "exp": "_exp", "log": "_log", "abs": "abs", "ceil": "_s_ceil",
         "floor": "_s_floor", "sign": "_s_sign"}
_UN_A = {"sqrt": "np.sqrt", "exp": "np.exp", "log": "np.log", "abs": "np.abs",
         "ceil": "_ss_ceil", "floor": "_ss_floor", "sign": "np.sign"}
#: operators that can turn a non-finite operand into a finite (or boolean) result
_ABSORB = {"min", "max", "cmp", "^", "exp", "mod"}


def _lit(v: float) -> str:
    if math.isnan(v):
        return "_nan"
    if math.isinf(v):
        return "_inf" if v > 0 else "(-_inf)"
    s = repr(float(v))
    return f"({s})" if v < 0 else s


class _Scope:
    """Value numbering table; a branch (scalar code) gets a child that forgets on exit."""

    def __init__(self, parent=None):
        self.parent, self.d = parent, {}

    def get(self, k):
        s = self
        while s is not None:
            if k in s.d:
                return s.d[k]
            s = s.parent
        return None


class _Live:
    """Rows where a branch is taken (array code): parent mask and (condition, taken) pairs."""

    def __init__(self, parent, conds):
        self.parent, self.conds, self.reg = parent, conds, None



class Gen:
    def __init__(self, array: bool, deps_of, trees, checks: bool = True):
        self.array = array
        self.checks = checks  # False: the fast variant (no non-finite checks)
        self.deps_of, self.trees = deps_of, trees
        self.lines: list[tuple[int, str, str | None, list[str]]] = []
        self.ind = 1
        self.n = 0
        self.sites: list[tuple[str, str | None]] = []
        self.top_checked: set[str] = set()
        self.deferred: list[str] = []

    def new(self, prefix="t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def put(self, line, define=None, uses=()):
        self.lines.append((self.ind, line, define, [u for u in uses if u and u[0] in "tm"]))

    def value(self, scope, key, expr, uses):
        r = scope.get(key)
        if r is None:
            r = self.new()
            self.put(f"{r} = {expr}", r, uses)
            scope.d[key] = r
        return r

    def check(self, x, scope, live, node, what):
        if not self.checks or x[:1] != "t" or x in self.top_checked:
            return
        if what is None and not self.array:
            # scalar code checks node values once, at the end (one sum); a non-finite node
            # value used inside a later formula is caught there too, so uses need no check
            self.top_checked.add(x)
            self.deferred.append(x)
            return
        if self.array:
            key = ("chk", x, id(live) if live is not None else None)
        else:
            key = ("chk", x)
        if scope.get(key) is not None:
            return
        scope.d[key] = True
        if self.array and live is None:
            self.top_checked.add(x)
        self.sites.append((node, what))
        site = len(self.sites) - 1
        if self.array:
            m = self.mask(live)
            self.put(f"if not _af({x}): _nf(B, {site}, {x}, {m or None})", None, [x, m or ""])
        else:
            self.put(f"if not _isf({x}): raise _NF({site})", None, [x])

    def mask(self, live):
        if live is None:
            return None
        if live.reg is None:
            parts = [self.mask(live.parent)] if live.parent is not None else []
            parts += [c if taken else f"np.logical_not({c})" for c, taken in live.conds]
            expr = parts[0]
            for p in parts[1:]:
                expr = f"np.logical_and({expr}, {p})"
            live.reg = self.new("m")
            self.put(f"{live.reg} = {expr}", live.reg, [c for c, _ in live.conds]
                     + ([live.parent.reg] if live.parent is not None else []))
        return live.reg

    # ------------------------------------------------------------------ trees
    def emit(self, t, args, scope, live, node, deps):
        op, a = t[0], t[1:]
        if op == "n":
            return _lit(a[0])
        if op == "a":
            return args[a[0]]
        if op == "true":
            return "True"
        if op == "false":
            return "False"
        if op == "pw":
            return self.piecewise(a, args, scope, live, node, deps)
        operands = a[1:] if op == "cmp" else a
        sub = [self.emit(x, args, scope, live, node, deps) for x in operands]
        if op in _ABSORB or op == "/":
            first = 1 if op == "/" else 0  # a non-finite numerator propagates; a divisor does not
            where = None
            for x, k in zip(sub[first:], operands[first:]):
                if x[:1] == "t":
                    where = where or text(t, deps)
                    self.check(x, scope, live, node, (text(k, deps), where))
        key = (op, a[0] if op == "cmp" else None, *sub)
        if op == "+":
            expr = " + ".join(sub)
        elif op == "*":
            expr = " * ".join(sub)
        elif op == "/":
            expr = f"{sub[0]} / {sub[1]}"
        elif op == "^":
            expr = f"{sub[0]} ** {sub[1]}"
        elif op in _UN_S:
            expr = f"{(_UN_A if self.array else _UN_S)[op]}({sub[0]})"
        elif op == "mod":
            expr = f"{'_ss_mod' if self.array else '_s_mod'}({sub[0]}, {sub[1]})"
        elif op == "cmp":
            expr = f"{(_CMP_A if self.array else _CMP_S)[a[0]]}({sub[0]}, {sub[1]})"
        elif op in ("min", "max"):
            if self.array:
                fn = "np.minimum" if op == "min" else "np.maximum"
                expr = sub[-1]
                for x in reversed(sub[:-1]):
                    expr = f"{fn}({x}, {expr})"
            else:
                expr = f"{op}({', '.join(sub)})"
        elif op in ("and", "or"):
            if self.array:
                fn = "np.logical_and" if op == "and" else "np.logical_or"
                expr = sub[-1]
                for x in reversed(sub[:-1]):
                    expr = f"{fn}({x}, {expr})"
            else:
                expr = "(" + f" {op} ".join(sub) + ")"
        elif op == "winner":
            expr = f"{'_winner' if self.array else '_s_winner'}({', '.join(sub)})"
        elif op == "not":
            expr = f"np.logical_not({sub[0]})" if self.array else f"(not {sub[0]})"
        else:  # check_tree refuses anything else
            raise ValueError(f"unknown operator {op!r}")
        return self.value(scope, key, expr, sub)

    def piecewise(self, pieces, args, scope, live, node, deps):
        if self.array:
            conds, vals, before = [], [], []
            for v, c in pieces:
                cl = _Live(live, list(before)) if before else live
                cr = None if c[0] == "true" else self.emit(c, args, scope, cl, node, deps)
                vl = _Live(live, before + [(cr, True)]) if cr is not None else cl
                vals.append(self.emit(v, args, scope, vl, node, deps))
                conds.append(cr)
                if cr is None:
                    break
                before = before + [(cr, False)]
            out = vals[-1] if conds[-1] is None else "_nan"
            pairs = list(zip(conds, vals))
            if conds[-1] is None:
                pairs = pairs[:-1]
            for c, v in reversed(pairs):
                out = f"_where({c}, {v}, {out})"
            r = self.new()
            self.put(f"{r} = {out}", r, [x for x in conds + vals if x])
            return r
        r = self.new()
        depth = 0
        sc = scope
        for v, c in pieces:
            if c[0] == "true":
                x = self.emit(v, args, _Scope(sc), None, node, deps)
                self.put(f"{r} = {x}", r, [x])
                break
            cr = self.emit(c, args, sc, None, node, deps)
            self.put(f"if {cr}:")
            self.ind += 1
            x = self.emit(v, args, _Scope(sc), None, node, deps)
            self.put(f"{r} = {x}", r, [x])
            self.ind -= 1
            self.put("else:")
            self.ind += 1
            depth += 1
            sc = _Scope(sc)
        else:
            self.put(f"{r} = _nan", r)
        self.ind -= depth
        return r

    # --------------------------------------------------------------- program
    def program(self, order, leaves, keep, bool_nodes) -> str:
        reg = {n: f"L{i}" for i, n in enumerate(leaves)}
        scope = _Scope()
        for name in order:
            if name in reg:
                continue
            deps = self.deps_of[name]
            v = self.emit(self.trees[name], [reg[d] for d in deps], scope, None, name, deps)
            reg[name] = v
            if name not in bool_nodes:
                self.check(v, scope, None, name, None)
        ret = [reg[n] for n in keep]
        head = "def _f(B, A):" if self.array else "def _f(A):"
        body = []
        if leaves:
            body.append("    " + ", ".join(f"L{i}" for i in range(len(leaves))) + ", = A")
        lines = self.lines
        if self.deferred:
            lines = lines + [(1, f"if not _isf(_sum(({''.join(x + ', ' for x in self.deferred)}))): "
                                 f"raise _NF(-1)", None, [])]
        if self.array:
            lines = _with_dels(lines, set(ret))
        body += ["    " * ind + line for ind, line, _, _ in lines]
        body.append("    return (" + "".join(f"{x}, " for x in ret) + ")")
        return "\n".join([head] + body) + "\n"


def _with_dels(lines, keep):
    last: dict[str, int] = {}
    for i, (_, _, define, uses) in enumerate(lines):
        for u in uses:
            last[u] = i
        if define is not None:
            last.setdefault(define, i)
    dels: dict[int, list[str]] = {}
    for r, i in last.items():
        if r not in keep:
            dels.setdefault(i, []).append(r)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i in dels:
            out.append((line[0], "del " + ", ".join(sorted(dels[i])), None, []))
    return out
