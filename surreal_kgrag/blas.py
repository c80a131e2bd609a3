"""numpy's BLAS held to one thread for a stretch of code, if threadpoolctl is installed.

OpenBLAS's threads keep spinning for a while after each call. On a small machine they take the
cores the embedding model (torch's own thread pool) or the database need next: embedding a question
right after a 7,000 x 384 matrix-vector product took 29-34 ms here against 15-18 alone, and 15 ms
with the product on one thread. The matrices involved (spaCy's layers, a question against a few
thousand chunk vectors) gain nothing from a second thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from functools import cache
from typing import Any


def one_blas_thread() -> AbstractContextManager[Any]:
    """Limit numpy's BLAS to one thread inside the ``with`` block, if threadpoolctl is installed.

    spaCy's matrices are small: a second BLAS thread gave no speed-up here but burned ~60% more CPU
    spinning, CPU the embedding model or the database could use. threadpoolctl comes with
    sentence-transformers (via scikit-learn); torch's own thread pools are not affected. The
    libraries are looked up once: ``threadpool_limits`` looks them up on every call, 1.2 ms, which
    was a sixth of analysing a question.
    """
    controller = _blas_controller()
    return nullcontext() if controller is None else controller.limit(limits=1, user_api="blas")


@cache
def _blas_controller() -> Any:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()
