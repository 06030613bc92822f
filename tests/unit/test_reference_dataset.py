"""tools/reference_dataset.py on a stand-in for the reference repository (a module whose cmd/csv package
writes a two-resource graph in the reference layout): its generator package is built with the tool's own
main, run in the cache, its ACL rows checked against the count expected, and the CSVs imported."""

from __future__ import annotations

import shutil

import pytest

from authzbench.core.errors import UserError
from authzbench.schema.dataset import Dataset
from authzbench.tools import reference_dataset as rd

_GEN = '''package csv

import "os"

func CsvCreateData() {
	os.MkdirAll("data", 0o755)
	files := map[string]string{
		"organizations.csv":     "org_id\\n1\\n",
		"users.csv":             "user_id,primary_org_id\\n1,1\\n2,1\\n",
		"org_memberships.csv":   "org_id,user_id,role\\n1,1,admin\\n1,2,member\\n",
		"groups.csv":            "group_id,org_id\\n1,1\\n",
		"group_memberships.csv": "group_id,user_id,role\\n1,2,direct_member\\n",
		"group_hierarchy.csv":   "parent_group_id,child_group_id,relation\\n",
		"resources.csv":         "resource_id,org_id\\n1,1\\n2,1\\n",
		"resource_acl.csv": "resource_id,subject_type,subject_id,relation\\n1,user,1,manager_user\\n" +
			"2,group,1,viewer_group\\n2," + os.Getenv("RLP_RANDOM_SEED")[:4] + ",1,viewer_user\\n",
	}
	for name, text := range files {
		os.WriteFile("data/"+name, []byte(text), 0o644)
	}
}
'''


@pytest.fixture
def source(tmp_path, monkeypatch):
    if shutil.which("go") is None:
        pytest.skip("no go on this machine")
    src = tmp_path / "test-rlp"
    (src / "cmd" / "csv").mkdir(parents=True)
    (src / "go.mod").write_text("module test-tls\n\ngo 1.22\n")
    (src / "go.sum").write_text("")
    (src / "cmd" / "csv" / "generate.go").write_text(_GEN)
    monkeypatch.setattr(rd, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(rd, "SEED", "user")  # the stand-in writes the seed's first letters as a subject type
    return src


def test_the_generator_is_built_run_with_the_seed_and_its_csvs_imported(source, tmp_path, monkeypatch):
    monkeypatch.setattr(rd, "ACL_ROWS", 3)
    assert rd.main(["--source", str(source), "--data-dir", str(tmp_path / "data"), "--out", "ref"]) == 0
    ds = Dataset.open(tmp_path / "data" / "ref")
    assert ds.counts["resource_viewer_user"] == 1, "the seed reached the generator"
    assert ds.acl_relationships == 3 and ds.manifest["origin"]["format"] == "reference-csv"


def test_another_generator_version_is_refused_by_its_acl_count(source):
    with pytest.raises(UserError, match="wrote 3 ACL rows, not the report's 364,983"):
        rd.regenerate(source)
