"""A campaign over several boxes: the user's own OpenSSH client and rsync, nothing else.

A lot with a `host` is another rented box. Everything that reaches it goes through
`ssh` (BatchMode, one ControlMaster connection per host, the user's own
~/.ssh/config and host-key policy) and `rsync -e ssh`; no daemon port is opened on
any box. Stdlib only: the room, the engine and the CLI may all use it.
"""
