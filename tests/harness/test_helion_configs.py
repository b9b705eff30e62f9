"""A Helion kernel call never goes without a config: its own bucket's, else the nearest stored
bucket's, else Helion's default, with the fields the call fixes put over it and fewer pipeline
stages when shared memory runs out; each fallback is a note for the cell.

The kernel here is a stand-in with Helion's ``bind``/``set_config``/call surface, so the GPU's
behaviour (a launch that runs out of shared memory) can be played on the CPU.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import helion
import pytest
from triton.runtime.errors import OutOfResources

from harness.notes import CellNote, add_note, collecting
from harness.tuning import launch
from harness.tuning.choice import ConfigChoice, choose_config
from harness.tuning.configs import BucketPlace, ConfigStore

SIZES = ("tiny", "small", "medium", "large")


def place(bucket: str) -> BucketPlace | None:
    """A toy scale: ``<size>|<layout>``, sizes in the order of ``SIZES``."""
    size, _, layout = bucket.partition("|")
    return (SIZES.index(size), layout) if size in SIZES else None


def _choose(wanted: str, stored: list[str], *fallbacks: str) -> ConfigChoice:
    return choose_config(dict.fromkeys(stored, {}), (wanted, *fallbacks), place)


def test_the_own_key_wins_then_a_fallback_key_with_no_note():
    stored = ["k|float32|medium|nn", "m|float32|small|nn"]
    assert _choose("k|float32|medium|nn", stored) == ConfigChoice("k|float32|medium|nn")
    assert _choose("k|float32|small|nn", stored, "m|float32|small|nn") == ConfigChoice("m|float32|small|nn")


@pytest.mark.parametrize(("stored", "nearest"), [
    (["k|float32|tiny|nn", "k|float32|large|nn"], "k|float32|large|nn"),  # 1 step beats 2
    (["k|float32|small|nn", "k|float32|large|nn"], "k|float32|large|nn"),  # a tie: the larger
    (["k|float32|small|nn", "k|float32|large|nt"], "k|float32|small|nn"),  # a tie: the same layout
    (["k|float32|large|nt", "k|float32|tiny|nn"], "k|float32|large|nt"),  # nearer beats the layout
    (["k|bfloat16|medium|nn", "j|float32|medium|nn", "k|float32|tiny|nn", "k|float32|odd"],
     "k|float32|tiny|nn"),  # only the same kernel and dtype, on the scale
])
def test_a_missing_bucket_takes_the_nearest_stored_one_and_says_so(stored: list[str], nearest: str):
    choice = _choose("k|float32|medium|nn", stored)
    note = f"helion config: nearest stored bucket {nearest} for k|float32|medium|nn"
    assert choice == ConfigChoice(nearest, note)


def test_the_own_kernels_nearest_bucket_comes_before_a_fallback_kernels():
    stored = ["k|float32|tiny|nn", "m|float32|large|nn"]
    assert _choose("k|float32|large|nn", stored, "m|float32|medium|nn").key == "k|float32|tiny|nn"
    assert _choose("k|float32|large|nn", stored[1:], "m|float32|medium|nn").key == "m|float32|large|nn"


def test_no_stored_config_of_the_kernel_and_dtype_means_helions_default():
    choice = _choose("k|float32|medium|nn", ["k|float16|medium|nn", "j|float32|medium|nn"])
    assert choice == ConfigChoice(None, "helion config: Helion's default for k|float32|medium|nn "
                                        "(no k|float32 config stored)")
    assert _choose("k|float32|huge|nn", ["k|float32|medium|nn"]).key is None  # off the scale


def test_a_dtype_without_configs_runs_what_the_dtype_of_its_element_size_would_run():
    stored = ["k|bfloat16|small|nn", "m|bfloat16|large|nn"]
    choice = _choose("k|float16|large|nn", stored, "m|float16|large|nn")
    assert choice == ConfigChoice("m|bfloat16|large|nn", "helion config: m|bfloat16|large|nn, the bfloat16 "
                                  "config (the same element size), for k|float16|large|nn")
    assert _choose("k|float16|large|nn", [*stored, "k|float16|tiny|nn"]).key == "k|float16|tiny|nn"
    # The other dtype's config of the call's own bucket beats a distant bucket of its own dtype.
    own_bucket_first = _choose("k|float16|large|nn", ["k|bfloat16|large|nn", "k|float16|tiny|nn"])
    assert own_bucket_first.key == "k|bfloat16|large|nn"
    assert choose_config(dict.fromkeys(stored, {}), ("k|float16|large|nn",), place, borrow=False).key is None


def test_a_dtype_with_no_config_of_its_size_runs_the_half_size_dtypes_and_may_fall_back():
    stored = ["k|bfloat16|small|nn", "m|bfloat16|large|nn"]
    choice = _choose("k|float32|large|nn", stored, "m|float32|large|nn")
    assert choice == ConfigChoice("m|bfloat16|large|nn", "helion config: m|bfloat16|large|nn, the bfloat16 "
                                  "config (half the element size), for k|float32|large|nn", fallible=True)
    assert _choose("k|float32|large|nn", stored).key == "k|bfloat16|small|nn"  # its nearest bucket
    # A config of its own dtype, however far its bucket, comes first and is not fallible.
    assert _choose("k|float32|large|nn", [*stored, "k|float32|tiny|nn"]) == ConfigChoice(
        "k|float32|tiny|nn", "helion config: nearest stored bucket k|float32|tiny|nn for k|float32|large|nn")
    assert choose_config(dict.fromkeys(stored, {}), ("k|float32|large|nn",), place, borrow=False).key is None
    assert _choose("k|bfloat16|large|nn", ["k|float32|large|nn"]).key is None  # never a wider dtype's


class StandIn:
    """A kernel whose launch needs ``stages * 100_000`` bytes of shared memory, of ``limit``."""

    def __init__(self, limit: int, kind: str = "shared memory", broken_blocks: int | None = None,
                 failure: str = "does not compile"):
        self.limit, self.kind, self.broken_blocks, self.failure = limit, kind, broken_blocks, failure
        self.tried: list[int] = []
        self.config_spec = self

    def bind(self, args: tuple) -> StandIn:
        return self

    def default_config(self) -> helion.Config:
        return helion.Config(block_sizes=[8], num_stages=1)

    def set_config(self, config: helion.Config) -> None:
        self.config = config

    def __call__(self, x: int) -> int:
        loops = self.config.config.get("range_num_stages") or [0]
        self.tried.append(self.config.num_stages if max(loops) == 0 else (self.config.num_stages, loops))
        if self.config.config.get("block_sizes") == [self.broken_blocks]:
            raise RuntimeError(f"block size {self.broken_blocks} {self.failure}\nfor this dtype")
        needed = max(self.config.num_stages, *loops) * 100_000
        if needed > self.limit:
            raise OutOfResources(needed, self.limit, self.kind)
        return x + 1


def _store(tmp_path: Path, configs: dict) -> ConfigStore:
    path = tmp_path / "helion_configs.json"
    path.write_text(json.dumps({"configs": configs}))
    return ConfigStore(path, place)


KEY = "k|bfloat16|large|nn"


def test_a_launch_out_of_shared_memory_is_retried_with_fewer_stages_and_noted(tmp_path: Path):
    kernel = StandIn(limit=232_448)
    store = _store(tmp_path, {KEY: {"block_sizes": [128], "num_stages": 4}})
    notes: list[str] = []
    with collecting(notes):
        assert launch.call_with_stored_config(kernel, store, KEY, 1) == 2
    assert kernel.tried == [4, 3, 2]
    assert notes == ["helion config: num_stages 4 -> 2 for k|bfloat16|large|nn after OutOfResources "
                     "(shared memory: 400000 bytes needed, 232448 available)"]
    assert kernel.config.config == {"block_sizes": [128], "num_stages": 2}


def test_a_config_pipelined_by_its_loops_is_retried_with_shallower_loops(tmp_path: Path):
    # rms_norm's backward configs leave num_stages at 1 and pipeline the row loop instead.
    kernel = StandIn(limit=232_448)
    store = _store(tmp_path, {KEY: {"range_num_stages": [0, 4], "num_warps": 4}})
    notes: list[str] = []
    with collecting(notes):
        assert launch.call_with_stored_config(kernel, store, KEY, 1) == 2
    assert kernel.tried == [(1, [0, 4]), (1, [0, 3]), (1, [0, 2])]
    assert notes == ["helion config: range_num_stages [0, 4] -> [0, 2] for k|bfloat16|large|nn after "
                     "OutOfResources (shared memory: 400000 bytes needed, 232448 available)"]


def test_a_configured_kernel_leaves_its_notes_again_on_every_later_call(tmp_path: Path):
    # Another cell running the same specialization (e.g. helion_op after helion) says so too.
    kernel = StandIn(limit=150_000)
    store = _store(tmp_path, {"k|bfloat16|medium|nn": {"num_stages": 3}})
    with pytest.warns(CellNote):
        launch.call_with_stored_config(kernel, store, KEY, 1)
    notes: list[str] = []
    with collecting(notes):
        assert launch.call_with_stored_config(kernel, store, KEY, 1) == 2
    assert kernel.tried == [3, 2, 1, 1]
    assert notes[0] == "helion config: nearest stored bucket k|bfloat16|medium|nn for k|bfloat16|large|nn"
    assert notes[1].startswith("helion config: num_stages 3 -> 1 for k|bfloat16|medium|nn after Out")


def test_a_launch_still_out_of_shared_memory_at_one_stage_or_out_of_other_resources_fails(tmp_path: Path):
    store = _store(tmp_path, {KEY: {"num_stages": 3}})
    starved = StandIn(limit=50_000)
    with pytest.raises(OutOfResources, match="shared memory"):
        launch.call_with_stored_config(starved, store, KEY, 1)
    assert starved.tried == [3, 2, 1]
    threads = StandIn(limit=50_000, kind="threads")
    with pytest.raises(OutOfResources, match="threads"):
        launch.call_with_stored_config(threads, store, KEY, 1)
    assert threads.tried == [3]


def test_without_a_stored_config_the_kernel_runs_on_helions_default(tmp_path: Path):
    kernel = StandIn(limit=232_448)
    notes: list[str] = []
    with collecting(notes):
        launch.call_with_stored_config(kernel, _store(tmp_path, {}), KEY, 1)
    assert kernel.config.config == kernel.default_config().config
    assert notes == ["helion config: Helion's default for k|bfloat16|large|nn (no k|bfloat16 config stored)"]


def test_fields_the_call_fixes_replace_the_chosen_configs_and_say_so(tmp_path: Path):
    kernel = StandIn(limit=232_448)
    store = _store(tmp_path, {"k|bfloat16|medium|nn": {"num_stages": 2, "indexing": "tensor_descriptor"}})
    notes: list[str] = []
    with collecting(notes):
        launch.call_with_stored_config(kernel, store, KEY, 1, fixed={"indexing": "pointer"})
    assert kernel.config.config == {"num_stages": 2, "indexing": "pointer"}
    assert notes[1:] == ["helion config: indexing='pointer' fixed by the call over k|bfloat16|medium|nn"]


@pytest.mark.parametrize("indexing", ["pointer", ["pointer", "pointer"]])
def test_a_config_that_holds_the_fixed_value_already_leaves_no_note(tmp_path: Path, indexing):
    # Helion's default config lists one indexing per access.
    kernel = StandIn(limit=232_448)
    store = _store(tmp_path, {KEY: {"num_stages": 1, "indexing": indexing}})
    notes: list[str] = []
    with collecting(notes):
        launch.call_with_stored_config(kernel, store, KEY, 1, fixed={"indexing": "pointer"})
    assert notes == [] and kernel.config.config["indexing"] == "pointer"


def test_notes_go_to_the_innermost_collecting_block_once_and_nowhere_outside():
    add_note("dropped")
    outer: list[str] = []
    inner: list[str] = []
    with collecting(outer):
        add_note("a")
        with collecting(inner):
            add_note("b")
            add_note("b")
        add_note("a")
    assert (outer, inner) == (["a"], ["b"])


def test_outside_a_cell_the_first_calls_notes_are_warnings_and_later_calls_are_silent(tmp_path: Path):
    # tritonbench's runner cannot show a cell's notes: a kernel on Helion's default config must
    # still say so, once, and its timed calls must stay quiet.
    kernel = StandIn(limit=232_448)
    store = _store(tmp_path, {})
    with pytest.warns(CellNote, match=r"Helion's default for k\|bfloat16\|large\|nn"):
        launch.call_with_stored_config(kernel, store, KEY, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launch.call_with_stored_config(kernel, store, KEY, 1) == 2
    notes: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with collecting(notes):
            launch.call_with_stored_config(StandIn(limit=232_448), store, KEY, 1)
    assert notes == ["helion config: Helion's default for k|bfloat16|large|nn (no k|bfloat16 config stored)"]


def test_under_the_interpreter_a_dtype_never_borrows_another_dtypes_config(tmp_path: Path, monkeypatch):
    # The interpreter's gemm routes assume Helion's default BLOCK_K for the dtypes it runs.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel = StandIn(limit=232_448)
    notes: list[str] = []
    with collecting(notes):
        launch.call_with_stored_config(kernel, _store(tmp_path, {"k|bfloat16|large|nn": {"num_stages": 1}}),
                                       "k|float16|large|nn", 1)
    assert kernel.config.config == kernel.default_config().config
    assert notes == ["helion config: Helion's default for k|float16|large|nn (no k|float16 config stored)"]


def test_a_half_size_dtypes_config_that_fails_gives_way_to_helions_default(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # as on the GPU: the interpreter never borrows
    store = _store(tmp_path, {KEY: {"block_sizes": [128], "num_stages": 3}})
    kernel = StandIn(limit=232_448, broken_blocks=128)
    notes: list[str] = []
    with collecting(notes):
        assert launch.call_with_stored_config(kernel, store, "k|float32|large|nn", 1) == 2
    assert kernel.config.config == kernel.default_config().config
    assert notes == ["helion config: Helion's default for k|float32|large|nn: k|bfloat16|large|nn failed "
                     "(RuntimeError: block size 128 does not compile)"]
    working = StandIn(limit=232_448)
    with collecting(notes := []):
        launch.call_with_stored_config(working, store, "k|float32|large|nn", 1)
    assert working.config.config == {"block_sizes": [128], "num_stages": 2}
    assert notes[0] == ("helion config: k|bfloat16|large|nn, the bfloat16 config (half the element size), "
                        "for k|float32|large|nn")
    assert notes[1].startswith("helion config: num_stages 3 -> 2 for k|bfloat16|large|nn after Out")
    # A failing config of the call's own dtype is the cell's error, never hidden behind the default.
    with pytest.raises(RuntimeError, match="does not compile"):
        launch.call_with_stored_config(StandIn(limit=232_448, broken_blocks=128), store, KEY, 1)


def test_a_half_size_config_that_loses_the_cuda_context_is_the_cells_error(tmp_path: Path, monkeypatch):
    # Nothing runs on a lost context: the default config would only fail again and hide the cause.
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    store = _store(tmp_path, {KEY: {"block_sizes": [128], "num_stages": 1}})
    kernel = StandIn(limit=232_448, broken_blocks=128, failure="CUDA error: an illegal memory access")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        launch.call_with_stored_config(kernel, store, "k|float32|large|nn", 1)
    assert len(kernel.tried) == 1


def test_a_lost_cuda_context_is_seen_in_the_exception_a_failure_was_raised_from(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    store = _store(tmp_path, {KEY: {"block_sizes": [128], "num_stages": 1}})

    class Wrapping(StandIn):
        def __call__(self, x: int) -> int:
            try:
                return super().__call__(x)
            except RuntimeError as exc:
                raise ValueError("the launch failed") from exc

    kernel = Wrapping(limit=232_448, broken_blocks=128, failure="CUDA error: unspecified launch failure")
    with pytest.raises(ValueError, match="the launch failed"):
        launch.call_with_stored_config(kernel, store, "k|float32|large|nn", 1)
    assert len(kernel.tried) == 1
