"""`client` exports its names lazily (client/__init__.py): each one listed resolves, and the three lists
that name them (the type checker's imports, the lazy table, __all__) agree."""

import ast
import subprocess
import sys
from pathlib import Path

import client


def _type_checking_imports() -> set[str]:
    tree = ast.parse(Path(client.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.name for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_every_export_resolves_to_what_its_module_defines():
    assert set(client.__all__) == set(client._EXPORTS) == _type_checking_imports()
    for name in client.__all__:
        assert getattr(client, name) is not None, name
    from client.admin import Admin

    assert client.Admin is Admin


def test_the_command_list_loads_no_client_module():
    probe = "import sys, client.cli; print(sorted(m for m in sys.modules if m.startswith(('client.', 'protocol.'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['client.cli']"
