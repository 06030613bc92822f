"""`authzbench generate --like DATASET --scale N` writes the look-alike and prints the fit's error table;
--scale without --like and --set with it are refused in one line, exit code 2, before anything is written."""

from __future__ import annotations

from authzbench import cli
from authzbench.generator import generate
from authzbench.schema.dataset import Dataset


def test_generate_like_writes_the_look_alike_and_prints_the_error_table(tmp_path, capsys):
    generate("tiny", tmp_path / "orig")
    assert cli.main(["generate", "--like", str(tmp_path / "orig"), "--scale", "2",
                     "--out", str(tmp_path / "x2")]) == 0
    out = capsys.readouterr().out
    assert "target (x2)" in out and "resource_viewer_user" in out
    assert Dataset.open(tmp_path / "x2").entities["organization"] == 6


def test_scale_without_like_and_set_with_like_are_refused_before_writing(tmp_path, capsys):
    generate("tiny", tmp_path / "orig")
    for argv, why in ((["--scale", "2"], "--scale needs --like"),
                      (["--like", str(tmp_path / "orig"), "--set", "orgs=4"], "--set with --like")):
        assert cli.main(["generate", *argv, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "x").exists()
