"""The engine as its own process, and its clients.

One engine process per campaign per box, detached from any terminal, the only
writer of its ledger (`server`, `daemon`); the room, the CLI actions and a room
on another box are its clients (`client`) over an owner-only Unix socket or
the user's own ssh (`bridge`), speaking one protocol (`protocol`, `codec`).
Closing a client never stops a rule. See ARCHITECTURE.md, "Processes".
"""
