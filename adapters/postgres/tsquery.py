"""Keyword queries as PostgreSQL ``tsquery`` text, built from words only.

Plain modes (``all``/``any``) join the domain's terms with ``&``/``|``. Mode ``fts`` reads the
same query language as SQLite's FTS5 (barewords and "phrases", ``prefix*``, ``AND``/``OR``/``NOT``
with FTS5's precedence, parentheses, ``NEAR(...)``, ``column:``, ``^``) and refuses what FTS5
refuses with ``Invalid`` on ``q``. Either way every operand is a quoted lexeme made of word
characters, so nothing a client types reaches ``to_tsquery`` as syntax.
"""

from __future__ import annotations

import re

from domain.errors import Invalid
from domain.keywords import KeywordQuery

_WORD = re.compile(r"\w+", re.UNICODE)
_BARE = re.compile(r"[\w\x1a]+", re.UNICODE)
_PUNCT = "()*^:+,"
_OPERATORS = ("AND", "OR", "NOT", "NEAR")


def _lexeme(word: str, prefix: bool = False) -> str:
    return "'" + word + "'" + (":*" if prefix else "")


def _phrase(text: str, prefix: bool) -> str | None:
    """A phrase's words in order (``<->``), the last a prefix when asked; ``None`` when it has none."""
    words = _WORD.findall(text.casefold())
    if not words:
        return None
    parts = [_lexeme(w, prefix and n == len(words) - 1) for n, w in enumerate(words)]
    return parts[0] if len(parts) == 1 else "(" + " <-> ".join(parts) + ")"


def plain_tsquery(query: KeywordQuery) -> str | None:
    """``all``/``any`` as tsquery text; ``None`` when no term has a word in it."""
    parts = [p for p in (_phrase(term, False) for term in query.terms) if p]
    return (" | " if query.mode == "any" else " & ").join(parts) or None


def _syntax(near: str) -> Invalid:
    return Invalid(f'invalid FTS5 query: fts5: syntax error near "{near}"', field="q")


def _tokens(raw: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word``, ``string``, an operator's name, or the punctuation itself."""
    found, i = [], 0
    while i < len(raw):
        ch = raw[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            j, text = i + 1, []
            while True:
                if j >= len(raw):
                    raise Invalid("invalid FTS5 query: unterminated string", field="q")
                if raw[j] == '"':
                    if raw[j + 1:j + 2] == '"':
                        text.append('"')
                        j += 2
                        continue
                    break
                text.append(raw[j])
                j += 1
            found.append(("string", "".join(text)))
            i = j + 1
        elif ch in _PUNCT:
            found.append((ch, ch))
            i += 1
        elif (match := _BARE.match(raw, i)) is not None:
            word = match.group(0)
            found.append((word if word in _OPERATORS else "word", word))
            i = match.end()
        else:
            raise _syntax(ch)
    return found


class _Parser:
    """Recursive descent over FTS5's grammar; each node is tsquery text or ``None`` (matches nothing)."""

    def __init__(self, raw: str) -> None:
        self.tokens = _tokens(raw)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else None

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            raise _syntax(self.tokens[self.at][1] if self.at < len(self.tokens) else "")
        self.at += 1
        return self.tokens[self.at - 1][1]

    def parse(self) -> str | None:
        if not self.tokens:
            return None
        node = self.expr()
        if self.at < len(self.tokens):
            raise _syntax(self.tokens[self.at][1])
        return node

    def expr(self) -> str | None:  # OR binds loosest
        node = self.conjunction()
        while self.peek() == "OR":
            self.at += 1
            other = self.conjunction()
            node = other if node is None else node if other is None else f"({node} | {other})"
        return node

    def conjunction(self) -> str | None:  # AND, explicit or implicit
        node = self.negation()
        while self.peek() in ("AND", "word", "string", "(", "NEAR", "^"):
            if self.peek() == "AND":
                self.at += 1
            other = self.negation()
            node = None if node is None or other is None else f"({node} & {other})"
        return node

    def negation(self) -> str | None:  # NOT binds tightest
        node = self.primary()
        while self.peek() == "NOT":
            self.at += 1
            other = self.primary()
            node = node if node is None or other is None else f"({node} & !{other})"
        return node

    def primary(self) -> str | None:
        kind = self.peek()
        if kind == "(":
            self.at += 1
            node = self.expr()
            self.take(")")
            return node
        if kind == "NEAR" and self.at + 1 < len(self.tokens) and self.tokens[self.at + 1][0] == "(":
            self.at += 2
            phrases = [self.phrase()]
            while self.peek() in ("word", "string"):
                phrases.append(self.phrase())
            if self.peek() == ",":
                self.at += 1
                distance = self.take("word")
                if not distance.isdigit():
                    raise _syntax(distance)
            self.take(")")
            return None if None in phrases else "(" + " & ".join(phrases) + ")"  # all of them, anywhere
        if kind == "word" and self.at + 1 < len(self.tokens) and self.tokens[self.at + 1][0] == ":":
            self.at += 2  # a column filter: the words are matched in every column
            return self.primary()
        if kind == "^":
            self.at += 1
        return self.phrase()

    def phrase(self) -> str | None:
        kind = self.peek()
        if kind not in ("word", "string", "NEAR"):
            raise _syntax(self.tokens[self.at][1] if self.at < len(self.tokens) else "")
        texts = [self.tokens[self.at][1]]
        self.at += 1
        prefix = self.peek() == "*"
        if prefix:
            self.at += 1
        while self.peek() == "+":  # "a" + "b": one phrase
            self.at += 1
            if self.peek() not in ("word", "string"):
                raise _syntax(self.tokens[self.at][1] if self.at < len(self.tokens) else "+")
            texts.append(self.tokens[self.at][1])
            self.at += 1
            prefix = self.peek() == "*"
            if prefix:
                self.at += 1
        return _phrase(" ".join(texts), prefix)


def fts_tsquery(raw: str) -> str | None:
    """FTS5 query text as tsquery text; ``None`` when it can match nothing. ``Invalid`` (``q``)
    for what FTS5 would refuse."""
    return _Parser(raw).parse()


def tsquery_of(query: KeywordQuery) -> str | None:
    return fts_tsquery(query.raw or "") if query.mode == "fts" else plain_tsquery(query)
