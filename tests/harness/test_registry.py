"""The operator registry: built-in operators found by their folders, plugin operators by the
decorator, and what a plugin operator may and may not do to them."""

from __future__ import annotations

import pytest

from harness import registry
from harness.operator import BenchmarkOperator, register_benchmark
from harness.tritonbench.adapters import tritonbench_adapters
from operators.exp.operator import ExpOperator
from operators.gemm.operator import GemmOperator
from tests.helpers import BUILTIN_OPERATORS


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry with the built-ins loaded, restored after the test."""
    registry.operator_names()
    monkeypatch.setattr(registry, "_OPERATORS", dict(registry._OPERATORS))


def test_each_builtin_operator_folder_registers_the_class_it_defines() -> None:
    assert registry.operator_names() == BUILTIN_OPERATORS
    assert registry.load_operator("gemm") is GemmOperator


@pytest.mark.usefixtures("isolated_registry")
def test_a_plugin_subclass_of_a_builtin_does_not_adapt_its_tritonbench_operator_twice() -> None:
    @registry.register_operator
    class MyGemm(GemmOperator):
        name = "mygemm"

    assert "mygemm" in registry.operator_names()
    assert tritonbench_adapters()["gemm"] is GemmOperator.tritonbench_adapters["gemm"]


@pytest.mark.usefixtures("isolated_registry")
def test_an_operator_with_the_old_add_options_hook_is_refused_naming_its_replacement() -> None:
    class OldStyle(BenchmarkOperator):
        name = "old_style"

        @classmethod
        def add_options(cls, parser: object) -> None:
            pass

    with pytest.raises(TypeError, match="command_line_options"):
        registry.register_operator(OldStyle)


@pytest.mark.usefixtures("isolated_registry")
def test_a_plugin_operator_named_like_a_builtin_replaces_it_whenever_it_registers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    @registry.register_operator
    class PluginGemm(GemmOperator):
        """A plugin's own gemm."""

    assert registry.load_operator("gemm") is PluginGemm
    monkeypatch.setattr(registry, "_OPERATORS", {"gemm": PluginGemm})
    monkeypatch.setattr(registry, "_builtins_loaded", False)
    assert registry.load_operator("gemm") is PluginGemm  # the built-ins, loaded after, keep it


def test_a_subclass_may_move_the_baseline_to_a_backend_of_its_own() -> None:
    class MovedBaseline(ExpOperator):
        name = "moved_baseline"

        @register_benchmark()
        def eager(self, x):  # the parent's baseline, registered here as a plain backend
            return lambda: x.exp()

        @register_benchmark(baseline=True)
        def reference(self, x):
            return lambda: x.exp()

    assert registry._checked(MovedBaseline).baseline().name == "reference"
    assert [b.name for b in MovedBaseline.backends()].count("eager") == 1


def test_a_backend_attached_as_a_second_baseline_is_refused(
        isolated_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ExpOperator, "second", None, raising=False)  # deleted again after the test

    def second(self, x):
        return lambda: x.exp()

    register_benchmark(operator="exp", baseline=True)(second)
    with pytest.raises(TypeError, match="exactly one backend .* not 2: eager, second"):
        registry.attach_pending_backends()
