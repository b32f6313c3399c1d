"""attnlimits: the library behind the book "The Limits of Softmax Attention".

Chapters do ``import attnlimits as al`` and call into the submodules below; everything a chapter computes or
plots lives here so that the book's prose stays thin and the same code is tested by pytest.
"""

from attnlimits import normalizers, plotting

__all__ = ["normalizers", "plotting"]
__version__ = "0.1.0"
