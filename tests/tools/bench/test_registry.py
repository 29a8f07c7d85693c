"""tools/bench/registry.py and the section modules it assembles: every figure declared beside
its own section's rows, the run's figures in section order, labels users see free of
development history."""

from __future__ import annotations

import re

from streamkeep.tools.bench import registry


def test_a_sections_figures_are_its_own() -> None:
    keys = {b.key for s in registry.SECTIONS for b in s.benchmarks}
    for section in registry.SECTIONS:
        own = {b.key for b in section.benchmarks}
        for figure in section.figures:
            assert figure.section == section.name, figure
            assert figure.numerator in own, figure
            assert figure.denominator is None or figure.denominator in keys, figure


def test_figures_follow_the_sections_run_order() -> None:
    # (so a run's figures table reads section by section, as its rows table does)
    assert tuple(f for s in registry.SECTIONS for f in s.figures) == registry.FIGURES


def test_every_key_and_name_is_unique() -> None:
    keys = [b.key for s in registry.SECTIONS for b in s.benchmarks]
    assert len(keys) == len(set(keys))
    names = [name for s in registry.SECTIONS for name in s.names]
    assert len(names) == len(set(names))
    labels = [(f.section, f.label) for f in registry.FIGURES]
    assert len(labels) == len(set(labels))


def test_ratios_and_native_targets_name_rows() -> None:
    keys = {b.key for s in registry.SECTIONS for b in s.benchmarks}
    assert {k for r in registry.RATIOS for k in (r.numerator, r.denominator)} <= keys
    assert set(registry.NATIVE_TARGETS) <= keys


def test_labels_name_no_issue() -> None:
    labels = [b.workload for s in registry.SECTIONS for b in s.benchmarks]
    labels += [f.label for f in registry.FIGURES]
    labels += [text for r in registry.RATIOS for text in (r.workload, r.reference)]
    assert not [label for label in labels if re.search(r"\bissues?\b|#\d", label, re.I)]
