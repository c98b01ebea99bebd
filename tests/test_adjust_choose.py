"""adjust's and explain adjust's choice of path (evtime.engine.adjust.choose): each
condition of the table picks the path it names, in order."""

from __future__ import annotations

import pytest

from evtime.engine.adjust import AdjustSpec, choose, in_place

SPEC = AdjustSpec("msec", 3)
PLACED = ("rows", "step")


@pytest.fixture
def fits(monkeypatch):
    """ordered_in_place says the row groups fit (its rows and step: PLACED)."""
    asked = []
    monkeypatch.setattr(in_place, "ordered_in_place", lambda *a: asked.append(a) or PLACED)
    return asked


@pytest.mark.parametrize(
    "facts, name",
    [
        (choose.Facts(state=True), "prefix scan"),  # (1. --state: then carry_on)
        (choose.Facts(), "in place"),  # 2.
        (choose.Facts(rejected=True), "in order"),  # 3. (bad rows: not in place)
        (choose.Facts(discards=True), "prefix scan"),  # 4.
        (choose.Facts(emit_bounds=True), "prefix scan"),
        (choose.Facts(in_driver=True), "prefix scan"),
    ],
)
def test_each_condition_picks_its_adjust_path(facts, name, fits):
    path = choose.choose(SPEC, facts, "df", choose.Run())
    assert path.name == name
    assert bool(fits) == (name == "in place")  # (asked only where it may be taken)
    if name == "in place":
        assert path.adjust("df") == PLACED


def test_rows_that_do_not_fit_go_in_order(monkeypatch):
    monkeypatch.setattr(in_place, "ordered_in_place", lambda *a: None)
    assert choose.choose(SPEC, choose.Facts(), "df", choose.Run()).name == "in order"


@pytest.mark.parametrize("in_driver", [True, False])
def test_explain_adjust_path(in_driver):
    facts = choose.Facts(in_driver=in_driver)
    way = choose.choose_explain(SPEC, facts, choose.Run(), (), (), int)
    assert way.name == "in parts" and way.here == in_driver


@pytest.mark.parametrize(
    "here, in_place, plan, suits, name",
    [
        (True, True, "plan", True, "all here"),  # 1. (read in this process: first)
        (True, False, None, False, "all here"),
        (False, True, "plan", True, "from the plan"),  # 2. (before the files)
        (False, True, None, True, "in files"),  # 3.
        (False, True, None, False, "in parts of arrivals"),  # 4.
        (False, False, "plan", True, "in parts of arrivals"),  # (bad rows set aside: neither)
    ],
)
def test_each_condition_picks_its_way_in_parts(here, in_place, plan, suits, name, monkeypatch):
    from evtime.engine.adjust import parts

    asked = []
    monkeypatch.setattr(parts, "plan_of", lambda made: asked.append("plan") or plan)
    monkeypatch.setattr(parts, "suits_files", lambda made: asked.append("files") or suits)
    way = choose.choose_in_parts("made", in_place, here)
    assert way.name == name
    if name == "from the plan":
        assert way.plan == plan
    assert asked == {"from the plan": ["plan"], "in files": ["plan", "files"]}.get(
        name, ["plan", "files"] if in_place and not here else []
    )  # (asked in order, only where the way may be taken)
