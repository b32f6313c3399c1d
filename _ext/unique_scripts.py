"""Drop repeated <script> entries from each page.

sphinx-thebe 0.3.1 registers its configuration script (`const THEBE_JS_URL = ...`) twice, so every page raised
"Identifier 'THEBE_JS_URL' has already been declared" in the browser. A script with the same source, attributes
and body now runs only once (its first place is kept).
"""

from __future__ import annotations

from sphinx.application import Sphinx


def _unique(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    seen, unique = set(), []
    for script in context.get("script_files") or []:
        # The same inline script arrives once with filename None and once with "" (registry and builder copies).
        filename = getattr(script, "filename", script) or ""
        key = (str(filename), tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique  # the builder's own list: later handlers append to it


def setup(app: Sphinx) -> dict:
    # Early: a handler that returns a template name stops the event for the handlers after it.
    app.connect("html-page-context", _unique, priority=100)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
