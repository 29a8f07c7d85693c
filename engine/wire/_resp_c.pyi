from typing import Any

# The compiled RequestParser has the reference's interface exactly: mypy sees one class.
from streamkeep.engine.wire._resp_py import RequestParser as RequestParser

def encode_reply(value: Any, protocol: int = 2) -> bytes: ...
def write_reply(out: bytearray, value: Any, protocol: int) -> None: ...
