from array import array
from collections.abc import Callable

def scan(maxes: list[int], chunks: list[tuple[array, ...]], start: int, min_idle: int,
         now: int, count: int, attempts: int, inc: int, get: Callable[[int], object | None],
         ) -> tuple[list[int], list[int], list[object | None], int | None]: ...
def claim(maxes: list[int], chunks: list[tuple[array, ...]], sids: list[int], time_ms: int,
          counts: list[int],
          owner: int) -> tuple[list[int], list[int], list[int], list[int]]: ...
def remove_sorted(maxes: list[int], chunks: list[tuple[array, ...]], ms: list[int],
                  seq: list[int]) -> int: ...
