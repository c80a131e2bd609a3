"""The read-only guard for SurrealQL written by a model: a token-level allow-list.

A statement passes when it is one ``SELECT`` (one trailing ``;`` allowed) with, outside its strings
and escaped identifiers: plain printable ASCII only, no comment, no backslash anywhere (so strings
have no escapes and end at the first matching quote, for this lexer and the engine's alike),
balanced brackets, no word that starts or configures another statement (``CREATE``, ``UPDATE``,
``DELETE``, ``DEFINE``, ``LET``, ``INFO``, ``SLEEP``...) anywhere, not even in a subquery, a block or
after a ``.``, and no function outside a list of pure namespaces (``array::``, ``string::``,
``math::``...: no ``http::``, ``fn::``, ``file::``, ``crypto::``, ``api::``).

This is deliberately stricter than SurrealQL (a field named like a keyword must be written in
backticks). SELECT is not read-only by itself in SurrealDB: a block, a ``FROM`` subquery or the end
of a range (``1..CREATE a:1``) inside it can write, which is why the words are refused wherever
they appear. The engine then checks the statement again (``EXPLAIN``, which plans without running,
see :mod:`.readonly`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..errors import KGRagError

MAX_CHARS = 4000

# Words that begin, or only occur in, statements other than SELECT, and clauses the runner sets itself.
FORBIDDEN_WORDS = frozenset(
    """
    CREATE UPDATE UPSERT DELETE INSERT RELATE DEFINE REMOVE ALTER REBUILD KILL LIVE LET BEGIN COMMIT CANCEL
    USE OPTION INFO SHOW GRANT REVOKE PURGE SLEEP THROW FOR BREAK CONTINUE IMPORT EXPORT
    TIMEOUT PARALLEL TEMPFILES EXPLAIN FUTURE
    """.split()
)
# Function namespaces without side effects, outside access to the network, files or other code.
ALLOWED_NAMESPACES = frozenset(
    "array bytes count duration encoding geo math meta not object parse rand record search set string time type value vector".split()
)
DENIED_FUNCTIONS = frozenset({"type::file"})
# File pointer methods that write (a bucket is needed, but refuse them regardless).
DENIED_METHODS = frozenset({"put", "put_if_not_exists", "copy", "copy_if_not_exists", "rename", "rename_if_not_exists"})
# String prefixes: record id, string, datetime, uuid, bytes. f"..." (a file pointer) is refused.
STRING_PREFIXES = frozenset("rsdub")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9]+")
_PAIRS = {")": "(", "]": "[", "}": "{"}

Kind = Literal["word", "param", "number", "string", "ident", "punct"]


class ReadonlyQueryError(KGRagError, ValueError):
    """A statement the read-only runner refuses, or one the engine rejected; the message says why,
    in words a model can act on. ``code`` names the rule: ``empty``, ``too_long``, ``characters``,
    ``comment``, ``unterminated``, ``multiple_statements``, ``not_select``, ``forbidden_word``,
    ``forbidden_function``, ``brackets``, ``engine_rejected``, ``scope``, ``failed``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    position: int


@dataclass(frozen=True)
class CheckedStatement:
    """A statement the guard accepted (without a trailing ``;``)."""

    text: str


def check_readonly(statement: str, *, max_chars: int = MAX_CHARS) -> CheckedStatement:
    """Accept one read-only ``SELECT`` or raise :class:`ReadonlyQueryError` naming the rule it broke."""
    if not isinstance(statement, str):
        raise ReadonlyQueryError(f"the query must be a string, not {type(statement).__name__}", "empty")
    text = statement.strip()
    if not text:
        raise ReadonlyQueryError("the query is empty: write one SELECT statement", "empty")
    if len(text) > max_chars:
        raise ReadonlyQueryError(f"the query has {len(text)} characters; at most {max_chars} are allowed", "too_long")
    tokens = tokenize(text)
    if tokens and tokens[-1].text == ";":
        tokens.pop()
        text = text[: text.rfind(";")].rstrip()
    if not tokens:
        raise ReadonlyQueryError("the query is empty: write one SELECT statement", "empty")
    _check_structure(tokens)
    _check_words(tokens)
    return CheckedStatement(text)


