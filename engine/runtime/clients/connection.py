"""The facade's connection methods (Redis's "connection" group): PING, ECHO and CLIENT's calls
as redis-py 8.1 makes them.

Owns `ConnectionCommands`. Not here: SELECT (one database), AUTH and HELLO (an in-process
facade has no connection to authenticate). Must not touch: anything but argv.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.runtime.clients.base import ClientBase, DataError, sends

_NO_CLIENT_IDS: list[Any] = []  # client_list's default (redis-py's `client_id=[]`); never changed


class ConnectionCommands(ClientBase):
    """redis-py 8.1's connection methods."""

    __slots__ = ()

    @sends("ping")
    def ping(self, **kwargs: Any) -> bool:
        return self.execute_command("PING", **kwargs)

    @sends("echo")
    def echo(self, value: Any, **kwargs: Any) -> bytes | str:
        return self.execute_command("ECHO", value, **kwargs)

    @sends("client|id")
    def client_id(self, **kwargs: Any) -> int:
        return self.execute_command("CLIENT ID", **kwargs)

    @sends("client|setname")
    def client_setname(self, name: str, **kwargs: Any) -> bool:
        return self.execute_command("CLIENT SETNAME", name, **kwargs)

    @sends("client|getname")
    def client_getname(self, **kwargs: Any) -> str | None:
        return self.execute_command("CLIENT GETNAME", **kwargs)

    @sends("client|list")
    def client_list(self, _type: str | None = None, client_id: list = _NO_CLIENT_IDS,
                    **kwargs: Any) -> list[dict[str, str]]:
        args: list[Any] = []
        if _type is not None:
            client_types = ("normal", "master", "replica", "pubsub")
            if str(_type).lower() not in client_types:
                raise DataError(f"CLIENT LIST _type must be one of {client_types!r}")
            args += (b"TYPE", _type)
        if not isinstance(client_id, list):
            raise DataError("client_id must be a list")
        if client_id:
            args.append(b"ID")
            args += client_id
        return self.execute_command("CLIENT LIST", *args, **kwargs)
