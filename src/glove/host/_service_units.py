"""Rendering the service definitions from the templates in ``deploy/``.

There is one copy of each template: ``deploy/systemd/gloved.service`` and
``deploy/launchd/gloved.plist`` at the top of the source tree, reached from the package as
``glove/host/deploy`` (a link in the source tree, real files in a wheel). Rendering
substitutes ``@TOKEN@`` placeholders and nothing else; a template whose tokens are not
exactly the expected set is refused, so an edited template cannot silently keep a
placeholder or lose one.

Every substituted value comes from local resolution (the CLI's own idea of where
``gloved`` is), but it is still checked: a path holding a newline would add a directive to
a unit file, a ``%`` or ``$`` would be expanded by systemd, so such paths are refused with
a message rather than quoted in a way nobody has tested.
"""

from __future__ import annotations

import plistlib
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Final
from xml.parsers.expat import ExpatError
from xml.sax.saxutils import escape

from glove.host.errors import TemplateError, UnsafeExecutable

SYSTEMD_UNIT_NAME: Final = "gloved.service"
LAUNCHD_LABEL: Final = "org.glove.gloved"
SYSTEMD_TEMPLATE: Final = "systemd/gloved.service"
LAUNCHD_TEMPLATE: Final = "launchd/gloved.plist"
MAX_TEMPLATE_BYTES: Final = 64 * 1024

_TOKEN: Final = re.compile(r"@([A-Z][A-Z_]*)@")
# Characters a unit file would interpret in ExecStart= (specifiers, variables, quoting,
# escapes, command separators) or that end a line. Refused in a substituted path.
_UNIT_SPECIAL: Final = re.compile(r"[%$\\\"';\x00-\x1f\x7f]")
_XML_FORBIDDEN: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def template_text(name: str) -> str:
    """Read a template shipped with the package (``systemd/...`` or ``launchd/...``).

    Raises:
        TemplateError: the template is missing, unreadable or implausibly large.
    """
    source = resources.files("glove.host").joinpath("deploy", *name.split("/"))
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise TemplateError(f"service template {name} is missing from the package: {exc}") from exc
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"service template {name} is over {MAX_TEMPLATE_BYTES} bytes")
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise TemplateError(f"service template {name} is not UTF-8") from exc


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute every ``@TOKEN@`` in ``template`` with ``values[TOKEN]``.

    Raises:
        TemplateError: the template's tokens are not exactly the keys of ``values``.
    """
    found = set(_TOKEN.findall(template))
    if found != set(values):
        missing, extra = sorted(set(values) - found), sorted(found - set(values))
        raise TemplateError(f"template tokens differ: missing {missing}, unexpected {extra}")
    return _TOKEN.sub(lambda m: values[m.group(1)], template)


def unit_word(path: Path) -> str:
    """Spell an absolute path as one ``ExecStart=`` word (double-quoted if it has spaces).

    Raises:
        UnsafeExecutable: the path is relative, or holds a character systemd would
            interpret (``% $ \\ " ' ;``, control characters).
    """
    text = str(path)
    if not path.is_absolute():
        raise UnsafeExecutable(f"{text} is not an absolute path")
    bad = _UNIT_SPECIAL.search(text)
    if bad:
        raise UnsafeExecutable(
            f"the path {text!r} holds {bad.group()!r}, which a unit file would interpret; "
            "install glove under a plainer path"
        )
    return f'"{text}"' if " " in text else text


def xml_text(value: str) -> str:
    """Escape ``value`` for an XML ``<string>``.

    Raises:
        UnsafeExecutable: the value holds a character XML 1.0 cannot carry.
    """
    if _XML_FORBIDDEN.search(value):
        raise UnsafeExecutable(f"{value!r} holds a control character a plist cannot carry")
    return escape(value)


def render_systemd_unit(executable: Path, config: Path, template: str | None = None) -> str:
    """Render ``gloved.service`` for ``executable``, bound to the ``config`` (gloved.toml)
    this user's ``glove setup`` made: the user manager's environment cannot point gloved
    at another one.

    Raises:
        TemplateError: the template is missing or its tokens are wrong.
        UnsafeExecutable: a path cannot be written into a unit file safely.
    """
    text = template_text(SYSTEMD_TEMPLATE) if template is None else template
    return render(text, {"GLOVED": unit_word(executable), "CONFIG": unit_word(config)})


def render_launchd_plist(
    executable: Path, runtime_dir: Path, log_path: Path, config: Path, template: str | None = None
) -> bytes:
    """Render the LaunchAgent plist, and check it parses to what was meant.

    Raises:
        TemplateError: the template is missing, its tokens are wrong, or the result is not
            a plist with the fixed label and exactly these program arguments.
        UnsafeExecutable: a value cannot be carried in a plist.
    """
    text = template_text(LAUNCHD_TEMPLATE) if template is None else template
    for path in (executable, runtime_dir, log_path, config):
        if not path.is_absolute():
            raise UnsafeExecutable(f"{path} is not an absolute path")
    rendered = render(
        text,
        {
            "GLOVED": xml_text(str(executable)),
            "RUNTIME_DIR": xml_text(str(runtime_dir)),
            "LOG_PATH": xml_text(str(log_path)),
            "CONFIG": xml_text(str(config)),
        },
    ).encode()
    try:
        parsed = plistlib.loads(rendered, fmt=plistlib.FMT_XML)
    except (ExpatError, ValueError) as exc:
        raise TemplateError(f"the rendered plist does not parse: {exc}") from exc
    want = [str(executable), "--runtime-dir", str(runtime_dir), "--config", str(config)]
    if parsed.get("Label") != LAUNCHD_LABEL or parsed.get("ProgramArguments") != want:
        raise TemplateError("the rendered plist does not hold the fixed label and arguments")
    return rendered
