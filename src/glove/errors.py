"""The root of every error Glove raises on purpose.

Each package family keeps its own ``errors`` module whose classes derive from
:class:`GloveError`, so a caller can catch everything Glove means to raise in one clause
and still tell a sandbox refusal from a journal failure::

    GloveError
    ├── actors.errors.ActorError          (ActorDead, Busy, DeadlineExceeded, ChildFailed)
    ├── protocol.errors.ProtocolError     (FrameTooLarge, TruncatedFrame, MalformedFrame,
    │                                      DuplicateKey)
    ├── protocol.errors.RequestError      (InvalidParams: one request refused, connection kept)
    ├── control.errors.ControlError       (DaemonAlreadyRunning, DaemonUnavailable,
    │                                      ConnectionLost, ClientClosed, ClientTimeout,
    │                                      RemoteError, DaemonProtocolError, MethodError,
    │                                      RegistryError, RequestInvalid, NotifyError)
    ├── config.errors.ConfigError         (UnsafePath: a Glove file not owner-only;
    │                                      GlovedConfigError: gloved.toml)
    ├── host.errors.HostError             (ServiceError: glove daemon install and control)
    ├── container.errors.SandboxError     (setup, limits, profiles)
    ├── journal.errors.JournalError       (codec, chain, recovery, writer, receipts)
    ├── records.errors.RecordInvalid      (a journal event or receipt that does not decode)
    ├── policy.errors.PolicyError         (policy file and evaluation)
    ├── plan.errors.PlanError             (a refused plan: every problem with its JSON path;
    │                                      CanonicalError)
    ├── plan.errors.LocalPolicyError      (the owner's LocalPolicy is inconsistent)
    ├── mcp.errors.McpError               (framing, upstream transport, kernel)
    ├── remote.errors.RemoteBackendError  (config, SSH files, executor identity and deadlines)
    ├── egress.errors.EgressError         (rules, protocol parsers, channel, upstream)
    └── wallet.errors.WalletError         (WalletFrameError, AuthorityError, EndpointError, ...)
"""


class GloveError(Exception):
    """Base class of every error Glove raises deliberately."""
