"""The cluster step's saved state (state/cluster_facts.py): every field of every part goes into
the document and comes back; a format-1 document (written before the parts) reads back to the
same state and decides what the version that wrote it decided; a newer format is refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from replmon.state import restart_gate
from replmon.state.cluster import ClusterFacts, ClusterStep
from replmon.state.cluster_activity import Activity
from replmon.state.cluster_episodes import Episode, Outages
from replmon.state.cluster_facts import FORMAT, StateFormatError
from replmon.state.cluster_hold import Decision, Holding
from replmon.state.cluster_lag import LagGroup, LagGroups
from tests.state.cluster_history import LATER, driven
from tests.state.test_cluster import CFG

FORMAT1 = Path(__file__).parent / "data" / "cluster_format1.json"
PARTS = {
    "activity": Activity,
    "outages": Outages,
    "holding": Holding,
    "lag": LagGroups,
    "gate": restart_gate.GateFacts,
}


def fields(cls) -> list[dataclasses.Field]:
    """The fields that are state (an index derived from them is not saved)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("derived")]


def names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def default_of(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_every_part_is_in_the_document_and_every_field_of_it_round_trips():
    """The driven step holds something in every field of every part (else a field the document
    forgot could pass unseen); each part's document carries exactly the part's fields, and a
    save, load and save again gives the same document and the same state."""
    step, _ = driven(ClusterStep)
    facts = step.clusters["c"]
    for name, cls in PARTS.items():
        part = getattr(facts, name)
        empty = [f.name for f in fields(cls) if getattr(part, f.name) == default_of(f)]
        assert not empty, f"the driven state leaves {name}.{empty} as new: drive it so they hold something"
    doc = json.loads(json.dumps(step.to_doc()))
    assert doc["format"] == FORMAT
    facts_doc = doc["clusters"]["c"]
    assert set(facts_doc) == names(ClusterFacts) and set(PARTS) | {"horizon_ms"} == names(ClusterFacts)
    for name, cls in PARTS.items():
        assert set(facts_doc[name]) == names(cls), f"{name}: a field the document does not carry"
    outages, holding = facts_doc["outages"], facts_doc["holding"]
    for ep in [ep for _, ep in outages["open"]] + outages["ended"]:
        assert set(ep) == names(Episode)
    for decision in holding["decided"].values():
        assert set(decision) == names(Decision)
    for group in facts_doc["lag"]["groups"].values():
        assert set(group) == names(LagGroup)
    for row in json.loads(facts_doc["gate"]["partitions"]):  # (the partition's name, then its fields)
        assert len(row) == 1 + len(names(restart_gate.PartitionView))
    again = ClusterStep.from_doc(CFG, doc)
    assert again.clusters == step.clusters
    assert json.loads(json.dumps(again.to_doc())) == doc


def test_a_format1_document_reads_to_the_same_state_and_decides_as_the_version_that_wrote_it():
    """tests/state/data/cluster_format1.json: the document the version before the parts wrote
    after the driven batch (no format of its own in the clusters, outages in one table named
    by the open and ended lists and the decisions), with what that version decided next."""
    written = json.loads(FORMAT1.read_text())
    assert written["doc"].get("format", 1) == 1
    step = ClusterStep.from_doc(CFG, written["doc"])
    assert step.to_doc() == driven(ClusterStep)[0].to_doc()
    later = step.step(json.loads(json.dumps(LATER[0])), LATER[1])
    later += step.step([], [], flush=True)
    assert json.loads(json.dumps(later)) == written["later"]
    assert step.restart_verdicts() == written["verdicts"]


def test_a_format1_document_that_numbered_its_outages_reads_the_same():
    """Documents written before outages were named by their alert id numbered them."""
    written = json.loads(FORMAT1.read_text())["doc"]
    numbered = json.loads(json.dumps(written))
    facts = numbered["clusters"]["c"]
    number = {aid: 140547630883760 + i for i, aid in enumerate(facts["episodes"])}
    facts["episodes"] = {str(number[aid]): ep for aid, ep in facts["episodes"].items()}
    facts["open"] = [[b, number[aid]] for b, aid in facts["open"]]
    facts["ended"] = [number[aid] for aid in facts["ended"]]
    for d in facts["decided"].values():
        d["episode"] = None if d["episode"] is None else number[d["episode"]]
    unversioned = json.loads(json.dumps(written))
    del unversioned["format"]
    expected = ClusterStep.from_doc(CFG, written).to_doc()
    assert ClusterStep.from_doc(CFG, numbered).to_doc() == expected
    assert ClusterStep.from_doc(CFG, unversioned).to_doc() == expected


def test_a_newer_format_is_refused_with_a_clear_error():
    doc = driven(ClusterStep)[0].to_doc()
    with pytest.raises(StateFormatError, match=f"format {FORMAT + 1}.*a newer replmon wrote it"):
        ClusterStep.from_doc(CFG, {**doc, "format": FORMAT + 1})


def test_a_format2_document_with_the_gates_rows_as_a_list_reads_to_the_same_state():
    """Format 2 held the restart gate's partitions as a list of rows; format 3 as their JSON text."""
    step, _ = driven(ClusterStep)
    doc = json.loads(json.dumps(step.to_doc()))
    old = json.loads(json.dumps(doc))
    old["format"] = 2
    gate = old["clusters"]["c"]["gate"]
    gate["partitions"] = json.loads(gate["partitions"])
    assert gate["partitions"], "the driven state has no gate partition: nothing to read"
    again = ClusterStep.from_doc(CFG, old)
    assert again.clusters == step.clusters
    assert again.to_doc() == doc
