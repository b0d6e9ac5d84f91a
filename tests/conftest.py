"""Test session setup: CPU backend, 32-bit JAX, no GPU needed."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402  (after the platform is chosen)
import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _pin_jax_config():
  jax.config.update("jax_enable_x64", False)
  yield
