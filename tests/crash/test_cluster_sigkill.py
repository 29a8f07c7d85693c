"""The crash bench's cluster mode (tools/crashbench/cluster.py): SIGKILL of the nodes of a
cluster of real `streamkeep serve --cluster-enabled yes` processes (one node at a random moment,
every node at once, one node while a newer topology is set), each restarted on its port and data
directory, every shard judged. Its per-key judgement is shown to catch each kind of damage, and
its rounds to catch a shard that lost its data and a node restarted on an older nodes.conf
(which answers MOVED by the topology it holds)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from streamkeep.tools.crashbench.cluster import (
    ACKED,
    DOUBT,
    MOMENTS,
    UNSENT,
    Push,
    answers_by,
    check_shards,
    check_topology,
    judge_key,
    make_cluster,
    moved_to,
    new_run,
    play_round,
    rows,
)
from streamkeep.tools.crashbench.report import Row

A, B, C, D = (b"0:1:0",), (b"0:2:0", b"0:2:1"), (b"0:3:0",), (b"0:4:0",)


def test_moved_lines_are_read_as_cluster_clients_read_them():
    assert moved_to("MOVED 3999 127.0.0.1:6381", ("h", 1)) == (3999, ("127.0.0.1", 6381))
    assert moved_to("MOVED 12 :7001", ("10.0.0.5", 7000)) == (12, ("10.0.0.5", 7001))
    assert moved_to("MOVED 12 [::1]:7001", ("h", 1)) == (12, ("::1", 7001))
    assert moved_to("ASK 12 127.0.0.1:7001", ("h", 1)) is None
    assert moved_to("WRONGTYPE Operation against a key", ("h", 1)) is None


def test_a_list_holding_every_acknowledged_push_in_order_passes():
    pushes = [Push(A, ACKED), Push(B, DOUBT), Push(C, UNSENT), Push(D, ACKED)]
    for got in ([*A, *B, *D], [*A, *D]):  # the in-doubt push whole or absent
        verdict = judge_key(pushes, got, "always")
        assert not verdict.problems and not verdict.lost
    assert [p.values for p in judge_key(pushes, [*A, *B, *D], "always").kept] == [A, B, D]


@pytest.mark.parametrize("got,policy,problem,lost", [
    ([*A], "always", None, 1),  # an acknowledged push gone
    ([*D], "everysec", "a hole", 1),  # under everysec a lost tail only, never a hole
    ([*A, B[0], *D], "always", "part of the push", 0),  # a push torn
    ([*A, *C, *D], "always", "never sent", 0),  # an unsent push present
    ([*D, *A], "always", "no push of this key", 1),  # out of order
    ([*A, *D, b"9:9:9"], "always", "no push of this key", 0),  # a value nobody pushed
])
def test_the_judgement_catches_each_kind_of_damage(got, policy, problem, lost):
    pushes = [Push(A, ACKED), Push(B, DOUBT), Push(C, UNSENT), Push(D, ACKED)]
    verdict = judge_key(pushes, got, policy)
    assert len(verdict.lost) == lost
    if problem is None:
        assert not verdict.problems
    else:
        assert any(problem in p for p in verdict.problems), verdict.problems


def _kill(cluster) -> None:
    for server in cluster.servers:
        server.kill()


def test_the_cluster_rounds_keep_every_acknowledged_push():
    notes: list[str] = []
    rounds = len(MOMENTS) + 1  # (and under always, a slot move's)
    row = rows("always", 3, 3, rounds, None, notes=notes)[0]
    assert row.ok, [f.detail for f in row.found]
    assert row.covered == rounds and row.acked > 0 and row.lost == 0
    shards = re.search(r"per shard: node 1 ([\d,]+), node 2 ([\d,]+), node 3 ([\d,]+)",
                       notes[0])
    assert shards and all(int(n.replace(",", "")) > 0 for n in shards.groups()), notes
    assert f"{len(MOMENTS) + 3} kills" in notes[0]  # one, every (three), one, one
    assert re.search(r"[1-9][\d,]* MOVED and ASK replies followed", notes[0]), notes
    assert "1 slot moves killed in the middle" in notes[0], notes


def test_the_rounds_catch_a_lost_shard_and_a_stale_topology(tmp_path):
    cluster = make_cluster(str(tmp_path), 3, "always")
    try:
        run = new_run(Row("always", "sigkill (cluster of 3)", "process crash"), cluster,
                      "always", 5)
        old_conf = (tmp_path / "node-1" / "nodes.conf").read_bytes()
        old_owner = list(cluster.owner)
        play_round(run, "one node", 1)
        play_round(run, "topology", 2)  # the moving slot is node 2's from now on
        assert run.row.ok, [f.detail for f in run.row.found]
        assert cluster.owner[cluster.moving_slot] == 1 != old_owner[cluster.moving_slot]
        # Node 2 restarted on the nodes.conf it had before: it holds the older topology, and
        # answers by it (MOVED to node 1 for the slot it was given since).
        node = cluster.servers[1]
        node.kill()
        new_conf = (tmp_path / "node-1" / "nodes.conf").read_bytes()
        (tmp_path / "node-1" / "nodes.conf").write_bytes(old_conf)
        node.start()
        assert answers_by(cluster, 1, old_owner) == ""
        assert answers_by(cluster, 1, cluster.owner).startswith("a read of slot")
        stale = check_topology(run, 3, "node 2 on its older nodes.conf")
        assert [v.invariant for v in stale] == ["topology"]
        assert "epoch 1" in stale[0].detail and "epoch 2" in stale[0].detail
        node.kill()  # (the controller's topology again, for what follows)
        (tmp_path / "node-1" / "nodes.conf").write_bytes(new_conf)
        node.start()
        assert check_topology(run, 3, "node 2 on its newest nodes.conf") == []
        shutil.copytree(cluster.servers[2].data_dir, tmp_path / "backup",
                        ignore=shutil.ignore_patterns("LOCK"))
        play_round(run, "one node", 4)  # (every shard written to before its kill)
        assert run.row.ok, [f.detail for f in run.row.found]
        # Node 3 restarted on an older copy of its directory (its data as it was before the
        # last round): its shard's acknowledged pushes of that round are lost, and said to be.
        node = cluster.servers[2]
        node.kill()
        shutil.rmtree(node.data_dir)
        shutil.move(str(tmp_path / "backup"), node.data_dir)
        node.start()
        violations, lost, _window = check_shards(run, 4, "node 3 restored", 0.0)
        assert lost > 0 and {v.invariant for v in violations} == {"acked-lost"}
        assert all("on node 3" in v.detail for v in violations)
    finally:
        _kill(cluster)


def test_the_cli_runs_the_cluster_mode_and_refuses_what_does_not_go_with_it(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "streamkeep", "crashbench", "--cluster", "2",
                           "--points", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] and doc["rows"][0]["mode"] == "sigkill (cluster of 2)"
    assert doc["rows"][0]["covered"] == 2
    for extra in (["--mode", "exhaustive"], ["--workload", "lists"],
                  ["--target", "redis-server"]):
        refused = subprocess.run([sys.executable, "-m", "streamkeep", "crashbench",
                                  "--cluster", "2", *extra],
                                 capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode == 3 and "--cluster" in refused.stderr, extra


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["always", "everysec"])
@pytest.mark.parametrize("nodes", [3, 5])
def test_the_cluster_rounds_keep_every_acknowledged_push_soak(policy, nodes):
    row = rows(policy, nodes, 11, 30, None)[0]
    assert row.ok, [f.detail for f in row.found[:5]]
    assert row.covered == 30
