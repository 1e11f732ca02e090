"""layoutc.broadcast_tv: the TV layout of a row/column vector read through a tile's TV layout."""
import pytest

import layoutc as lc


@pytest.mark.parametrize("threads, values", [((1, 512), (1, 8)), ((4, 32), (1, 8)), ((2, 64), (1, 4)),
                                             ((8, 4), (2, 2))])
@pytest.mark.parametrize("mode", [0, 1])
def test_each_value_gets_its_coordinate(threads, values, mode):
    tiler, tv = lc.make_layout_tv(lc.Layout(threads, (threads[1], 1)), lc.Layout(values))
    line = lc.broadcast_tv(tv, tiler, mode)
    assert lc.shape(line) == lc.shape(tv)
    rows = tiler[0]
    for t in range(lc.size(tv[0])):
        for v in range(lc.size(tv[1])):
            index = tv((t, v))
            assert line((t, v)) == (index % rows if mode == 0 else index // rows)


def test_the_docstring_example():
    assert str(lc.broadcast_tv(lc.parse("(4,2):(2,1)"), (2, 4), 1)) == "(4,2):(1,0)"


@pytest.mark.parametrize("args, message", [
    ((lc.parse("(4,2):(2,1)"), (8,), 1), r"broadcast_tv\(\(4,2\):\(2,1\), \(8\), 1\): the tile must have rank 2"),
    ((lc.parse("(4,2):(2,1)"), (2, 4), 2), r"mode must be 0 \(rows\) or 1 \(columns\)"),
    ((lc.parse("8:1"), (2, 4), 0), r"tv must have rank 2 \(threads, values\)"),
])
def test_errors(args, message):
    with pytest.raises(lc.LayoutError, match=message):
        lc.broadcast_tv(*args)
