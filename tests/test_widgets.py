import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from plateau_lib.book.widgets import image_selector


def tiny_figures(n=3):
    figures = {}
    for i in range(n):
        fig, ax = plt.subplots(figsize=(1, 1))
        ax.plot([0, 1], [0, i])
        figures[f"step {i}"] = fig
    return figures


@pytest.mark.parametrize("kind, control_type", [("slider", widgets.SelectionSlider), ("dropdown", widgets.Dropdown)])
def test_image_selector_links_control_to_stack(kind, control_type):
    box = image_selector(tiny_figures(), "step", kind=kind)
    control, stack = box.children
    assert isinstance(control, control_type) and isinstance(stack, widgets.Stack)
    assert len(stack.children) == 3
    assert all(bytes(img.value).startswith(b"\x89PNG") for img in stack.children)
    assert box.link.source == (control, "index") and box.link.target == (stack, "selected_index")
    assert plt.get_fignums() == []  # figures closed after rendering


def test_image_selector_accepts_png_bytes_and_rejects_bad_kind():
    png = image_selector(tiny_figures(1), "x").children[1].children[0].value
    assert len(image_selector({"a": png, "b": png}, "x").children[1].children) == 2
    with pytest.raises(ValueError):
        image_selector({"a": png}, "x", kind="knob")
