"""Walking a folder for the files to load: hidden entries skipped, the glob matched one path
segment at a time, and symlinks that leave the folder reported unless they are followed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

from ..models import LoadFailure
from .options import SUPPORTED_SUFFIXES, LoaderOptions, os_reason


def folder_files(root: Path, options: LoaderOptions) -> Iterator[Path | LoadFailure]:
    """The files under ``root`` to load, in path order, after what could not be walked. Hidden
    entries are skipped; a symlinked folder is followed with ``follow_symlinks`` (each real folder
    once: a link back up is no loop), else reported when its target lies outside ``root`` and the
    glob could match files in it (inside, its files are read where they are)."""
    pattern = [p for p in options.glob.split("/") if p]
    if pattern[-1:] == ["**"]:
        pattern.append("*")  # files only: a bare "**" would match folders
    walk = _FolderWalk(root.resolve(), pattern, options.follow_symlinks)
    errors: list[OSError] = []
    matches: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append, followlinks=options.follow_symlinks):
        folder = Path(dirpath)
        rel_folder = folder.relative_to(root).as_posix()
        here = _glob_reach([] if rel_folder == "." else rel_folder.split("/"), pattern)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and walk.enters(folder / d, _glob_step(here, d, pattern))]
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                continue
            if len(pattern) in _glob_step(here, name, pattern):
                matches.append((name if rel_folder == "." else f"{rel_folder}/{name}", folder / name))
    for exc in errors:
        where = Path(exc.filename).absolute().as_posix() if exc.filename else root.absolute().as_posix()
        yield LoadFailure(source=where, reason=f"cannot list folder: {os_reason(exc)}")
    for link in walk.unfollowed:
        yield _not_followed(link, "folder")
    for _, path in sorted(matches):
        if not options.follow_symlinks and path.is_symlink() and not _within(path, walk.inside):
            yield _not_followed(path, "file")
            continue
        yield path


def _not_followed(link: Path, kind: str) -> LoadFailure:
    return LoadFailure(
        source=link.absolute().as_posix(),
        reason=f"symlink to a {kind} outside the folder being ingested; not followed (pass the target itself, or follow_symlinks=True)",
    )


class _FolderWalk:
    """Which folders a walk enters: without ``follow``, no symlinked one (those leaving the folder
    that could hold matches are noted, to be reported); with it, each real folder once."""

    def __init__(self, inside: Path, pattern: list[str], follow: bool) -> None:
        self.inside, self.pattern, self.follow = inside, pattern, follow
        self.walked = {inside}
        self.unfollowed: list[Path] = []

    def enters(self, folder: Path, reached: set[int]) -> bool:
        """Whether to walk into ``folder``, whose path reaches ``reached`` in the glob pattern."""
        if not self.follow:
            if not folder.is_symlink():
                return True
            if not _within(folder, self.inside) and any(j < len(self.pattern) for j in reached):
                self.unfollowed.append(folder)
            return False
        try:
            real = folder.resolve()
        except (OSError, RuntimeError):  # a broken link or a loop: os.walk reports what it cannot list
            return True
        if real in self.walked:
            return False
        self.walked.add(real)
        return True


def _within(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):  # a broken link or a loop: reading it will say so
        return True


def _glob_reach(parts: list[str], pattern: list[str]) -> set[int]:
    """The positions in ``pattern`` (glob segments: ``**`` spans folders, ``*`` stays in one) that
    path segments ``parts`` reach: the path matches when ``len(pattern)`` is among them. One segment
    at a time, linear in both lengths (trying each split of each ``**`` in turn is exponential in
    their number)."""
    reached = _glob_closed({0}, pattern)
    for part in parts:
        reached = _glob_step(reached, part, pattern)
    return reached


def _glob_step(reached: set[int], part: str, pattern: list[str]) -> set[int]:
    """The positions reached one segment ``part`` past the positions ``reached``."""
    step = {j for j in reached if j < len(pattern) and pattern[j] == "**"}  # "**" takes this folder
    step |= {j + 1 for j in reached if j < len(pattern) and pattern[j] != "**" and fnmatchcase(part, pattern[j])}
    return _glob_closed(step, pattern)


def _glob_closed(reached: set[int], pattern: list[str]) -> set[int]:
    """``reached`` with the positions after each ``**`` it holds: a ``**`` may span no folder."""
    out = set(reached)
    for j in sorted(reached):
        while j < len(pattern) and pattern[j] == "**":
            j += 1
            out.add(j)
    return out
