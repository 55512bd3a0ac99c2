"""Linux implementation of the sandbox (namespaces, mounts, seccomp, cgroups, PTY)."""
