"""Systematic mutants of a receipt bundle: every line and field of its checkpoint note and
of its JSON, appended, removed, duplicated, reordered and re-encoded.

Each generator yields ``(class, name, bytes)``; the test asserts that every mutant differs
from the original and that none of them verifies. Two kinds of mutant are made on purpose:
*textual* edits of the exported bytes (what a careless editor or a lenient re-encoder does),
and *careful forgeries* re-encoded with Glove's own canonical encoder, so that only the
semantic checks (signature lines, proofs, the entry) can catch them.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from glove.protocol._json import dumps_pretty

Mutant = tuple[str, str, bytes]

DASH = "\u2014"
#: Characters a person cannot tell from an em dash, or from the space after it.
DASH_LOOKALIKES = (
    "\u2013",  # en dash
    "\u2012",  # figure dash
    "\u2015",  # horizontal bar
    "\u2212",  # minus sign
    "\u2e3a",  # two-em dash
    "\ufe58",  # small em dash
    "\ufe31",  # presentation form for vertical em dash
    "-",
    "--",
    "\u2014\u2014",
)
SPACE_LOOKALIKES = ("  ", "\t", "\u00a0", "\u2002", "\u2003", "\u2009", "\u202f", "\u3000", "")
#: Look-alike substitutions inside a key name (Cyrillic, fullwidth, zero-width).
NAME_LOOKALIKES = (
    ("e", "\u0435"),
    ("o", "\u043e"),
    ("a", "\u0430"),
    ("/", "\uff0f"),
    (".", "\u2024"),
    ("l", "\u04cf"),
)
ZERO_WIDTH = ("\u200b", "\u200d", "\ufeff", "\u2060")
B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_variants(text: str) -> Iterator[tuple[str, str]]:
    """Texts that lenient decoders read as the same bytes as canonical base64 ``text``, or
    that differ from it by an encoding detail only."""
    raw = base64.b64decode(text)
    stripped = text.rstrip("=")
    if stripped != text:
        yield "no padding", stripped
        # The unused low bits of the last character before the padding: lenient decoders
        # (Python's and Go's StdEncoding among them) ignore them.
        last = B64_ALPHABET.index(stripped[-1])
        for char in B64_ALPHABET:
            variant = stripped[:-1] + char + text[len(stripped) :]
            if char != stripped[-1] and _lenient(variant) == raw:
                yield f"padding bits {B64_ALPHABET.index(char) ^ last:#x}", variant
    yield "extra padding", text + "="
    yield "padding doubled", text + "=="
    yield "url-safe alphabet", text.replace("+", "-").replace("/", "_")
    yield "leading space", " " + text
    yield "trailing space", text + " "
    yield "space inside", text[:8] + " " + text[8:]
    yield "wrapped at 64", text[:64] + "\n" + text[64:]
    yield "padding inside", text[:4] + "=" + text[4:]
    yield "lower-cased", text.lower()
    yield "one more group", text.rstrip("=") + "AAAA"[: 4 - len(text.rstrip("=")) % 4] + "AAAA"
    yield "zero-width inside", text[:5] + "\u200b" + text[5:]


def _lenient(text: str) -> bytes | None:
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):
        return None


def _digits(value: int) -> Iterator[tuple[str, str]]:
    text = str(value)
    yield "leading zero", "0" + text
    yield "two leading zeros", "00" + text
    yield "plus sign", "+" + text
    yield "leading space", " " + text
    yield "trailing space", text + " "
    yield "underscore", text[0] + "_" + text[1:] if len(text) > 1 else text + "_0"
    yield "decimal point", text + ".0"
    yield "exponent", text + "e0"
    yield "arabic-indic digits", "".join(chr(0x0660 + int(d)) for d in text)
    yield "fullwidth digits", "".join(chr(0xFF10 + int(d)) for d in text)
    yield "hex", hex(value)
    yield "plus one", str(value + 1)
    yield "minus one", str(value - 1)
    yield "negative", "-" + text


# -- the checkpoint note ----------------------------------------------------------------------


def note_mutants(note: str, extra_lines: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """Mutants of a signed note: ``(class, name, note)``, each different from ``note`` and
    from every other. ``extra_lines`` are signature lines an attacker could add (name ->
    line, without the newline)."""
    seen = {note}
    for cls, name, mutant in _note_mutants(note, extra_lines):
        if mutant not in seen:
            seen.add(mutant)
            yield cls, name, mutant


def _note_mutants(note: str, extra_lines: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    lines = note[:-1].split("\n")  # origin, size, root, "", signature lines...
    blank = lines.index("")
    sig_at = list(range(blank + 1, len(lines)))
    n = len(lines)

    def render(parts: list[str]) -> str:
        return "\n".join(parts) + "\n"

    for i in range(n):
        yield "line removed", f"line {i}", render(lines[:i] + lines[i + 1 :])
        for j in range(n + 1):
            yield "line duplicated", f"line {i} at {j}", render([*lines[:j], lines[i], *lines[j:]])
    for i, j in itertools.permutations(range(n), 2):
        moved = lines[:i] + lines[i + 1 :]
        moved.insert(j, lines[i])
        if moved != lines:
            yield "line moved", f"line {i} to {j}", render(moved)
    for i, j in itertools.combinations(range(n), 2):
        swapped = list(lines)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        if swapped != lines:
            yield "lines swapped", f"{i} and {j}", render(swapped)
    yield "lines reversed", "all", render(lines[::-1])
    yield "signatures reversed", "all", render(lines[: blank + 1] + lines[blank + 1 :][::-1])
    for name, extra in extra_lines.items():
        for j in range(blank + 1, n + 1):
            yield "signature added", f"{name} at {j}", render([*lines[:j], extra, *lines[j:]])
        yield "signature replaced", name, render([*lines[: blank + 1], extra])
        yield "signature added", f"{name} after blank line", render([*lines, "", extra])
    for i in range(n):
        line = lines[i]
        for name, variant in (
            ("leading space", " " + line),
            ("trailing space", line + " "),
            ("trailing tab", line + "\t"),
            ("CR", line + "\r"),
            ("NUL", line + "\0"),
            ("DEL", line + "\x7f"),
            ("NEL", line + "\u0085"),
            ("line separator", line + "\u2028"),
            ("BOM", "\ufeff" + line),
            ("zero-width end", line + "\u200b"),
        ):
            yield (
                "line re-encoded",
                f"line {i}: {name}",
                render([*lines[:i], variant, *lines[i + 1 :]]),
            )
    # the text lines: origin, size, root
    origin, size, root = lines[0], lines[1], lines[2]
    for old, new in NAME_LOOKALIKES:
        if old in origin:
            yield "origin look-alike", repr(new), render([origin.replace(old, new, 1), *lines[1:]])
    for mark in ZERO_WIDTH:
        yield "origin look-alike", repr(mark), render([origin + mark, *lines[1:]])
    yield "origin case", "upper", render([origin.upper(), *lines[1:]])
    for name, variant in _digits(int(size)):
        yield "size re-encoded", name, render([origin, variant, *lines[2:]])
    for name, variant in b64_variants(root):
        yield "root re-encoded", name, render([origin, size, variant, *lines[3:]])
    yield "extension line", "added", render([*lines[:3], "x", *lines[3:]])
    yield "extension line", "empty", render([*lines[:3], "", *lines[3:]])
    # every signature line, every field of it
    for i in sig_at:
        line = lines[i]
        rest = line[len(DASH) + 1 :]
        key_name, _, blob = rest.partition(" ")

        def put(variant: str, i: int = i) -> str:
            return render([*lines[:i], variant, *lines[i + 1 :]])

        for dash in DASH_LOOKALIKES:
            yield "dash look-alike", f"line {i}: {dash!r}", put(dash + line[len(DASH) :])
        for space in SPACE_LOOKALIKES:
            yield "space re-encoded", f"line {i}: after dash {space!r}", put(DASH + space + rest)
            yield (
                "space re-encoded",
                f"line {i}: after name {space!r}",
                put(f"{DASH} {key_name}{space}{blob}"),
            )
        for old, new in NAME_LOOKALIKES:
            if old in key_name:
                yield (
                    "name look-alike",
                    f"line {i}: {new!r}",
                    put(f"{DASH} {key_name.replace(old, new, 1)} {blob}"),
                )
        for mark in ZERO_WIDTH:
            yield "name look-alike", f"line {i}: {mark!r}", put(f"{DASH} {key_name}{mark} {blob}")
        yield "name case", f"line {i}", put(f"{DASH} {key_name.upper()} {blob}")
        yield "name empty", f"line {i}", put(f"{DASH}  {blob}")
        for name, variant in b64_variants(blob):
            yield "signature re-encoded", f"line {i}: {name}", put(f"{DASH} {key_name} {variant}")
        raw = base64.b64decode(blob)
        for name, changed in (
            ("key hash zeroed", bytes(4) + raw[4:]),
            ("key hash +1", (int.from_bytes(raw[:4], "big") + 1).to_bytes(4, "big") + raw[4:]),
            ("signature zeroed", raw[:4] + bytes(len(raw) - 4)),
            ("one byte short", raw[:-1]),
            ("one byte long", raw + b"\0"),
            ("only the key hash", raw[:4]),
            ("first byte of signature", raw[:4] + bytes([raw[4] ^ 1]) + raw[5:]),
            ("last byte of signature", raw[:-1] + bytes([raw[-1] ^ 0x80])),
        ):
            encoded = base64.b64encode(changed).decode()
            yield "signature bytes", f"line {i}: {name}", put(f"{DASH} {key_name} {encoded}")
    # the whole note
    yield "note re-encoded", "CRLF", note.replace("\n", "\r\n")
    yield "note re-encoded", "CR", note.replace("\n", "\r")
    yield "note re-encoded", "no final newline", note[:-1]
    yield "note re-encoded", "two final newlines", note + "\n"
    yield "note re-encoded", "final blank line", note + "\n\n"
    yield "note re-encoded", "leading newline", "\n" + note
    yield "note re-encoded", "BOM", "\ufeff" + note
    yield "note re-encoded", "two blank lines", note.replace("\n\n", "\n\n\n", 1)
    yield "note re-encoded", "no blank line", note.replace("\n\n", "\n", 1)
    yield "note re-encoded", "blank line with a space", note.replace("\n\n", "\n \n", 1)
    yield "note re-encoded", "trailing space", note + " "
    yield "note re-encoded", "empty", ""


# -- the bundle's JSON ------------------------------------------------------------------------


def _pretty(doc: Any) -> bytes:
    return dumps_pretty(doc).encode()


def _reordered(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    keys = list(obj)
    for i, j in itertools.combinations(range(len(keys)), 2):
        order = list(keys)
        order[i], order[j] = order[j], order[i]
        yield f"swap {keys[i]} and {keys[j]}", {k: obj[k] for k in order}
    yield "reversed", {k: obj[k] for k in reversed(keys)}
    yield "sorted", {k: obj[k] for k in sorted(keys)}


def _object_mutants(obj: dict[str, Any], where: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Careful forgeries of one JSON object: reorder, extra field, removal, value changes."""
    for name, reordered in _reordered(obj):
        if list(reordered) != list(obj):
            yield "key order", f"{where}: {name}", reordered
    keys = list(obj)
    for position in range(len(keys) + 1):
        for extra, value in (
            ("extra", 1),
            ("witness", "witness.example/w1"),
            ("cosignatures", []),
            (keys[0].upper(), obj[keys[0]]),
            (keys[0] + "\u200b", obj[keys[0]]),
        ):
            items = list(obj.items())
            items.insert(position, (extra, value))
            yield "extra field", f"{where}: {extra!r} at {position}", dict(items)
    for key in keys:
        yield "field removed", f"{where}: {key}", {k: v for k, v in obj.items() if k != key}
        for name, value in _value_mutants(obj[key]):
            yield "field value", f"{where}.{key}: {name}", {**obj, key: value}


