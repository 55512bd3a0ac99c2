"""The construction-only ``remote_linux_container`` backend and its forced executor.

Two halves, neither of which launches anything:

* ``gloved`` side: :class:`RemoteBackendConfig` is the ``[remote_backend]`` table of
  ``gloved.toml``; :func:`compose_remote_runtime` validates it, writes an isolated OpenSSH
  client config and a pinned known_hosts beneath the runtime directory, and returns a
  :class:`RemoteRuntime` whose :meth:`~RemoteRuntime.capabilities` says nothing is
  operational and whose :meth:`~RemoteRuntime.resolve` refuses every lifecycle method with
  ``method_not_found``. No DNS lookup, network probe, SSH process or Docker operation.
* remote side: ``glove-remote-executor --stdio`` (:func:`run_executor`), the SSH
  ``ForceCommand``. It checks its identity file and measures itself, then answers only
  ``remote_health``, always ``not_operational``.

See docs/remote.md.
"""

from glove.remote._config import (
    RemoteBackendConfig,
    check_host,
    check_host_key,
    check_image_reference,
    validate_remote_backend,
)
from glove.remote._executor import (
    ACCEPTED_ARGV,
    EXECUTOR_IDLE_DEADLINE_S,
    FRAME_RECEIVE_DEADLINE_S,
    main,
    run_executor,
    serve_channel,
)
from glove.remote._identity import (
    IDENTITY_PATH,
    MEASURED_MODULES,
    ExecutorIdentity,
    measure_executable,
    parse_identity,
    read_identity_file,
    render_identity,
    verify_identity,
)
from glove.remote._runtime import (
    BACKEND_NAME,
    RemoteCapabilities,
    RemoteRuntime,
    compose_remote_runtime,
)
from glove.remote._sshconfig import SSH_HOST_ALIAS, render_known_hosts, render_ssh_config
from glove.remote._wire import (
    EXECUTOR_MAX_FRAME_BYTES,
    HEALTH_METHOD,
    ExecutorRequest,
    HealthResult,
    decode_executor_request,
    encode_request,
    request_deadline,
    respond,
)
from glove.remote.errors import (
    DeadlineError,
    ExecutorError,
    ExecutorUsageError,
    FrameDeadlineExceeded,
    IdentityError,
    RemoteBackendError,
    RemoteConfigError,
    RemoteFilesError,
    RemoteMethodNotFound,
    ResponseDeadlineExceeded,
    TtlExhausted,
)

__all__ = [
    "ACCEPTED_ARGV",
    "BACKEND_NAME",
    "EXECUTOR_IDLE_DEADLINE_S",
    "EXECUTOR_MAX_FRAME_BYTES",
    "FRAME_RECEIVE_DEADLINE_S",
    "HEALTH_METHOD",
    "IDENTITY_PATH",
    "MEASURED_MODULES",
    "SSH_HOST_ALIAS",
    "DeadlineError",
    "ExecutorError",
    "ExecutorIdentity",
    "ExecutorRequest",
    "ExecutorUsageError",
    "FrameDeadlineExceeded",
    "HealthResult",
    "IdentityError",
    "RemoteBackendConfig",
    "RemoteBackendError",
    "RemoteCapabilities",
    "RemoteConfigError",
    "RemoteFilesError",
    "RemoteMethodNotFound",
    "RemoteRuntime",
    "ResponseDeadlineExceeded",
    "TtlExhausted",
    "check_host",
    "check_host_key",
    "check_image_reference",
    "compose_remote_runtime",
    "decode_executor_request",
    "encode_request",
    "main",
    "measure_executable",
    "parse_identity",
    "read_identity_file",
    "render_identity",
    "render_known_hosts",
    "render_ssh_config",
    "request_deadline",
    "respond",
    "run_executor",
    "serve_channel",
    "validate_remote_backend",
    "verify_identity",
]
