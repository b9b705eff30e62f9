"""The source digest a result header carries: it names the code's contents, not its history."""

from pathlib import Path

from harness.report.run_header import make_header
from harness.report.source_digest import source_digest


def _tree(root: Path) -> Path:
    (root / "operators" / "exp").mkdir(parents=True)
    (root / "harness").mkdir()
    (root / "run.py").write_text("print('run')\n")
    (root / "harness" / "timing.py").write_text("X = 1\n")
    (root / "operators" / "exp" / "helion_configs.json").write_text("{}\n")
    return root


def test_the_digest_follows_the_sources_contents_alone(tmp_path: Path):
    root = _tree(tmp_path)
    first = source_digest(root)
    assert len(first) == 64 and source_digest(root) == first
    (root / "operators" / "exp" / "__pycache__").mkdir()
    (root / "operators" / "exp" / "__pycache__" / "timing.cpython-312.pyc").write_bytes(b"\0")
    (root / "operators" / "exp" / "NOTES.md").write_text("notes\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert source_digest(root) == first  # caches, notes and history are not the code

    (root / "operators" / "exp" / "helion_configs.json").write_text('{"a": 1}\n')
    changed = source_digest(root)
    assert changed != first
    (root / "harness" / "timing.py").rename(root / "harness" / "timer.py")
    assert source_digest(root) not in (first, changed)  # a file's name counts too


def test_the_digest_reads_through_a_linked_folder(tmp_path: Path):
    root = _tree(tmp_path / "repo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kernel.py").write_text("K = 1\n")
    (root / "operators" / "linked").symlink_to(outside, target_is_directory=True)
    before = source_digest(root)
    (outside / "kernel.py").write_text("K = 2\n")
    assert source_digest(root) != before


def test_a_cpu_run_header_carries_this_checkouts_digest():
    header = make_header("cpu", ["run.py", "--op", "exp"], {})
    assert header["source_digest"] == source_digest()