def _value_mutants(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, bool):
        yield "flipped", not value
        yield "as integer", int(value)
    elif isinstance(value, int):
        yield "plus one", value + 1
        yield "as float", float(value)
        yield "as string", str(value)
        if value in (0, 1):
            yield "as boolean", bool(value)
    elif isinstance(value, float):
        yield "tweaked", value * (1 + 2**-40)
        yield "as string", repr(value)
    elif isinstance(value, str):
        yield "suffix", value + "x"
        yield "trailing space", value + " "
        yield "as list", [value]
    elif isinstance(value, list):
        yield "emptied", []
        if value:
            yield "last removed", value[:-1]
            yield "first duplicated", [value[0], *value]
            yield "reversed", value[::-1]
    elif isinstance(value, dict):
        yield "emptied", {}
    yield "null", None


def json_mutants(
    data: bytes, *, leaf_forgeries: Callable[[bytes], Iterator[tuple[str, bytes]]]
) -> Iterator[Mutant]:
    """Mutants of a bundle's JSON: careful forgeries of every field of every object, and
    textual re-encodings of its bytes; each different from ``data`` and from every other."""
    seen = {data}
    for cls, name, mutant in _json_mutants(data, leaf_forgeries):
        if mutant not in seen:
            seen.add(mutant)
            yield cls, name, mutant


