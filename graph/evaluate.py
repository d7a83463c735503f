"""Numeric evaluation of a library: one fused, generated function per set of outputs.

The same compiled model evaluates one configuration (scalars, through plain-float code)
or many (numpy arrays, broadcast together). Values are in coherent base units; a
categorical input is carried as the index of its choice. Spreadsheet semantics
(``ceil``/``floor`` on 15 significant digits, comparisons and MOD equal within 2^-48)
live in :mod:`flopsheet.spreadsheet`; the code generation in :mod:`flopsheet.codegen`.

Non-finite values are refused where a spreadsheet shows an error (#DIV/0!, #NUM!,
Err:502): a node's value, and any intermediate a min/max, comparison, division, power,
exp or MOD could swallow into a finite result. Branches of ``if_``/``select`` not taken
are not evaluated (scalars) or not checked (arrays), as in a spreadsheet. With
``on_nonfinite="mask"`` an array evaluation keeps going and returns a per-row validity
mask and the reason for each invalid row (``Result.valid``, ``Result.reasons``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from . import codegen
from .compile import compile_expr, lower  # noqa: F401 - compile_expr: public here too
from .errors import EvaluationError, InputValueError, UnknownNameError
from .library import Library, check_value, number_value
from .names import suggest
from .spreadsheet import (ss_ceil, ss_eq, ss_floor, ss_ge, ss_gt, ss_le, ss_lt,  # noqa: F401
                          ss_mod, ss_ne)

NONFINITE_MODES = ("raise", "mask")
_SCALAR_TYPES = frozenset({float, int, bool, np.float64, np.int64, np.float32, np.int32,
                           np.bool_})
_MAX_ROWS_SHOWN = 5


@dataclass
class Result:
    """Values of every evaluated name (inputs, overrides and nodes).

    With ``on_nonfinite="mask"``: ``valid`` (bool, the broadcast shape of the inputs) is
    False on rows where some value was not finite, and ``reasons`` (same shape, text) says
    which node and where; both are None otherwise.
    """

    values: dict[str, Any]
    overridden: frozenset[str]
    valid: Any = None
    reasons: Any = None

    def __getitem__(self, name):
        return self.values[name]

    def scalar(self, name) -> float:
        return float(np.asarray(self.values[name]))


def _check_shapes(names, arrays, shapes=None) -> tuple:
    """Arrays of configurations pair element by element: their shapes must broadcast (the
    common shape is returned)."""
    try:
        return np.broadcast_shapes(*(shapes if shapes is not None
                                     else [np.shape(a) for a in arrays]))
    except ValueError:
        sized = [(n, np.shape(a)) for n, a in zip(names, arrays) if np.ndim(a)]
        first = sized[0]
        other = next(x for x in sized if x[1] != first[1])
        raise InputValueError(f"{len(np.ravel(np.empty(other[1])))} values, but `{first[0]}` "
                              f"has {len(np.ravel(np.empty(first[1])))}: lists are evaluated "
                              f"element by element and need one length (a grid crosses them: "
                              f"--set on the command line)", node=other[0]) from None


class Model:
    """A library compiled for evaluation (compiled once per library and reused)."""

    def __new__(cls, lib: Library):
        cached = getattr(lib, "_model", None)
        if isinstance(cached, cls):
            return cached
        model = super().__new__(cls)
        lib._model = model
        return model

    def __init__(self, lib: Library):
        if getattr(self, "_programs", None) is not None:
            return  # already compiled
        self.lib = lib
        self._programs: dict[tuple, codegen.Program] = {}
        self._defaults = self.defaults()
        self._bool = frozenset(n for n, node in lib.nodes.items() if node.is_bool)
        self._choice = frozenset(n for n, i in lib.inputs.items() if i.is_choice)
        self._tree_cache: dict[str, list] | None = None
        self._known = frozenset(lib.inputs) | frozenset(lib.nodes)

    @property
    def _trees(self) -> dict[str, list]:
        """Each node's expression tree (graph/compile.py), loaded or lowered on first use."""
        if self._tree_cache is None:
            self._tree_cache = _load_trees(self.lib)
        return self._tree_cache

    @property
    def _fns(self):
        """Per-node numpy functions (lambdify), for tools that evaluate one node at a time."""
        fns = getattr(self, "_node_fns", None)
        if fns is None:
            fns = self._node_fns = {n: compile_expr(self.lib.nodes[n].deps, self.lib.nodes[n].expr)
                                    for n in self.lib.order}
        return fns

    # ------------------------------------------------------------------ values
    def encode(self, name: str, value, *, file=None, line=None) -> Any:
        """One user value -> its numeric form (coherent units, choice index); checks it."""
        lib = self.lib
        if name not in lib:
            raise UnknownNameError(f"unknown name `{name}`" + suggest(name, lib.names()),
                                   file=file, line=line, node=name)
        item = lib.item(name)
        many = isinstance(value, (list, tuple, np.ndarray))
        vals = list(np.asarray(value).ravel()) if many else [value]
        if name in lib.inputs and lib.inputs[name].is_choice:
            choices = lib.inputs[name].choices
            codes = []
            for v in vals:
                if isinstance(v, (np.integer, int)) and not isinstance(v, bool) and many \
                        and 0 <= v < len(choices):
                    codes.append(int(v))  # already encoded (arrays from sweeps)
                    continue
                if not isinstance(v, str) or v not in choices:
                    raise InputValueError(f"`{v}` is not a choice of `{name}` "
                                          f"(choices: {', '.join(choices)})", file=file,
                                          line=line, node=name)
                codes.append(choices.index(v))
            return np.asarray(codes, dtype=np.int64).reshape(np.shape(value)) if many else codes[0]
        if name in lib.nodes and item.is_bool:
            raise InputValueError(f"`{name}` is a condition and cannot be overridden", file=file,
                                  line=line, node=name)
        if many:
            arr = np.asarray([number_value(v, item.dim, file=file, line=line, node=name)
                              if not isinstance(v, (float, int, np.floating, np.integer))
                              else float(v) for v in vals], dtype=float)
            arr = arr.reshape(np.shape(value))
            bad = ~np.isfinite(arr)
            if bad.any():
                i = int(np.flatnonzero(bad.ravel())[0])
                raise InputValueError(f"value #{i} is not finite", file=file, line=line, node=name)
            if name in lib.inputs:
                self._check_array(lib.inputs[name], arr, file, line)
            return arr
        x = number_value(value, item.dim, file=file, line=line, node=name)
        if name in lib.inputs:
            check_value(lib.inputs[name], x, file=file, line=line)
        return x

    def _check_array(self, inp, arr, file, line):
        lo, hi = inp.bounds
        bad = np.zeros(arr.shape, dtype=bool)
        if lo is not None:
            bad |= arr < lo
        if hi is not None:
            bad |= arr > hi
        if inp.integer:
            bad |= arr != np.round(arr)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            check_value(inp, float(arr.ravel()[i]), file=file, line=line, what=f"value #{i}")

    def defaults(self) -> dict[str, Any]:
        return {n: (i.choices.index(i.default) if i.is_choice else i.default)
                for n, i in self.lib.inputs.items()}

    # ------------------------------------------------------------- evaluation
    def program(self, outputs: Iterable[str] | None = None, overridden=frozenset(),
                keep_intermediates: bool = True) -> codegen.Program:
        """The fused program for these outputs (memoized: the ancestor walk and code
        generation happen once per output set)."""
        outs = None if outputs is None else tuple(dict.fromkeys(outputs))
        key = (None if outs is None else frozenset(outs), frozenset(overridden),
               keep_intermediates or outs is None)
        prog = self._programs.get(key)
        if prog is None:
            prog = self._programs[key] = codegen.cached(
                _program_key(self.lib, key),
                lambda: self._build(outs, frozenset(overridden), key[2]), self._known)
        return prog

    def _build(self, outs, overridden, keep_all) -> codegen.Program:
        lib = self.lib
        if outs is None:
            need = set(lib.order)
        else:
            need, stack = set(), []
            for o in outs:
                lib.item(o)  # unknown names raise here
                stack.append(o)
            while stack:  # walk up the formulas, stopping at overridden nodes (leaves now)
                n = stack.pop()
                if n in need:
                    continue
                need.add(n)
                if n in lib.nodes and n not in overridden:
                    stack.extend(lib.nodes[n].deps)
        order = [n for n in lib.order if n in need and n not in overridden]
        leaves = list(dict.fromkeys(d for n in order for d in lib.nodes[n].deps
                                    if d not in lib.nodes or d in overridden))
        keep = order if keep_all else [o for o in outs if o in lib.nodes and o not in overridden]
        deps = {n: lib.nodes[n].deps for n in order}
        return codegen.build(order, self._trees, deps, leaves, keep, self._bool)

    def evaluate(self, values: Mapping[str, Any] | None = None, *,
                 outputs: Iterable[str] | None = None, check: bool = True,
                 keep_intermediates: bool = True, on_nonfinite: str = "raise") -> Result:
        """Evaluate with ``values`` (already encoded; missing inputs take defaults).

        A value given for a node overrides its formula. With ``outputs``, only what
        those names need is evaluated; with ``keep_intermediates=False`` as well, only
        the outputs are kept (intermediate arrays are freed after their last use).
        ``on_nonfinite``: "raise" (an :class:`EvaluationError` naming the node, the place
        in its formula, the inputs and the rows) or "mask" (see :class:`Result`).
        """
        if on_nonfinite not in NONFINITE_MODES:
            raise ValueError(f"on_nonfinite must be one of {NONFINITE_MODES}")
        lib = self.lib
        env: dict[str, Any] = dict(self._defaults)
        overridden = set()
        for k, v in (values or {}).items():
            if k in lib.nodes:
                overridden.add(k)
            elif k not in lib.inputs:
                raise UnknownNameError(f"unknown name `{k}`" + suggest(k, lib.names()), node=k)
            env[k] = v
        prog = self.program(outputs, overridden, keep_intermediates)
        args = [env[n] for n in prog.leaves]
        if set(map(type, args)) <= _SCALAR_TYPES:
            try:
                fargs = list(map(float, args))
                if check and not math.isfinite(sum(fargs)):  # one test; odd cases go below
                    raise codegen.NonFinite
                out = prog.scalar(fargs)
                vals = list(np.array(out, dtype=float)) if out else []
            except (ArithmeticError, ValueError, TypeError):
                pass  # the array code below evaluates again and says what went wrong
            else:
                for i in self._bool_positions(prog):
                    vals[i] = np.bool_(out[i])
                env.update(zip(prog.names, vals))
                return Result(env, frozenset(overridden), *self._all_valid(on_nonfinite, ()))
        aargs = []
        for n, a in zip(prog.leaves, args):
            a = np.float64(a) if isinstance(a, (int, float)) else np.asarray(a)
            if check and n not in self._choice and a.dtype != bool and not np.isfinite(a).all():
                i = int(np.flatnonzero(~np.isfinite(np.ravel(a)))[0]) if a.ndim else None
                raise InputValueError("value " + (f"#{i} " if i is not None else "")
                                      + "is not finite", node=n)
            aargs.append(a)
        shape = _check_shapes(prog.leaves, aargs, [a.shape for a in aargs]) if aargs else ()
        bad: list = []
        with np.errstate(all="ignore"):  # unchecked: the same values without the checks
            out = (prog.array if check else prog.fast)(bad, aargs)
        env.update(zip(prog.names, out))
        res = Result(env, frozenset(overridden))
        if check and bad:
            if on_nonfinite == "raise":
                site, mask, x = bad[0]
                raise self._error(prog, site, mask, x, values, outputs)
            return self._masked(res, prog, bad, shape)
        res.valid, res.reasons = self._all_valid(on_nonfinite if check else "raise", shape)
        return res

    def _bool_positions(self, prog) -> list[int]:
        pos = getattr(prog, "bool_positions", None)
        if pos is None:
            pos = prog.bool_positions = [i for i, n in enumerate(prog.names) if n in self._bool]
        return pos

    @staticmethod
    def _all_valid(mode, shape):
        if mode != "mask":
            return None, None
        return np.ones(shape, dtype=bool), np.full(shape, "", dtype=object)

    def _masked(self, res, prog, bad, shape) -> Result:
        valid = np.ones(shape, dtype=bool)
        reasons = np.full(shape, "", dtype=object)
        for site, mask, _ in bad:
            node, what = prog.sites[site]
            new = np.broadcast_to(mask, shape) & valid
            reasons[new] = f"{node}: " + (f"`{what[0]}` in `{what[1]}` is not finite" if what
                                          else "not finite")
            valid &= ~np.broadcast_to(mask, shape)
        res.valid, res.reasons = valid, reasons
        return res

    def _error(self, prog, site, mask, x, values, outputs) -> EvaluationError:
        name, what = prog.sites[site]
        node = self.lib.nodes[name]
        mask = np.asarray(mask)
        rows = np.flatnonzero(mask.ravel()) if mask.ndim else None
        i = int(rows[0]) if rows is not None else None
        full = self.evaluate(values, outputs=[name], check=False)
        shown = []
        for d in node.deps:
            v = np.asarray(full.values[d])
            if v.ndim and i is not None:
                v = np.broadcast_to(v, mask.shape).ravel()[i]
            shown.append(f"{d}={format_plain(self.lib, d, v)}")
        xv = np.asarray(x)
        bad = np.broadcast_to(xv, mask.shape).ravel()[i] if i is not None and xv.ndim else xv
        which = ""
        if rows is not None:
            which = f" (configuration #{i}"
            if len(rows) > 1:
                listed = ", ".join(f"#{r}" for r in rows[:_MAX_ROWS_SHOWN])
                more = f" and {len(rows) - _MAX_ROWS_SHOWN} more" if len(rows) > _MAX_ROWS_SHOWN else ""
                which += f"; {len(rows)} of {mask.size} rows: {listed}{more}"
            which += ")"
        if what is None:
            head = f"evaluates to {bad}{which}"
        else:
            head = (f"`{what[0]}` evaluates to {bad} inside `{what[1]}`{which}: a spreadsheet "
                    f"shows an error there (#DIV/0!, #NUM! or Err:502), not a number")
        return EvaluationError(f"{head} from `{node.text}` with " + ", ".join(shown),
                               file=node.file, line=node.line, node=name)


def _load_trees(lib: Library) -> dict[str, list]:
    """Each node's expression tree: from the disk cache when it holds this library's."""
    from . import diskcache
    key = diskcache.key("trees", lib.digest_full)
    cached = diskcache.load(key)
    if isinstance(cached, dict) and set(cached) == set(lib.nodes):
        from .compile import check_tree
        try:
            for n, t in cached.items():
                check_tree(t, len(lib.nodes[n].deps))
            return cached
        except ValueError:
            pass  # not what we wrote: rebuild
    trees = {n: lower(node.expr, node.deps) for n, node in lib.nodes.items()}
    diskcache.save(key, trees)
    return trees


def _program_key(lib: Library, key) -> str:
    from . import diskcache
    outs, overridden, keep = key
    text = "\0".join([lib.digest_full, ",".join(sorted(outs)) if outs is not None else "*",
                      ",".join(sorted(overridden)), str(keep)])
    return diskcache.key("program", text)


def format_plain(lib: Library, name: str, v) -> str:
    """A value as text for messages: the choice name for categorical inputs."""
    if name in lib.inputs and lib.inputs[name].is_choice:
        return lib.inputs[name].choices[int(v)]
    return f"{float(v):.6g}"
