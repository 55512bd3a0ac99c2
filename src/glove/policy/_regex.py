"""A small regular-expression engine that cannot run away.

Python's ``re`` backtracks, so a pattern such as ``(a+)+b`` takes time exponential in the
input; bounding the input length does not help (30 characters is already minutes), and
atomic groups only help patterns written with them. Policy patterns come from operator
files and are matched against agent-controlled strings, so this module implements the
subset of regular expressions a policy needs as a Thompson automaton:

* the pattern is parsed (bounded length, bounded repetition counts) into a tree;
* the tree is compiled backwards into NFA states: ``_Char`` (consume one character of a
  class), ``_Split`` (two epsilon edges) and the final ``_MATCH``; the state count is capped;
* matching walks the input once, holding the *set* of live states (a lazily built DFA
  whose transitions are memoized in a bounded cache). Each character costs at most one
  pass over the live states, so time is linear in the input, never exponential; a work
  bound (states visited on cache misses) caps the constant factor too, and a match that
  would exceed it is refused rather than run.

The pattern always matches the whole input. Supported syntax and limits are listed in
``docs/policy.md``.
"""

from dataclasses import dataclass

__all__ = [
    "MAX_REGEX_GROUP_DEPTH",
    "MAX_REGEX_INPUT_CHARS",
    "MAX_REGEX_PATTERN_CHARS",
    "MAX_REGEX_REPEAT",
    "MAX_REGEX_STATES",
    "MAX_REGEX_WORK_STEPS",
    "RegexBudgetExceeded",
    "RegexSyntaxError",
    "SafeRegex",
]

MAX_REGEX_PATTERN_CHARS = 512
"""Longest pattern accepted, in characters."""
MAX_REGEX_REPEAT = 1000
"""Largest count in ``{n}``, ``{n,}`` and ``{n,m}``."""
MAX_REGEX_GROUP_DEPTH = 32
"""Deepest nesting of groups (the parser and compiler recurse once per level)."""
MAX_REGEX_STATES = 1024
"""Most NFA states one pattern may compile into (repetitions are expanded)."""
MAX_REGEX_INPUT_CHARS = 8192
"""Longest input matched; a longer value does not match (the caller denies it)."""
MAX_REGEX_WORK_STEPS = 200_000
"""Most automaton states one match may visit on cache misses (about 0.1 s of CPU here).

Sane patterns keep a handful of states live and stay far below this; a pattern built to
keep hundreds live (``[ab]*a[ab]{100}...``) hits it, and the value is refused: a
deterministic bound on work, not a timeout."""
MAX_REGEX_CACHE_ENTRIES = 4096
"""Memoized DFA transitions kept per pattern before the cache is dropped and rebuilt."""

_MAX_CODEPOINT = 0x10FFFF
_META = frozenset("()[]{}|*+?.^$\\")

Ranges = tuple[tuple[int, int], ...]


class RegexSyntaxError(ValueError):
    """A pattern outside the supported subset or its bounds (compile time only)."""


class RegexBudgetExceeded(ValueError):
    """An input too long to match, or a match that would exceed the work bound."""


@dataclass(frozen=True, slots=True)
class _Class:
    """A character class: sorted inclusive code point ranges, possibly negated."""

    ranges: Ranges
    negated: bool = False

    def contains(self, char: str) -> bool:
        code = ord(char)
        inside = any(lo <= code <= hi for lo, hi in self.ranges)
        return inside != self.negated


_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = ((0x09, 0x0D), (0x20, 0x20))
_ANY = _Class(((0, _MAX_CODEPOINT),))
_SHORTHAND: dict[str, _Class] = {
    "d": _Class(_DIGIT),
    "D": _Class(_DIGIT, negated=True),
    "w": _Class(_WORD),
    "W": _Class(_WORD, negated=True),
    "s": _Class(_SPACE),
    "S": _Class(_SPACE, negated=True),
}
_ESCAPABLE = frozenset("\\.*+?()[]{}|^$-/")


# --- syntax tree ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Set:
    cls: _Class


@dataclass(frozen=True, slots=True)
class _Cat:
    items: tuple["_Node", ...]


@dataclass(frozen=True, slots=True)
class _Alt:
    options: tuple["_Node", ...]


@dataclass(frozen=True, slots=True)
class _Repeat:
    item: "_Node"
    low: int
    high: int | None


_Node = _Set | _Cat | _Alt | _Repeat


