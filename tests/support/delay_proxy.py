"""A TCP relay that delays what it forwards: the partition test's slow link (this kernel has no
netem). Every chunk read from one side is written to the other DELAY seconds later, in order,
while the file FLAG exists; at once otherwise.

    python -m tests.support.delay_proxy LISTEN_PORT TARGET_HOST TARGET_PORT FLAG DELAY
"""

from __future__ import annotations

import asyncio
import os
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flag: str,
                delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(1 << 16):
            await queue.put((loop.time() + (delay if os.path.exists(flag) else 0), data))
    except OSError:
        pass
    await queue.put((0.0, b""))
    await sender


async def main(port: int, host: str, target: int, flag: str, delay: float) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer, flag, delay),
                             _pipe(upstream_reader, writer, flag, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(relay, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(int(args[0]), args[1], int(args[2]), args[3], float(args[4])))
