"""Objects that live as long as the process, kept out of the cyclic garbage collector's way.

A loaded model is hundreds of thousands of Python objects (MiniLM with its tokenizer about 400,000,
spaCy's small English pipeline about 44,000) that live until the process ends. Left in the
collector's oldest generation, each full collection walks every one of them: on the quiet 2-core
machine this was measured on, a full collection with both models loaded took 499 ms (6 ms with them
frozen), and Python runs one whenever enough new objects have survived, in the middle of whatever
search is running then (``benchmarks/gc_pause.py``). Once a model is loaded, :func:`freeze_loaded`
moves every object then alive out of the collector's reach (``gc.freeze``).

Frozen objects are still freed by reference counting when nothing refers to them; only a reference
cycle among them is never collected. ``gc.unfreeze()`` undoes it.
"""

from __future__ import annotations

import gc


def freeze_loaded() -> None:
    """Collect what is garbage now, then freeze what is alive: called once a model is loaded."""
    gc.collect()
    gc.freeze()
