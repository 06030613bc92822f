"""`authzbench import` of a system's export format: the relationships file a SpiceDB export writes, read
through the command, comes back relationship for relationship, the groups' organizations inferred."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from authzbench.imports.edges import Edge, edges_of
from authzbench.imports.mapping import def_key
from authzbench.schema.dataset import Dataset
from authzbench.schema.model import REBAC_RELATIONS
from authzbench.tools.dataset_commands import with_group_orgs


def _tuple_lines(ds: Dataset) -> list[str]:
    out = []
    for e in edges_of(ds):
        r = REBAC_RELATIONS[e.relation]
        if r.authz:  # group_org is metadata: no Zanzibar schema holds it
            ot, rel, st, sr = def_key(r)
            out.append(f"{ot}:{e.obj}#{rel}@{st}:{e.subj}" + (f"#{sr}" if sr else ""))
    return out


def test_a_spicedb_relationships_file_imports_as_the_graph_it_was_written_from(tmp_path):
    from authzbench.generator import generate

    ds = generate("tiny", tmp_path / "t")
    (tmp_path / "rels.txt").write_text("\n".join(_tuple_lines(ds)) + "\n")
    cmd = [sys.executable, "-m", "authzbench.cli", "import", "--format", "spicedb-file", "--path",
           str(tmp_path / "rels.txt"), "--out", str(tmp_path / "imp")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    imp = Dataset.open(tmp_path / "imp")
    authz = [r for r, d in REBAC_RELATIONS.items() if d.authz]
    for rel in authz:  # ids are interned by value, so a 0..n-1 graph keeps them
        assert sorted(zip(imp.table(rel)["object"], imp.table(rel)["subject"], strict=True)) == sorted(
            zip(ds.table(rel)["object"], ds.table(rel)["subject"], strict=True)), rel
    assert imp.manifest["origin"]["group_org_inferred"] == imp.counts["group_org"] > 0


def test_a_group_takes_the_organization_most_of_its_members_belong_to():
    edges = [Edge("org_member", "o1", "u1", "a"), Edge("org_member", "o2", "u2", "b"),
             Edge("org_member", "o2", "u3", "c"), Edge("group_member", "g", "u1", "d"),
             Edge("group_member", "g", "u2", "e"), Edge("group_member", "g", "u3", "f"),
             Edge("group_org", "h", "o1", "g"), Edge("group_child", "h", "g", "h")]
    got = Counter((e.obj, e.subj) for e in with_group_orgs(edges) if e.relation == "group_org")
    assert got == Counter({("g", "o2"): 1, ("h", "o1"): 1})  # h had its row: none added
