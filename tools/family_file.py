"""What the family writers in tools/ (vtrain_family.py, mpt_family.py) share: the value lines of a dense GPT
point, and writing a generated family file or checking that the committed one is current."""
from __future__ import annotations

from pathlib import Path


def write_or_check(out: Path, text: str, argv: list[str], tool: str, point_prefix: str) -> int:
    """With --check: 0 if ``out`` already holds ``text``, else 1. Otherwise write it atomically."""
    if "--check" in argv:
        ok = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if ok else f'stale, run tools/{tool}'}")
        return 0 if ok else 1
    from flopsheet.atomic import atomic_write
    atomic_write(out, text)
    print(f"wrote {out} ({text.count('  ' + point_prefix)} points)")
    return 0


def dense_gpt_lines(layers: int, hidden: int, heads: int, seq: int, sources: dict[str, str] | None = None) -> list[str]:
    """Value lines of a dense multi-head GPT point - a 4h MLP and learned position embeddings of seq rows;
    a value named in ``sources`` is written with its source."""
    sources = sources or {}
    values = {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": heads, "head_dim": hidden // heads,
              "ffn_hidden": 4 * hidden, "seq_len": seq, "position_embeddings": seq}
    return [f'      {k}: {{value: {v}, source: "{sources[k]}"}}' if k in sources else f"      {k}: {v}"
            for k, v in values.items()]
