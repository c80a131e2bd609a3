"""Command-line forms of a scope (``--access``, ``--filter``), shared by the CLI and the MCP server."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .filters import MAX_FILTER_DEPTH


def access_labels(text: str) -> list[str]:
    """``"public,staff"`` -> ``["public", "staff"]``; ``""`` -> ``[]`` (a scope that sees nothing)."""
    return [label.strip() for label in text.split(",") if label.strip()]


def filter_spec(text: str) -> dict[str, Any]:
    """A JSON object given on the command line, as a filter dict."""
    try:
        spec = json.loads(text)
    except RecursionError:
        raise argparse.ArgumentTypeError(f"is nested too deeply: a filter nests at most {MAX_FILTER_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(
            f"must be a JSON object, e.g. '{{\"metadata.year\": {{\"$gte\": 2000}}}}' ({error})"
        ) from error
    except ValueError as error:  # an integer of more than 4,300 digits
        raise argparse.ArgumentTypeError(f"cannot be read as JSON: {str(error).split(';')[0]}") from None
    if not isinstance(spec, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return spec