class _Parser:
    """Recursive-descent parser: ``alt := cat ('|' cat)*``, ``cat := (atom quant?)*``."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0
        self.depth = 0

    def fail(self, problem: str) -> RegexSyntaxError:
        return RegexSyntaxError(f"{problem} at offset {self.pos}")

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def take(self) -> str:
        char = self.text[self.pos]
        self.pos += 1
        return char

    def parse(self) -> _Node:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> _Node:
        options = [self.concatenation()]
        while self.peek() == "|":
            self.take()
            options.append(self.concatenation())
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def concatenation(self) -> _Node:
        items: list[_Node] = []
        while (char := self.peek()) is not None and char not in "|)":
            atom = self.atom()
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else _Cat(tuple(items))

    def atom(self) -> _Node:
        char = self.take()
        if char == "(":
            return self.group()
        if char == "[":
            return _Set(self.bracket())
        if char == ".":
            return _Set(_ANY)
        if char == "\\":
            return _Set(self.escape(in_class=False))
        if char in "*+?{":
            self.pos -= 1
            raise self.fail("nothing to repeat")
        if char in "^$":
            self.pos -= 1
            raise self.fail(f"anchor {char!r} is not supported (patterns match the whole value)")
        code = ord(char)
        return _Set(_Class(((code, code),)))

    def group(self) -> _Node:
        if self.peek() == "?":
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            else:
                raise self.fail("only non-capturing '(?:' groups are supported")
        self.depth += 1
        if self.depth > MAX_REGEX_GROUP_DEPTH:
            raise self.fail("groups nested too deeply")
        node = self.alternation()
        self.depth -= 1
        if self.peek() != ")":
            raise self.fail("missing ')'")
        self.take()
        return node

    def escape(self, *, in_class: bool) -> _Class:
        if self.peek() is None:
            raise self.fail("pattern ends with '\\'")
        char = self.take()
        if char in _SHORTHAND:
            return _SHORTHAND[char]
        if char in _ESCAPABLE:
            code = ord(char)
            return _Class(((code, code),))
        where = "in a class" if in_class else "outside a class"
        raise self.fail(f"escape '\\{char}' is not supported {where}")

    def bracket(self) -> _Class:
        negated = self.peek() == "^"
        if negated:
            self.take()
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            char = self.peek()
            if char is None:
                raise self.fail("missing ']'")
            if char == "]" and not first:
                self.take()
                break
            first = False
            low = self.class_item()
            if isinstance(low, _Class):
                if low.negated:
                    raise self.fail("negated shorthand inside a class is not supported")
                ranges.extend(low.ranges)
                continue
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.take()
                high = self.class_item()
                if isinstance(high, _Class):
                    raise self.fail("a class shorthand cannot end a range")
                if high < low:
                    raise self.fail("range out of order")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        return _Class(tuple(sorted(ranges)), negated=negated)

    def class_item(self) -> int | _Class:
        char = self.take()
        if char == "\\":
            cls = self.escape(in_class=True)
            if not cls.negated and len(cls.ranges) == 1 and cls.ranges[0][0] == cls.ranges[0][1]:
                return cls.ranges[0][0]
            return cls
        if char == "[":
            raise self.fail("'[' inside a class must be escaped")
        return ord(char)

    def quantified(self, atom: _Node) -> _Node:
        char = self.peek()
        if char == "*":
            low, high = 0, None
        elif char == "+":
            low, high = 1, None
        elif char == "?":
            low, high = 0, 1
        elif char == "{":
            low, high = self.braces()
            return self.after_quantifier(_Repeat(atom, low, high))
        else:
            return atom
        self.take()
        return self.after_quantifier(_Repeat(atom, low, high))

    def after_quantifier(self, node: _Node) -> _Node:
        if self.peek() in ("?", "+"):
            raise self.fail("lazy and possessive quantifiers are not supported")
        if self.peek() in ("*", "{"):
            raise self.fail("multiple repeat")
        return node

    def braces(self) -> tuple[int, int | None]:
        start = self.pos
        end = self.text.find("}", start)
        if end < 0:
            raise self.fail("missing '}' (escape a literal '{')")
        body = self.text[start + 1 : end]
        low_text, comma, high_text = body.partition(",")
        if not (low_text.isdigit() or low_text == "") or not (
            high_text.isdigit() or high_text == ""
        ):
            raise self.fail("malformed repetition (escape a literal '{')")
        if not low_text.isascii() or not high_text.isascii() or (not comma and not low_text):
            raise self.fail("malformed repetition (escape a literal '{')")
        low = int(low_text) if low_text else 0
        high: int | None = (int(high_text) if high_text else None) if comma else low
        if low > MAX_REGEX_REPEAT or (high is not None and high > MAX_REGEX_REPEAT):
            raise self.fail(f"repetition count above {MAX_REGEX_REPEAT}")
        if high is not None and high < low:
            raise self.fail("repetition range out of order")
        self.pos = end + 1
        return low, high


# --- automaton --------------------------------------------------------------------------


@dataclass(slots=True)
class _Char:
    cls: _Class
    out: int


@dataclass(slots=True)
class _Split:
    first: int
    second: int


_MATCH = 0  # state 0 is always the accepting state


class _Builder:
    """Compile a tree into NFA states, back to front, so every edge target already exists."""

    def __init__(self) -> None:
        self.states: list[_Char | _Split | None] = [None]  # index 0 is _MATCH

    def add(self, state: _Char | _Split) -> int:
        if len(self.states) >= MAX_REGEX_STATES:
            raise RegexSyntaxError(f"pattern compiles to more than {MAX_REGEX_STATES} states")
        self.states.append(state)
        return len(self.states) - 1

    def build(self, node: _Node, then: int) -> int:
        if isinstance(node, _Set):
            return self.add(_Char(node.cls, then))
        if isinstance(node, _Cat):
            for item in reversed(node.items):
                then = self.build(item, then)
            return then
        if isinstance(node, _Alt):
            starts = [self.build(option, then) for option in node.options]
            entry = starts[-1]
            for start in reversed(starts[:-1]):
                entry = self.add(_Split(start, entry))
            return entry
        return self.repeat(node, then)

    def repeat(self, node: _Repeat, then: int) -> int:
        if node.high is None:
            # item* : a split that either enters the body (which loops back) or leaves.
            loop = self.add(_Split(-1, then))
            body = self.build(node.item, loop)
            split = self.states[loop]
            assert isinstance(split, _Split)
            split.first = body
            entry = loop
        else:
            # (item(item(...)?)?)? : each optional copy may exit straight to ``then``.
            entry = then
            for _ in range(node.high - node.low):
                entry = self.add(_Split(self.build(node.item, entry), then))
        for _ in range(node.low):
            entry = self.build(node.item, entry)
        return entry


class SafeRegex:
    """A compiled pattern from the supported subset, matched in linear time.

    Instances are safe to share between threads: the only mutable part is a memo of DFA
    transitions whose entries are computed deterministically.
    """

    __slots__ = ("_cache", "_closures", "_start", "_states", "pattern")

    def __init__(self, pattern: str) -> None:
        """Parse and compile ``pattern``.

        Raises:
            RegexSyntaxError: the pattern is too long, malformed, outside the supported
                subset, or compiles to too many states.
        """
        if len(pattern) > MAX_REGEX_PATTERN_CHARS:
            raise RegexSyntaxError(f"pattern longer than {MAX_REGEX_PATTERN_CHARS} characters")
        self.pattern = pattern
        tree = _Parser(pattern).parse() if pattern else _Cat(())
        builder = _Builder()
        start = builder.build(tree, _MATCH)
        self._states = builder.states
        self._closures: dict[int, frozenset[int]] = {}
        self._start = self._closure(start)
        self._cache: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _closure(self, state: int) -> frozenset[int]:
        """The consuming states (and possibly ``_MATCH``) reachable by epsilon edges."""
        known = self._closures.get(state)
        if known is not None:
            return known
        seen: set[int] = set()
        found: set[int] = set()
        stack = [state]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            node = self._states[current]
            if isinstance(node, _Split):
                stack.append(node.second)
                stack.append(node.first)
            else:
                found.add(current)
        result = frozenset(found)
        self._closures[state] = result
        return result

    def _step(self, live: frozenset[int], char: str) -> tuple[frozenset[int], int]:
        """The live set after ``char``, and how many states were visited to compute it."""
        code = ord(char)
        following: set[int] = set()
        states = self._states
        for index in live:
            node = states[index]
            if isinstance(node, _Char):
                inside = False
                for low, high in node.cls.ranges:
                    if low <= code <= high:
                        inside = True
                        break
                if inside != node.cls.negated:
                    following |= self._closure(node.out)
        return frozenset(following), len(live)

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of ``text`` matches the pattern.

        Raises:
            RegexBudgetExceeded: ``text`` is longer than :data:`MAX_REGEX_INPUT_CHARS`, or
                matching it would visit more than :data:`MAX_REGEX_WORK_STEPS` states.
        """
        if len(text) > MAX_REGEX_INPUT_CHARS:
            raise RegexBudgetExceeded(f"value longer than {MAX_REGEX_INPUT_CHARS} characters")
        live = self._start
        cache = self._cache
        work = 0
        for char in text:
            key = (live, char)
            following = cache.get(key)
            if following is None:
                following, visited = self._step(live, char)
                work += visited
                if work > MAX_REGEX_WORK_STEPS:
                    raise RegexBudgetExceeded(
                        f"matching would visit more than {MAX_REGEX_WORK_STEPS} automaton states"
                    )
                if len(cache) >= MAX_REGEX_CACHE_ENTRIES:
                    cache.clear()
                cache[key] = following
            if not following:
                return False
            live = following
        return _MATCH in live

    def __repr__(self) -> str:
        """Show the source pattern."""
        return f"SafeRegex({self.pattern!r})"