def _json_mutants(
    data: bytes, leaf_forgeries: Callable[[bytes], Iterator[tuple[str, bytes]]]
) -> Iterator[Mutant]:
    doc = json.loads(data)
    text = data.decode()
    for cls, name, changed in _object_mutants(doc, "bundle"):
        yield cls, name, _pretty(changed)
    for cls, name, changed in _object_mutants(doc["receipt"], "receipt"):
        yield "receipt " + cls, name, _pretty({**doc, "receipt": changed})
    if isinstance(doc["receipt"].get("outcome"), dict):
        for cls, name, changed in _object_mutants(doc["receipt"]["outcome"], "outcome"):
            receipt = {**doc["receipt"], "outcome": changed}
            yield "receipt " + cls, name, _pretty({**doc, "receipt": receipt})
    if "consistency" in doc:
        for cls, name, changed in _object_mutants(doc["consistency"], "consistency"):
            yield "consistency " + cls, name, _pretty({**doc, "consistency": changed})
        for name, variant in b64_variants(doc["consistency"]["from_root"]):
            part = {**doc["consistency"], "from_root": variant}
            yield "hash re-encoded", f"from_root: {name}", _pretty({**doc, "consistency": part})
    for key in ("inclusion_proof",) + (("consistency",) if "consistency" in doc else ()):
        hashes = doc[key] if key == "inclusion_proof" else doc[key]["proof"]
        for i, item in enumerate(hashes):
            for name, variant in b64_variants(item):
                changed = list(hashes)
                changed[i] = variant
                part: Any = changed if key == "inclusion_proof" else {**doc[key], "proof": changed}
                yield "hash re-encoded", f"{key}[{i}]: {name}", _pretty({**doc, key: part})
            for name, changed in (
                ("removed", hashes[:i] + hashes[i + 1 :]),
                ("duplicated", hashes[: i + 1] + hashes[i:]),
                ("zeroed", [*hashes[:i], base64.b64encode(bytes(32)).decode(), *hashes[i + 1 :]]),
            ):
                part = changed if key == "inclusion_proof" else {**doc[key], "proof": changed}
                yield "proof hash", f"{key}[{i}] {name}", _pretty({**doc, key: part})
        zero = base64.b64encode(bytes(32)).decode()
        for name, changed in (("zero appended", [*hashes, zero]), ("zero first", [zero, *hashes])):
            part = changed if key == "inclusion_proof" else {**doc[key], "proof": changed}
            yield "proof hash", f"{key} {name}", _pretty({**doc, key: part})
        if len(hashes) > 1:
            for i, j in itertools.combinations(range(len(hashes)), 2):
                changed = list(hashes)
                changed[i], changed[j] = changed[j], changed[i]
                part = changed if key == "inclusion_proof" else {**doc[key], "proof": changed}
                yield "proof hash", f"{key} swap {i} {j}", _pretty({**doc, key: part})
    for name, variant in b64_variants(doc["leaf"]):
        yield "leaf re-encoded", name, _pretty({**doc, "leaf": variant})
    for name, leaf in leaf_forgeries(base64.b64decode(doc["leaf"])):
        # The forger keeps leaf and receipt consistent: only the proof can tell.
        forged = {**doc, "leaf": base64.b64encode(leaf).decode(), "receipt": json.loads(leaf)}
        yield "leaf forged", name, _pretty(forged)
    # textual: duplicate keys at every object, with the same and with another value
    for key in doc:
        needle = f'\n  "{key}": '
        at = text.index(needle)
        value = json.dumps(doc[key], ensure_ascii=False)
        for name, dup in (("same value", value), ("null", "null")):
            yield (
                "duplicate key",
                f"bundle.{key} {name} before",
                (text[:at] + f'\n  "{key}": {dup},' + text[at:]).encode(),
            )
    for key in doc["receipt"]:
        needle = f'\n    "{key}": '
        at = text.index(needle)
        yield (
            "duplicate key",
            f"receipt.{key}",
            (text[:at] + f'\n    "{key}": null,' + text[at:]).encode(),
        )
        escaped = "".join(f"\\u{ord(c):04x}" for c in key)
        yield (
            "duplicate key",
            f"receipt.{key} escaped",
            (text[:at] + f'\n    "{escaped}": null,' + text[at:]).encode(),
        )
    # textual: numbers
    for key in ("tree_size", "leaf_index"):
        needle = f'"{key}": {doc[key]},'
        for name, variant in _digits(doc[key]):
            yield (
                "number re-encoded",
                f"{key}: {name}",
                text.replace(needle, f'"{key}": {variant},').encode(),
            )
    # textual: strings with the same meaning, other bytes
    for name, old, new in (
        ("em dash escaped", "\u2014", "\\u2014"),
        ("slash escaped", "/", "\\/"),
        ("newline as \\u000a", "\\n", "\\u000a"),
        ("letter escaped", '"format": "g', '"format": "\\u0067'),
        ("non-ASCII escaped", "\u00e9", "\\u00e9"),
        ("upper-case escape", "\\u", "\\U"),
    ):
        if old in text:
            yield "string re-encoded", name, text.replace(old, new, 1).encode()
    # textual: whitespace and layout
    yield "layout", "compact", json.dumps(doc, ensure_ascii=False).encode()
    yield "layout", "indent 4", (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()
    yield "layout", "ASCII escapes", (json.dumps(doc, indent=2) + "\n").encode()
    yield (
        "layout",
        "sorted keys",
        (json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode(),
    )
    yield "layout", "CRLF", text.replace("\n", "\r\n").encode()
    yield "layout", "tabs", text.replace("  ", "\t").encode()
    yield "layout", "no final newline", text[:-1].encode()
    yield "layout", "two final newlines", (text + "\n").encode()
    yield "layout", "BOM", ("\ufeff" + text).encode()
    yield "layout", "leading space", (" " + text).encode()
    for i, line in enumerate(text.split("\n")[:-1]):
        lines = text.split("\n")
        for name, variant in (
            ("indent +1", " " + line),
            ("indent -1", line[1:] if line.startswith(" ") else None),
            ("trailing space", line + " "),
            ("space after colon", line.replace('": ', '":  ', 1) if '": ' in line else None),
            ("no space after colon", line.replace('": ', '":', 1) if '": ' in line else None),
        ):
            if variant is None:
                continue
            lines[i] = variant
            yield "layout", f"line {i}: {name}", "\n".join(lines).encode()
            lines[i] = line


def byte_mutants(data: bytes) -> Iterator[Mutant]:
    """Every byte deleted, and a byte inserted at every position."""
    for position in range(len(data)):
        yield "byte deleted", str(position), data[:position] + data[position + 1 :]
    for position in range(len(data) + 1):
        for insert in (b" ", b"\n", b"0"):
            yield (
                "byte inserted",
                f"{insert!r} at {position}",
                data[:position] + insert + data[position:],
            )
