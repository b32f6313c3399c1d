"""Serve MathJax 3 from the built book itself, so that formulas typeset without a network.

`mathjax_path` in `_config.yml` names a path relative to the build's `_static` folder (for example
`mathjax/tex-mml-chtml.js`). After an HTML build this extension copies, from the pinned PyPI package
`django-static-mathjax` (MathJax 3's es5 distribution), that bundle and the files it loads at run time into
`_static/mathjax/`: the CommonHTML fonts, the TeX extensions that `autoload` fetches on first use, and the
menu's accessibility components. The same build works offline and on the published site.
"""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path, PurePosixPath

from sphinx.application import Sphinx
from sphinx.errors import ConfigError, ExtensionError

# Loaded by the combined bundle on demand (relative to MathJax's es5 folder): the CommonHTML output's woff
# fonts, TeX and MathML extensions (autoload, \require), the contextual menu and its accessibility tools.
RUNTIME_FILES = ("output/chtml", "input/tex", "input/mml", "ui", "a11y", "sre")


def mathjax_es5() -> Path:
    """The es5 folder of the installed MathJax 3 distribution (package `django-static-mathjax`)."""
    try:
        root = importlib.resources.files("mathjax") / "static" / "mathjax" / "es5"
    except ModuleNotFoundError as err:
        raise ExtensionError(
            "offline_mathjax: the package django-static-mathjax is not installed (make setup installs it)"
        ) from err
    path = Path(str(root))
    if not (path / "tex-mml-chtml.js").is_file():
        raise ExtensionError(f"offline_mathjax: no MathJax 3 es5 distribution under {path}")
    return path


def local_bundle(mathjax_path: str) -> PurePosixPath | None:
    """`mathjax_path` as a path under `_static` when it is local, None when it is a URL."""
    if "://" in mathjax_path or mathjax_path.startswith("//"):
        return None
    path = PurePosixPath(mathjax_path)
    if path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
        raise ConfigError(
            "mathjax_path must be a URL or a path under _static such as 'mathjax/tex-mml-chtml.js', "
            f"got {mathjax_path!r}"
        )
    return path


def copy_mathjax(es5: Path, dest: Path, bundle: str) -> list[Path]:
    """Copy `bundle` (a file of es5, e.g. tex-mml-chtml.js), its run-time files and MathJax's licence into
    `dest`; returns the copied top-level paths."""
    source = es5 / bundle
    if not source.is_file():
        raise ExtensionError(f"offline_mathjax: MathJax has no bundle {bundle!r} (in {es5})")
    dest.mkdir(parents=True, exist_ok=True)
    copied = [Path(shutil.copy2(source, dest / bundle))]
    for rel in RUNTIME_FILES:
        shutil.copytree(es5 / rel, dest / rel, dirs_exist_ok=True)
        copied.append(dest / rel)
    copied.append(Path(shutil.copy2(es5.parent / "LICENSE", dest / "LICENSE")))
    return copied


def _check(app: Sphinx, config) -> None:
    if local_bundle(config.mathjax_path) is not None:
        mathjax_es5()  # fail at the start of the build, not after executing every chapter


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    bundle = local_bundle(app.config.mathjax_path)
    if bundle is None:
        return
    dest = Path(app.outdir, "_static", *bundle.parent.parts)
    copy_mathjax(mathjax_es5(), dest, bundle.name)


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _check)
    app.connect("build-finished", _copy)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
