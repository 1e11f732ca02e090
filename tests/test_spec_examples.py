"""The examples in spec/ are the contract: every one of them runs as a doctest."""
import doctest
import pathlib

import pytest

SPEC = pathlib.Path(__file__).resolve().parent.parent / "spec"


@pytest.mark.parametrize("name", sorted(p.name for p in SPEC.glob("*.md")))
def test_spec_examples_hold(name):
    result = doctest.testfile(str(SPEC / name), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"spec/{name} has no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in spec/{name} fail"
