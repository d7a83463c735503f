"""Formulas as MathML (sympy's presentation printer), reading like the YAML: names whole
(``step_time``, not step with subscript time), choices by name (``recompute = full``)."""
from __future__ import annotations

import sympy as sp
from sympy.printing.mathml import MathMLPresentationPrinter


class _Printer(MathMLPresentationPrinter):
    def __init__(self, choices: dict[str, list[str]], settings=None):
        super().__init__(settings or {})
        self.choices = choices

    def _print_Symbol(self, sym, style="plain"):
        mi = self.dom.createElement("mi")
        if len(sym.name) > 1:
            mi.setAttribute("mathvariant", "normal")
        mi.appendChild(self.dom.createTextNode(sym.name))
        return mi

    def _print_Piecewise(self, e):
        """A brace over the cases: ``value   if condition`` ... ``value   otherwise``."""
        mrow = self.dom.createElement("mrow")
        mo = self.dom.createElement("mo")
        mo.appendChild(self.dom.createTextNode("{"))
        mrow.appendChild(mo)
        table = self.dom.createElement("mtable")
        table.setAttribute("columnalign", "left left")
        for expr, cond in e.args:
            tr = self.dom.createElement("mtr")
            td = self.dom.createElement("mtd")
            td.appendChild(self._print(expr))
            tr.appendChild(td)
            td = self.dom.createElement("mtd")
            txt = self.dom.createElement("mtext")
            if cond is sp.true:
                txt.appendChild(self.dom.createTextNode("\u2003otherwise"))
                td.appendChild(txt)
            else:
                txt.appendChild(self.dom.createTextNode("\u2003if "))
                td.appendChild(txt)
                td.appendChild(self._print(cond))
            tr.appendChild(td)
            table.appendChild(tr)
        mrow.appendChild(table)
        return mrow

    def _print_Relational(self, e):
        lhs, rhs = e.lhs, e.rhs
        if (isinstance(lhs, sp.Symbol) and lhs.name in self.choices and rhs.is_Integer
                and 0 <= int(rhs) < len(self.choices[lhs.name])
                and isinstance(e, (sp.Eq, sp.Ne))):
            mrow = self.dom.createElement("mrow")
            mrow.appendChild(self._print(lhs))
            mo = self.dom.createElement("mo")
            mo.appendChild(self.dom.createTextNode("=" if isinstance(e, sp.Eq) else "\u2260"))
            mrow.appendChild(mo)
            txt = self.dom.createElement("mtext")
            txt.appendChild(self.dom.createTextNode(self.choices[lhs.name][int(rhs)]))
            mrow.appendChild(txt)
            return mrow
        return super()._print_Relational(e)


def formula(name: str, expr, choices: dict[str, list[str]] | None = None) -> str:
    """``<math display="block">name = expr</math>`` (markup; every name escaped by the DOM)."""
    p = _Printer(choices or {})
    body = p._print(expr).toxml().replace("<mo>&InvisibleTimes;</mo>", "<mo>\u00b7</mo>")
    head = p._print_Symbol(sp.Symbol(name)).toxml()
    return (f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><mrow>{head}'
            f'<mo>=</mo>{body}</mrow></math>')


__all__ = ["formula"]
