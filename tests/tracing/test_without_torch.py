"""Without the optional `torch` extra, `trace-torch` says how to install it; nothing else needs
torch."""

from __future__ import annotations

import subprocess
import sys

from dtrholes.cli import main


def test_trace_torch_names_the_missing_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    out = tmp_path / "x.log"
    assert main(["trace-torch", "--factory", "m:f", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("the optional `torch` extra is not installed (pip install -c "
                        "requirements.lock -e '.[torch]')")  # fmt: skip
    assert len(err.splitlines()) == 1 and not out.exists()


def test_the_cli_does_not_import_torch():
    code = "import sys, dtrholes.cli, simulator; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
