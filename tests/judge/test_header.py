"""The artifact's header, read by the judge before jax reads it: symbolic shapes, effects, a
VJP and odd pytrees are refused in bounded time, honest artifacts pass untouched."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import pytest
from jax._src.export import serialization
from jax._src.export import serialization_generated as fb

from pallasbench_dataset.evaluation.judge import core
from pallasbench_dataset.evaluation.judge.artifact_header import (
    MAX_TREE_DEPTH, MAX_TREE_NODES, HeaderError, check_header)
from pallasbench_dataset.schema import Status
from pallasbench_dataset.tasks import get_task

ROWS = jax.ShapeDtypeStruct((512, 512), jnp.float32)


def _relu_blob(*args, fn=lambda x: jnp.maximum(x, 0.0)) -> bytes:
  return jax.export.export(jax.jit(fn), platforms=["cpu"])(*(args or (ROWS,))).serialize()


def _with_first_dimension(monkeypatch, text: str) -> bytes:
  """An honest export whose every shape's first dimension is written as `text`."""
  def aval(builder, a):
    offsets = [builder.CreateString(d) for d in [text, *map(str, a.shape[1:])]]
    fb.AbstractValueStartShapeVector(builder, len(offsets))
    for offset in reversed(offsets):
      builder.PrependUOffsetTRelative(offset)
    shape = builder.EndVector()
    fb.AbstractValueStart(builder)
    fb.AbstractValueAddShape(builder, shape)
    fb.AbstractValueAddDtype(builder, serialization._dtype_to_dtype_kind[a.dtype])  # pylint: disable=protected-access
    return fb.AbstractValueEnd(builder)
  with monkeypatch.context() as m:
    m.setattr(serialization, "_serialize_aval", aval)
    return _relu_blob()


def test_an_honest_artifact_passes_and_deserializes():
  blob = _relu_blob()
  check_header(blob)
  spec = get_task("relu")
  assert core.load_artifact(blob, spec, spec.dims("small"), "cpu").in_avals[0].shape == (512, 512)


@pytest.mark.parametrize("text", ["a^10000000", "n", "512 ", "-1", "1" * 13, ""])
def test_a_dimension_that_is_not_a_static_integer_is_refused_at_once(monkeypatch, text):
  blob = _with_first_dimension(monkeypatch, text)
  start = time.perf_counter()
  with pytest.raises(HeaderError, match="not a static integer"):
    check_header(blob)
  assert time.perf_counter() - start < 1.0


def test_the_judge_refuses_symbolic_shapes_before_jax_reads_them(monkeypatch):
  """`a^10000000` holds jax's shape parser for minutes: the judge never hands it over."""
  blob = _with_first_dimension(monkeypatch, "a^10000000")
  monkeypatch.setattr(jax.export, "deserialize", lambda _: pytest.fail("jax read the artifact"))
  spec = get_task("relu")
  with pytest.raises(core.Failure, match="refused before it is read: input shape 0 has the "
                     "dimension 'a\\^10000000'") as caught:
    core.load_artifact(blob, spec, spec.dims("small"), "cpu")
  assert caught.value.status is Status.REJECTED


def test_trees_beyond_the_limits_and_unreadable_bytes_are_refused():
  wide = tuple(jax.ShapeDtypeStruct((2,), jnp.float32) for _ in range(MAX_TREE_NODES))
  with pytest.raises(HeaderError, match=f"lists {MAX_TREE_NODES} input shapes"):
    check_header(_relu_blob(*wide, fn=lambda *xs: xs[0]))
  deep = ROWS
  for _ in range(MAX_TREE_DEPTH):
    deep = (deep,)
  with pytest.raises(HeaderError, match="input tree is larger than .* or deeper than"):
    check_header(_relu_blob(deep, fn=lambda x: jax.tree.leaves(x)[0]))
  with pytest.raises(HeaderError, match="does not read"):
    check_header(b"\x00" * 3)
  with pytest.raises(HeaderError):
    check_header(bytes(range(256)) * 4)


def test_a_vjp_artifact_is_refused():
  exported = jax.export.export(jax.jit(lambda x: jnp.maximum(x, 0.0)), platforms=["cpu"])(ROWS)
  with pytest.raises(HeaderError, match="VJP"):
    check_header(exported.serialize(vjp_order=1))
