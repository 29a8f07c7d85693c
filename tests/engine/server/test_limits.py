"""engine.server.limits: Redis's adjustOpenFilesLimit arithmetic, against a fake RLIMIT_NOFILE
(the real one is exercised by tests/attacks/test_descriptors.py under `ulimit -n 256`)."""

from __future__ import annotations

import resource

import pytest

from streamkeep.engine.server import limits
from streamkeep.engine.server.limits import RESERVED_FDS, adjust_open_files_limit


class FakeLimit:
    """RLIMIT_NOFILE as (soft, hard); setrlimit above hard fails as the kernel's does."""

    def __init__(self, soft: int, hard: int) -> None:
        self.soft, self.hard = soft, hard

    def getrlimit(self, which: int) -> tuple[int, int]:
        return self.soft, self.hard

    def setrlimit(self, which: int, value: tuple[int, int]) -> None:
        if value[0] > self.hard != resource.RLIM_INFINITY:
            raise ValueError("not allowed to raise maximum limit")
        self.soft = value[0]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLimit:
    limit = FakeLimit(256, 256)
    monkeypatch.setattr(limits.resource, "getrlimit", limit.getrlimit)
    monkeypatch.setattr(limits.resource, "setrlimit", limit.setrlimit)
    return limit


def test_enough_already(fake: FakeLimit) -> None:
    fake.soft = fake.hard = 20000
    assert adjust_open_files_limit(10000) == limits.Adjustment(10000)


def test_raised_up_to_what_is_wanted(fake: FakeLimit) -> None:
    fake.soft, fake.hard = 1024, 1 << 20
    adjustment = adjust_open_files_limit(10000)
    assert adjustment.maxclients == 10000 and not adjustment.warnings
    assert fake.soft == 10000 + RESERVED_FDS
    assert "Increased maximum number of open files to 10032" in adjustment.notices[0]


def test_lowered_when_the_hard_limit_is_too_low(fake: FakeLimit) -> None:
    fake.soft, fake.hard = 256, 1000
    adjustment = adjust_open_files_limit(10000)
    assert fake.soft == 1000  # raised as far as it goes
    assert adjustment.maxclients == 1000 - RESERVED_FDS
    assert "maxclients has been reduced to 968" in adjustment.warnings[-1]


def test_lowered_at_the_hard_limit(fake: FakeLimit) -> None:
    adjustment = adjust_open_files_limit(10000)
    assert adjustment.maxclients == 256 - RESERVED_FDS
    assert adjustment.fatal is None


def test_limit_below_the_reserve_is_fatal(fake: FakeLimit) -> None:
    fake.soft = fake.hard = RESERVED_FDS
    assert adjust_open_files_limit(10).fatal is not None


def test_a_small_maxclients_fits(fake: FakeLimit) -> None:
    assert adjust_open_files_limit(100) == limits.Adjustment(100)
