"""The plotting functions lay out what they are given as they say."""
import pytest

def test_attention_maps_go_at_most_cols_a_row():
    """plot_attention_maps puts its maps `cols` a row, each where its index says (row i // cols, column i % cols),
    and refuses a count of columns that is no whole number >= 1: 12 maps of a 4-layer, 3-head model on one row
    came to 2,750 px, text a reader could not read."""
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import torch
    from bert_nb.diagnostics import plot_attention_maps
    maps = torch.rand(12, 5, 5).softmax(-1)
    fig = plot_attention_maps(maps, [f'map {i}' for i in range(12)], cols=3)
    grid = [ax for ax in fig.axes if ax.get_title().startswith('map ')]
    assert [ax.get_title() for ax in grid] == [f'map {i}' for i in range(12)]
    spec = [(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start) for ax in grid]
    assert spec == [(i // 3, i % 3) for i in range(12)]
    plt.close(fig)
    fig = plot_attention_maps(maps[:2], ['a', 'b'])  # fewer maps than cols: one row of them, nothing empty
    assert [(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start)
            for ax in fig.axes if ax.get_title() in ('a', 'b')] == [(0, 0), (0, 1)]
    plt.close(fig)
    for bad in (0, 2.5, True, '3'):
        with pytest.raises((ValueError, TypeError), match='cols'): plot_attention_maps(maps, ['x'] * 12, cols=bad)
