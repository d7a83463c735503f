"""The grammar unit text must fit before pint parses it (pint evaluates `GiB**9**9**9` and
hangs): unit names with small integer exponents, joined by * / or a space."""
from __future__ import annotations

import re

#: Unit text pint may see: names (or 1) with small integer exponents, joined by * / or a
#: space, with one level of parentheses. pint itself evaluates `GiB**9**9**9` (it hangs),
#: so the text is checked against this grammar first.
MAX_UNIT_TEXT = 64
MAX_UNIT_EXPONENT = 12
_U_ATOM = r"(?:[A-Za-z_%µμ][A-Za-z0-9_%µμ]*|1)"
_U_POW = r"(?:\s*(?:\*\*|\^)\s*(?:-?\d{1,2}|\(\s*-?\d{1,2}\s*\)))?"
_U_CHAIN = rf"{_U_ATOM}{_U_POW}(?:\s*[*/]\s*{_U_ATOM}{_U_POW}|\s+{_U_ATOM}{_U_POW})*"
_U_FACTOR = rf"(?:{_U_ATOM}|\(\s*{_U_CHAIN}\s*\)){_U_POW}"
_UNIT_RE = re.compile(rf"{_U_FACTOR}(?:\s*[*/]\s*{_U_FACTOR}|\s+{_U_FACTOR})*")
_EXP_RE = re.compile(r"(?:\*\*|\^)\s*\(?\s*(-?\d+)")


def check_unit_text(t: str) -> None:
    """Refuse unit text outside the small grammar above (ValueError, before pint sees it)."""
    if len(t) > MAX_UNIT_TEXT:
        raise ValueError(f"unit text is {len(t)} characters; the limit is {MAX_UNIT_TEXT}")
    if not re.fullmatch(r"[A-Za-z0-9_%µμ*/^().\s-]+", t):
        raise ValueError(f"unit `{t}` has characters a unit cannot have")
    if not _UNIT_RE.fullmatch(t):
        raise ValueError(f"unit `{t}` is not a product of unit names with small integer "
                         f"exponents (e.g. `GB/s`, `mm^2`)")
    for m in _EXP_RE.finditer(t):
        if abs(int(m.group(1))) > MAX_UNIT_EXPONENT:
            raise ValueError(f"unit `{t}`: exponent {m.group(1)} is larger than "
                             f"{MAX_UNIT_EXPONENT}")
