"""Read the library's docstrings as the plain text they are, for the API reference page (chapters/api.md).

The docstrings of :mod:`attnlimits` write absolute values and norms with bars (``|logit| <= rho``,
``|d alpha_i / d l_j|``); reStructuredText would take ``|...|`` for a substitution and fail the build. This
extension escapes every bar outside inline literals before autodoc parses a docstring.

The library's signatures name types of torch, pandas and the standard library; with no network at build time
there is no intersphinx inventory for them, so nitpicky mode is told not to look for those targets (and only
those). A docstring may also name a library object that the page does not list (a private helper, a constant
without a doc comment, a name re-exported from a submodule): when that name exists in a loaded ``attnlimits``
module it is shown as code, unlinked; a name that exists nowhere (a typo, a renamed function) still fails the
build.
"""

from __future__ import annotations

import re
import sys

from sphinx.application import Sphinx

#: Namespaces documented elsewhere (no intersphinx offline): their names in signatures are not link targets here.
EXTERNAL = r"(torch|pandas|numpy|matplotlib|transformers|collections\.abc|pathlib|os|typing|re|io|joblib)(\..+)?"
_LITERAL = re.compile(r"(``.+?``)")


def escape_bars(line: str) -> str:
    """``line`` with each ``|`` outside ``inline literals`` escaped as ``\\|``."""
    parts = _LITERAL.split(line)
    return "".join(p if i % 2 else p.replace("|", r"\|") for i, p in enumerate(parts))


def _process(app, what, name, obj, options, lines: list[str]) -> None:
    if name.startswith("attnlimits"):
        lines[:] = [escape_bars(line) for line in lines]


def _ignore_external(app: Sphinx, config) -> None:
    config.nitpick_ignore_regex = [
        *config.nitpick_ignore_regex,
        *((role, EXTERNAL) for role in ("py:class", "py:obj", "py:data", "py:func", "py:mod")),
    ]


def exists_in_library(target: str, module: str | None = None) -> bool:
    """True when ``target`` names an object of a loaded ``attnlimits`` module (dotted path, or a bare name)."""
    target = target.lstrip(".~")
    for candidate in ([f"{module}.{target}"] if module else []) + [target]:
        head, _, tail = candidate.rpartition(".")
        if head in sys.modules and head.startswith("attnlimits") and hasattr(sys.modules[head], tail):
            return True
    if "." in target:
        return False
    return any(name.startswith("attnlimits") and hasattr(mod, target) for name, mod in list(sys.modules.items()))


def _unlinked_library_name(app, env, node, contnode):
    if node.get("refdomain") != "py" or not exists_in_library(node["reftarget"], node.get("py:module")):
        return None
    return contnode


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _process)
    app.connect("config-inited", _ignore_external)
    app.connect("missing-reference", _unlinked_library_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
