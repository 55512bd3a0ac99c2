"""The attacker's escape suite for ``glove exec`` (issue 3, item 10).

Every check is a real attempt made from inside a sandbox launched through the real CLI
(``python -P -m glove exec``), once by root and once by the unprivileged test user
(``GLOVE_UNPRIV_USER``, default ``glovetest``, with the venv copy at ``GLOVE_UNPRIV_PYTHON``),
and most pair the attack with a control that proves the attempt itself works. The probes
run inside: ``probes/probe.py`` (standard library only, on the system interpreter the sandbox
binds read-only) and ``probes/rawsys.c`` (compiled once per session with gcc, for raw clone
flags, 64-bit ioctl arguments and 32-bit ``int 0x80`` entries). ``probes/libdriver.py``
drives the library launch path from a busy multi-threaded host process.

Run as root: ``.venv/bin/python -m pytest tests/escape`` (after ``scripts/setup``, and after
re-copying glove into the unprivileged venv when the code changed).
"""
