"""Where the tests find the checkout: the repository's root, tests/ and its shared folders."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent
CONTROLS = TESTS / "controls"
STAND_INS = TESTS / "stand_ins"
# Release 5 (h200-133eada): the packs of its two runs as they came back from the H200, and the
# kernel trees its folder shipped. Real float32-only records, fixed whatever release data/ holds.
RELEASE_5_PACKS = tuple(REPO / "docs" / "runs" / "h200-2026-12-02-session11" /
                        f"h200-133eada-run{n}.tar.gz" for n in (1, 2))
RELEASE_5_KERNELS = TESTS / "fixtures" / "release5-kernels.tar.gz"
