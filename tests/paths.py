"""Where the tests find the checkout: the repository's root, tests/ and its shared folders."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent
CONTROLS = TESTS / "controls"
STAND_INS = TESTS / "stand_ins"
