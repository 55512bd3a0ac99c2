"""The package's surface and its boundary: pinned exports, typed errors, sans-IO cores,
and nothing in Glove that wires the bridge in."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import glove.wallet
import glove.wallet.errors
from glove.errors import GloveError
from tests._ast import parse as parse_source

SRC = Path(glove.wallet.__file__).resolve().parents[1]
WALLET = SRC / "wallet"
SANS_IO = ("_structure.py", "_messages.py", "_authority.py", "_contract.py", "_processor.py")
FORBIDDEN_IMPORTS = {"asyncio", "os", "socket", "selectors", "subprocess", "fcntl"}


def test_public_names_are_pinned() -> None:
    """``__all__`` is the documented contract, in ruff's isort order, every name documented."""
    assert glove.wallet.__all__ == [
        "ABSENT_TEXT",
        "CONNECTED_TEXT",
        "DISCONNECTED_TEXT",
        "MAX_FRAME_BYTES",
        "MAX_NESTING",
        "MAX_OBSERVATION_AGE_S",
        "PI_TOOL_NAME",
        "REQUEST_DEADLINE_S",
        "SCHEMA_VERSION",
        "STATUS_METHOD",
        "AdapterAuthority",
        "AdapterContract",
        "AdapterSnapshot",
        "Authorities",
        "AuthorityContractError",
        "AuthorityDeadline",
        "AuthorityError",
        "AuthorityFailed",
        "Clock",
        "CloseReason",
        "EndpointCheckFailed",
        "EndpointError",
        "FakeStatusChannel",
        "GenerationLedger",
        "GenerationReuse",
        "GenerationRollback",
        "GuestEndpointTaken",
        "MonotonicClock",
        "OwnerLifetimeError",
        "PiStatusAdapter",
        "PiToolDescriptor",
        "PiToolResult",
        "PlanAuthority",
        "PlanContract",
        "PlanSnapshot",
        "ReadinessAuthority",
        "ReadinessContract",
        "ReadinessSnapshot",
        "RequestExpired",
        "ServerStatusAuthority",
        "ServerStatusContract",
        "ServerStatusSnapshot",
        "SessionBinding",
        "SessionCloser",
        "StatusChannel",
        "StatusChannelError",
        "StatusOutcome",
        "StatusProcessor",
        "StatusReply",
        "StatusRequest",
        "StatusResult",
        "SyntheticOwner",
        "WalletDisabled",
        "WalletError",
        "WalletFrameError",
        "WalletStatusWorker",
        "check_endpoint",
        "check_structure",
        "contracted",
        "decode_reply",
        "decode_request",
        "encode_request",
        "open_socketpair",
    ]
    for name in glove.wallet.__all__:
        value = getattr(glove.wallet, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, name


def test_check_structure_signature_is_the_issues() -> None:
    """``check_structure(frame: bytes) -> None``, raising ``WalletFrameError``."""
    signature = inspect.signature(glove.wallet.check_structure)
    assert list(signature.parameters) == ["frame"]
    assert signature.parameters["frame"].annotation in (bytes, "bytes")
    assert signature.return_annotation in (None, "None")
    assert "WalletFrameError" in (glove.wallet.check_structure.__doc__ or "")


def test_every_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Each error class derives from WalletError (a GloveError) and appears in the docstring."""
    tree = glove.wallet.errors.__doc__ or ""
    errors = [
        value
        for value in vars(glove.wallet.errors).values()
        if inspect.isclass(value) and issubclass(value, Exception) and value is not GloveError
    ]
    assert len(errors) >= 15
    for error in errors:
        assert issubclass(error, glove.wallet.WalletError), error
        assert re.search(rf"\b{error.__name__}\b", tree), error.__name__
    assert issubclass(glove.wallet.WalletFrameError, glove.wallet.WalletError)
    assert issubclass(glove.wallet.WalletError, GloveError)


def test_cores_are_sans_io() -> None:
    """The scan, the messages, the authorities, the contracts and the processor do no I/O."""
    for name in SANS_IO:
        tree = parse_source((WALLET / name).read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for imported in names:
                assert imported.split(".")[0] not in FORBIDDEN_IMPORTS, f"{name}: {imported}"
                assert not imported.startswith(("glove.actors", "glove.wallet._owner")), imported


def test_nothing_in_glove_wires_the_bridge_in() -> None:
    """Only the package itself and the test fakes import glove.wallet: no daemon, launcher,
    CLI or capability discovery composes it."""
    importers = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "wallet" or relative == Path("testing/wallet.py"):
            continue
        text = path.read_text()
        if re.search(r"glove\.wallet|from glove import wallet|\bwallet_status\b", text):
            importers.append(str(relative))
    assert importers == []


def test_the_bridge_reads_no_environment_and_opens_no_network() -> None:
    """No environment variable advertises or configures it; it never connects anywhere."""
    for path in WALLET.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"\benviron\b|\bgetenv\b|\bputenv\b", text), path.name
        for call in ("connect(", "create_connection", "urlopen", "getaddrinfo", "AF_INET"):
            assert call not in text, f"{path.name}: {call}"
