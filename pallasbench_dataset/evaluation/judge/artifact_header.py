"""The header of a `jax.export` artifact, read by the judge before jax reads it.

`jax.export.deserialize` trusts its input: it parses every dimension of every shape as a
symbolic expression (one dimension `a^10000000` holds it for minutes), rebuilds pytrees, custom
nodes and effects by name, and carries a nested VJP artifact. The judge's tasks have static
shapes, so it reads the artifact's flatbuffer itself first, with work bounded by the limits
below whatever the bytes, and refuses an artifact whose shapes are not plain integers
(symbolic or dynamic shapes), that declares effects or a VJP, or whose pytrees or lists of
shapes are larger or deeper than a kernel of a task's interface needs. Only what passes here
reaches `jax.export.deserialize`.
"""

from __future__ import annotations

import re
from typing import Final

from jax._src.export import serialization_generated as fb

MAX_AVALS: Final = 64        # shapes an artifact lists (inputs, outputs, their unique set)
MAX_RANK: Final = 16
MAX_TREE_NODES: Final = 256  # nodes of the input or output pytree
MAX_TREE_DEPTH: Final = 8
_STATIC_DIMENSION: Final = re.compile(rb"[0-9]{1,12}")
_PLAIN_TREE_KINDS: Final = frozenset({fb.PyTreeDefKind.leaf, fb.PyTreeDefKind.none,
                                      fb.PyTreeDefKind.tuple, fb.PyTreeDefKind.list,
                                      fb.PyTreeDefKind.dict})


class HeaderError(ValueError):
  """The artifact's header is refused: the message says why."""


def check_header(blob: bytes | bytearray) -> None:
  """Raises HeaderError unless the artifact's header is one the judge can let jax read: static
  shapes, no effects, no VJP, plain and small pytrees."""
  try:
    exported = fb.Exported.GetRootAsExported(bytearray(blob), 0)
    _check(exported)
  except HeaderError:
    raise
  except Exception as e:  # hostile bytes may fail the flatbuffer reader in any way
    raise HeaderError(f"the artifact's header does not read ({type(e).__name__}: "
                      f"{str(e)[:200]})") from None


def _check(exported: fb.Exported) -> None:
  for what, count, get in (("input", exported.InAvalsLength(), exported.InAvals),
                           ("output", exported.OutAvalsLength(), exported.OutAvals),
                           ("unique", exported.UniqueAvalsLength(), exported.UniqueAvals)):
    if count > MAX_AVALS:
      raise HeaderError(f"the artifact lists {count} {what} shapes (at most {MAX_AVALS})")
    for i in range(count):
      _check_aval(get(i), f"{what} shape {i}")
  for what, count in (("inputs", exported.InAvalsIdxsLength()),
                      ("outputs", exported.OutAvalsIdxsLength())):
    if count > MAX_AVALS:
      raise HeaderError(f"the artifact has {count} {what} (at most {MAX_AVALS})")
  if exported.OrderedEffectsLength() or exported.UnorderedEffectsLength():
    raise HeaderError("the artifact declares effects: an exported kernel has none")
  if exported.Vjp() is not None:
    raise HeaderError("the artifact carries a VJP artifact: a kernel is judged on its own")
  for what, tree in (("input", exported.InTree()), ("output", exported.OutTree())):
    _check_tree(tree, what)


def _check_aval(aval: fb.AbstractValue, where: str) -> None:
  rank = aval.ShapeLength()
  if rank > MAX_RANK:
    raise HeaderError(f"{where} has {rank} dimensions (at most {MAX_RANK})")
  for d in range(rank):
    text = aval.Shape(d)
    if not _STATIC_DIMENSION.fullmatch(text):
      raise HeaderError(f"{where} has the dimension {text[:40].decode('utf-8', 'replace')!r}, "
                        "not a static integer: symbolic and dynamic shapes are refused (every "
                        "task's shapes are static)")


def _check_tree(root: fb.PyTreeDef | None, what: str) -> None:
  """Walks a pytree without recursion: plain kinds only, within the size and depth limits."""
  if root is None:
    raise HeaderError(f"the artifact has no {what} tree")
  pending, nodes = [(root, 1)], 1
  while pending:
    node, depth = pending.pop()
    nodes += node.ChildrenLength()  # counted before they are read
    if nodes > MAX_TREE_NODES or depth > MAX_TREE_DEPTH:
      raise HeaderError(f"the {what} tree is larger than {MAX_TREE_NODES} nodes or deeper "
                        f"than {MAX_TREE_DEPTH}")
    if node.Kind() not in _PLAIN_TREE_KINDS:
      raise HeaderError(f"the {what} tree has a node of kind {node.Kind()} (custom pytree "
                        "nodes are refused: a kernel takes and returns arrays)")
    pending.extend((node.Children(i), depth + 1) for i in range(node.ChildrenLength()))
