"""The wallet status bridge: construction-only, status-only, disabled by default.

Three private parts and their proof, wired into nothing (not ``gloved``, not a launcher,
not an environment variable, not capability discovery); see ``docs/wallet.md``:

* the protocol processor (:class:`StatusProcessor`): one strict ``wallet_status`` request
  in, the sanitized v1 status (or a generic "unavailable") out, from four authorities
  under their generation contracts (:func:`contracted`), after :func:`check_structure`;
* the synthetic owner (:class:`SyntheticOwner`): one verified unnamed socketpair and the
  actor (:class:`WalletStatusWorker`) that alone serves its host end;
* the Pi adapter (:class:`PiStatusAdapter`): the status as one read-only Pi tool, over a
  single-operation fake channel (:class:`FakeStatusChannel`).

Offline authority fakes and a fake clock live in :mod:`glove.testing.wallet`.
"""

from glove.wallet._authority import (
    AdapterAuthority,
    AdapterSnapshot,
    Authorities,
    Clock,
    MonotonicClock,
    PlanAuthority,
    PlanSnapshot,
    ReadinessAuthority,
    ReadinessSnapshot,
    ServerStatusAuthority,
    ServerStatusSnapshot,
    SessionBinding,
)
from glove.wallet._contract import (
    AdapterContract,
    GenerationLedger,
    PlanContract,
    ReadinessContract,
    ServerStatusContract,
    contracted,
)
from glove.wallet._messages import (
    SCHEMA_VERSION,
    STATUS_METHOD,
    StatusReply,
    StatusRequest,
    StatusResult,
    decode_reply,
    decode_request,
    encode_request,
)
from glove.wallet._owner import SyntheticOwner, check_endpoint, open_socketpair
from glove.wallet._pi import (
    ABSENT_TEXT,
    CONNECTED_TEXT,
    DISCONNECTED_TEXT,
    PI_TOOL_NAME,
    FakeStatusChannel,
    PiStatusAdapter,
    PiToolDescriptor,
    PiToolResult,
    StatusChannel,
)
from glove.wallet._processor import MAX_OBSERVATION_AGE_S, StatusOutcome, StatusProcessor
from glove.wallet._structure import MAX_FRAME_BYTES, MAX_NESTING, check_structure
from glove.wallet._worker import (
    REQUEST_DEADLINE_S,
    CloseReason,
    SessionCloser,
    WalletStatusWorker,
)
from glove.wallet.errors import (
    AuthorityContractError,
    AuthorityDeadline,
    AuthorityError,
    AuthorityFailed,
    EndpointCheckFailed,
    EndpointError,
    GenerationReuse,
    GenerationRollback,
    GuestEndpointTaken,
    OwnerLifetimeError,
    RequestExpired,
    StatusChannelError,
    WalletDisabled,
    WalletError,
    WalletFrameError,
)

__all__ = [
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