def tokenize(text: str) -> list[Token]:
    """SurrealQL tokens, as far as the guard needs them; raises on comments, unterminated strings
    or identifiers, and characters outside printable ASCII that are not inside a string."""
    for i, ch in enumerate(text):
        if ch == "\\":
            raise ReadonlyQueryError(
                f"backslashes are not allowed (character {i + 1}): for text with a quote in it, use the other quote character",
                "characters",
            )
        if ch.isascii() and not ch.isprintable() and ch not in "\t\r\n":
            raise ReadonlyQueryError(f"control character U+{ord(ch):04X} at position {i + 1} is not allowed", "characters")
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif text.startswith(("--", "//", "/*"), i) or ch == "#":
            raise ReadonlyQueryError(f"comments are not allowed (at character {i + 1}): remove them", "comment")
        elif ch in "'\"":
            end = _closing(text, i + 1, ch)
            tokens.append(Token("string", text[i : end + 1], i))
            i = end + 1
        elif ch == "`":
            end = _closing(text, i + 1, "`")
            tokens.append(Token("ident", text[i : end + 1], i))
            i = end + 1
        elif ch == "⟨":
            end = _closing(text, i + 1, "⟩")
            tokens.append(Token("ident", text[i : end + 1], i))
            i = end + 1
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            word = _WORD.match(text, i)
            assert word is not None
            end = word.end()
            if end < n and text[end] in "'\"" and word.group().lower() in STRING_PREFIXES | {"f"}:
                if word.group().lower() == "f":
                    raise ReadonlyQueryError("file pointers (f\"...\") are not allowed", "forbidden_function")
                close = _closing(text, end + 1, text[end])
                tokens.append(Token("string", text[i : close + 1], i))
                i = close + 1
                continue
            tokens.append(Token("word", word.group(), i))
            i = end
        elif ch == "$":
            word = _WORD.match(text, i + 1)
            if word is None:
                raise ReadonlyQueryError(f"'$' must start a parameter name (at character {i + 1})", "characters")
            tokens.append(Token("param", text[i : word.end()], i))
            i = word.end()
        elif ch.isascii() and ch.isdigit():
            number = _NUMBER.match(text, i)
            assert number is not None
            tokens.append(Token("number", number.group(), i))
            i = number.end()
        elif ch.isascii() and ch.isprintable():
            tokens.append(Token("punct", ch, i))
            i += 1
        else:
            raise ReadonlyQueryError(
                f"character {ch!r} (U+{ord(ch):04X}) at position {i + 1} is only allowed inside a string; "
                "write the query in plain ASCII outside quotes",
                "characters",
            )
    return tokens


def _closing(text: str, start: int, quote: str) -> int:
    """Index of the quote that closes a string or identifier opened before ``start`` (the statement
    has no backslash, so there are no escapes to follow). Raises when there is none."""
    end = text.find(quote, start)
    if end >= 0:
        return end
    raise ReadonlyQueryError(f"unterminated {quote} at character {start}: close it", "unterminated")


def _check_structure(tokens: list[Token]) -> None:
    first = tokens[0]
    if first.kind != "word" or first.text.upper() != "SELECT":
        raise ReadonlyQueryError(f"the query must be one SELECT statement; it starts with {first.text!r}", "not_select")
    stack: list[str] = []
    for token in tokens:
        if token.kind != "punct":
            continue
        if token.text == ";":
            raise ReadonlyQueryError(
                f"only one statement is allowed: remove the ';' at character {token.position + 1} and what follows",
                "multiple_statements",
            )
        if token.text in "([{":
            stack.append(token.text)
        elif token.text in _PAIRS and (not stack or stack.pop() != _PAIRS[token.text]):
            raise ReadonlyQueryError(f"unbalanced {token.text!r} at character {token.position + 1}", "brackets")
    if stack:
        raise ReadonlyQueryError(f"unclosed {stack[-1]!r}: balance the brackets", "brackets")


def _check_words(tokens: list[Token]) -> None:
    for index, token in enumerate(tokens):
        if token.kind == "ident" and _colons_at(tokens, index + 1):
            raise ReadonlyQueryError(f"an escaped name cannot start a function path ({token.text}::...)", "forbidden_function")
        if token.kind != "word":
            continue
        after_dot = index > 0 and tokens[index - 1].text == "."
        if after_dot and token.text.lower() in DENIED_METHODS:
            raise ReadonlyQueryError(f"the method .{token.text}() is not allowed: the query must only read", "forbidden_function")
        if token.text.upper() in FORBIDDEN_WORDS:
            # Also after a '.': `1..CREATE a:1` is a range whose end is a statement, and it runs.
            raise ReadonlyQueryError(
                f"{token.text!r} is not allowed (character {token.position + 1}): the query must be one SELECT that only "
                "reads, with no other statement inside it, and no TIMEOUT/PARALLEL/EXPLAIN clause (the runner sets limits). "
                "A field with this name must be written in backticks: record.`name`",
                "forbidden_word",
            )
        if _is_path_start(tokens, index):
            path = _path(tokens, index)
            namespace = path.split("::", 1)[0].lower()
            if namespace not in ALLOWED_NAMESPACES or path.lower() in DENIED_FUNCTIONS:
                raise ReadonlyQueryError(
                    f"the function {path}() is not allowed; use functions of {', '.join(sorted(ALLOWED_NAMESPACES))}",
                    "forbidden_function",
                )


def _is_path_start(tokens: list[Token], index: int) -> bool:
    """True for the first word of ``a::b``: two ':' right after it, and not itself after '::'."""
    if index >= 2 and tokens[index - 1].text == ":" and tokens[index - 2].text == ":":
        return False
    return _colons_at(tokens, index + 1)


def _colons_at(tokens: list[Token], index: int) -> bool:
    # Whitespace between the colons is read as a path separator too: stricter than the engine.
    return index + 1 < len(tokens) and tokens[index].text == ":" and tokens[index + 1].text == ":"


def _path(tokens: list[Token], index: int) -> str:
    parts = [tokens[index].text]
    i = index + 1
    while _colons_at(tokens, i) and i + 2 < len(tokens) and tokens[i + 2].kind == "word":
        parts.append(tokens[i + 2].text)
        i += 3
    return "::".join(parts)
