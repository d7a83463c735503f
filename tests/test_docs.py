"""The formula reference in docs/ is generated from the YAML and current; the guides exist;
every `flopsheet check` warning on the bundled library is explained in the docs."""
from __future__ import annotations

import re
from pathlib import Path

from flopsheet.cli import main
from flopsheet.exports.docs import pages
from flopsheet.library import load_library

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_reference_is_current():
    lib = load_library()
    want = pages(lib)
    have = {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8")
            for p in (DOCS / "reference").glob("*.md")}
    stale = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    assert not stale, f"run `flopsheet docs -o docs/`: {stale}"
    text = "\n".join(want.values())
    for n, node in lib.nodes.items():  # every node with its formula, unit and source
        assert f"### `{n}`" in text and node.parsed.text.strip() in text
        assert f"- source: {' '.join(node.source.split())}".replace("|", "\\|") in text
    for n in lib.inputs:
        assert f'<a id="{n}"></a>`{n}`' in text


def test_docs_command_writes_the_reference(tmp_path, capsys):
    assert main(["docs", "-o", str(tmp_path)]) == 0
    lib = load_library()
    assert len(list((tmp_path / "reference").glob("*.md"))) == len(lib.files) + 1
    stale = tmp_path / "reference" / "gone.md"
    stale.write_text("old")
    assert main(["docs", "-o", str(tmp_path)]) == 0
    assert not stale.exists()


def test_guides_exist_and_link():
    for g in ("add-a-gpu-preset", "add-a-model", "write-a-formula-file",
              "validate-your-measurement"):
        assert (DOCS / "guides" / f"{g}.md").is_file()
        assert f"guides/{g}.md" in (DOCS / "README.md").read_text()


def test_every_check_warning_is_explained(capsys):
    main(["check"])
    out = capsys.readouterr().out
    warned = re.findall(r"^warning: [^:]+:\d+: (\w+):", out, flags=re.M)
    explained = (DOCS / "check-warnings.md").read_text()
    assert len(warned) <= 1
    for name in warned:
        assert f"{name}:" in explained
