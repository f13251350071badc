"""The search query a person types, and where it matched (docs/search.md).

One safe syntax for every engine: words (all must match), "exact phrases", `word*` for a
prefix, `-word` or `-"phrase"` to exclude. Everything else is text: no operator, column
filter or bracket of FTS5 or tsquery ever reaches the engine, because the query is
rebuilt here from its words. Highlights are offsets into the event's text, never markup.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from agentpost.core.errors import Code, RequestError

MAX_QUERY_CHARS = 1000
MAX_TERMS = 16
MAX_HIGHLIGHTS = 64

# A word: a run of letters and digits (underscore and marks separate words), as SQLite's
# unicode61 tokenizer and PostgreSQL's parser both cut text.
_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


class QueryInvalid(RequestError):
    """The query cannot be searched as written: the message says what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(Code.SEARCH_QUERY_INVALID, message, field="q")


@dataclass(frozen=True)
class Term:
    """One word or phrase of a query: its words in order, as typed."""

    words: tuple[str, ...]
    raw: str  # the chunk as typed, control characters removed (PostgreSQL parses it itself)
    prefix: bool = False
    excluded: bool = False


@dataclass(frozen=True)
class Query:
    terms: tuple[Term, ...]

    @property
    def wanted(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.excluded)


def fold(word: str) -> str:
    """A word as both engines compare it: case folded, accents removed."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _clean(text: str) -> str:
    """Control characters (NUL above all) and lone surrogates become spaces."""
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cs") else ch for ch in text)


def parse(q: str) -> Query:
    """The query `q` as terms; `QueryInvalid` when nothing in it can be searched."""
    if len(q) > MAX_QUERY_CHARS:
        raise QueryInvalid(f"the query is too long: at most {MAX_QUERY_CHARS} characters")
    text = _clean(q)
    terms: list[Term] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        excluded = text[pos] == "-" and pos + 1 < len(text) and not text[pos + 1].isspace()
        if excluded:
            pos += 1
        if text[pos] == '"':
            end = text.find('"', pos + 1)
            if end < 0:
                raise QueryInvalid('a phrase is missing its closing quote (")')
            raw, pos = text[pos + 1 : end], end + 1
            prefix = pos < len(text) and text[pos] == "*"
        else:
            m = re.compile(r'[^\s"]+').match(text, pos)
            assert m is not None
            raw, pos = m.group(), m.end()
            prefix = raw.endswith("*")
        words = tuple(_WORD.findall(raw))
        if words:
            terms.append(Term(words, _SPACE.sub(" ", raw).strip(), prefix, excluded))
    if len(terms) > MAX_TERMS:
        raise QueryInvalid(f"too many words or phrases: at most {MAX_TERMS}")
    if not any(not t.excluded for t in terms):
        raise QueryInvalid(
            "nothing to search for: give at least one word or phrase to find"
            " (a -word only excludes)"
        )
    return Query(tuple(terms))


def fts5(query: Query) -> str:
    """The query as an FTS5 MATCH expression: every word a double-quoted string."""

    def phrase(t: Term) -> str:
        quoted = '"' + " ".join(w.replace('"', '""') for w in t.words) + '"'
        return quoted + ("*" if t.prefix else "")

    out = " AND ".join(phrase(t) for t in query.wanted)
    for t in query.terms:
        if t.excluded:
            out = f"({out}) NOT {phrase(t)}"
    return out


def tsquery(query: Query) -> tuple[str, list[str]]:
    """The query as a PostgreSQL tsquery expression with `?` placeholders, and its values.

    A plain word or phrase goes through `phraseto_tsquery`, which reads its argument as
    text (PostgreSQL cuts `x@y.com` or `1.5` as it cut the stored text); a prefix term is
    spelled from its words, which hold letters and digits only.
    """
    parts: list[str] = []
    values: list[str] = []
    for t in query.terms:
        if t.prefix:
            expr = "to_tsquery('simple', ?)"
            values.append(" <-> ".join(f"'{w}'" for w in t.words) + ":*")
        else:
            expr = "phraseto_tsquery('simple', ?)"
            values.append(t.raw)
        parts.append(f"!!{expr}" if t.excluded else expr)
    return "(" + " && ".join(parts) + ")", values


def _spans(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), fold(m.group())) for m in _WORD.finditer(text)]


def highlights(query: Query, text: str) -> list[list[int]]:
    """Where the query's wanted terms occur in `text`: sorted, non-overlapping
    `[start, end)` offsets in characters (Unicode code points), at most `MAX_HIGHLIGHTS`."""
    words = _spans(text)
    found: list[tuple[int, int]] = []
    for t in query.wanted:
        want = [fold(w) for w in t.words]
        n = len(want)
        for i in range(len(words) - n + 1):
            if all(words[i + k][2] == want[k] for k in range(n - 1)) and (
                words[i + n - 1][2].startswith(want[-1])
                if t.prefix
                else words[i + n - 1][2] == want[-1]
            ):
                found.append((words[i][0], words[i + n - 1][1]))
    merged: list[list[int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged[:MAX_HIGHLIGHTS]
