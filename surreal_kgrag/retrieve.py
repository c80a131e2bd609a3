"""Moved to :mod:`surreal_kgrag.retrieval`; this name re-exports it while other code migrates."""

from .retrieval import *  # noqa: F403
from .retrieval import __all__  # noqa: F401
