"""The live "try it" panels (book.panels.try_it) and the Fig. 2 panel, driven from Python as a reader would."""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

from plateau_lib.book.panels import Panel, try_it
from plateau_lib.plateau import panels


def line_figure(a, b=1.0):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [b, a * b])
    return fig


def descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from descendants(child)


def test_the_static_panel_names_its_controls_shows_the_precomputed_views_and_has_no_button():
    static = widgets.Image(value=b"png")
    panel = try_it({"a": widgets.FloatSlider(), "b": widgets.IntSlider()}, line_figure, static=static, live=False)
    text = panel.children[0].value
    assert "make lab" in text and "a, b" in text and static in panel.children
    assert not any(isinstance(w, widgets.Button) for w in descendants(panel))


def test_run_draws_the_figure_of_the_controls_values_and_redraws_on_a_change():
    calls = []

    def run(a, b):
        calls.append((a, b))
        return line_figure(a, b)
    a, b = widgets.FloatSlider(value=2.0, min=0, max=5), widgets.FloatSlider(value=1.0, min=0, max=5)
    panel = try_it({"a": a, "b": b}, run, live=True)
    assert isinstance(panel, Panel) and panel.image.value == b""
    panel.button.click()
    first = bytes(panel.image.value)
    assert calls == [(2.0, 1.0)] and first[:4] == b"\x89PNG" and panel.error is None
    a.value = 4.0  # a Run-button panel waits for the button
    assert calls == [(2.0, 1.0)]
    panel.button.click()
    assert calls[-1] == (4.0, 1.0) and panel.image.value != first and "done in" in panel.status.value


def test_a_continuous_panel_redraws_at_every_change_without_a_button():
    calls = []
    a = widgets.FloatSlider(value=1.0, min=0, max=5)
    panel = try_it({"a": a}, lambda a: calls.append(a) or line_figure(a), continuous=True, live=True)
    assert panel.button not in panel.children
    a.value = 3.0
    assert calls == [3.0] and panel.image.value[:4] == b"\x89PNG"


def test_a_failing_run_is_one_line_in_the_status_and_the_last_figure_stays():
    state = {"fail": False}

    def run(a):
        if state["fail"]:
            raise ValueError("parameter 'a' must be below 3")
        return line_figure(a)
    panel = try_it({"a": widgets.FloatSlider(value=1.0)}, run, live=True)
    panel.button.click()
    drawn = bytes(panel.image.value)
    state["fail"] = True
    panel.button.click()  # no exception reaches the kernel
    assert panel.error == "ValueError: parameter 'a' must be below 3"
    assert "Could not run" in panel.status.value and "Traceback" not in panel.status.value
    assert panel.image.value == drawn and not panel.button.disabled


def test_no_controls_is_refused():
    with pytest.raises(ValueError, match="controls"):
        try_it({}, line_figure)


def test_the_mws_panel_trains_the_chosen_config_and_a_second_run_is_a_cache_hit(tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    panel = panels.mws_panel(live=True)
    for name, value in {"lr": 10 ** -2.5, "d_model": 16, "seed": 3, "steps": 100}.items():
        panel.controls[name].value = value
    panel.button.click()
    assert panel.error is None, panel.error
    cfg = panel.result.config
    assert (cfg["lr"], cfg["d_model"], cfg["seed"], cfg["steps"]) == (pytest.approx(10 ** -2.5), 16, 3, 100)
    assert panel.result.meta.get("cache") is None  # trained now
    first = bytes(panel.image.value)
    panel.button.click()
    assert panel.result.meta["cache"] and panel.image.value[:4] == b"\x89PNG"
    panel.controls["seed"].value = 4
    panel.button.click()
    assert panel.result.config["seed"] == 4 and panel.image.value != first


def test_in_a_kernel_the_mws_page_panel_runs_the_chosen_values_and_repeats_from_the_cache():
    """The notebook itself (tiny parameters) in a live kernel (nbclient), then a reader's moves from Python: set
    the controls, press Run, press it again."""
    import nbformat
    from nbclient import NotebookClient
    from conftest import REPO
    nb = nbformat.read(REPO / "notebooks" / "mws_plateau.ipynb", as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell("steps, eval_every, d_model, eval_batch, seeds = 20, 10, 16, 32, [0]"))
    nb.cells.append(nbformat.v4.new_code_cell(
        'panel.controls["steps"].value, panel.controls["d_model"].value, panel.controls["seed"].value = 100, 16, 7\n'
        "before = bytes(panel.image.value)\n"
        "panel.button.click()\n"
        "assert panel.error is None, panel.error\n"
        'assert (panel.result.config["steps"], panel.result.config["d_model"], panel.result.config["seed"]) == (100, 16, 7)\n'
        "assert bytes(panel.image.value) != before\n"
        "panel.button.click()\n"
        'assert panel.result.meta["cache"], "a second Run with the same values is a cache hit"\n'
        'print("panel ok", round(panel.seconds, 2))'))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    assert "panel ok" in "".join(o.get("text", "") for o in nb.cells[-1].outputs)


def test_the_golden_panel_redraws_at_every_change_with_the_chosen_sgld_settings():
    from plateau_lib.llc import calibration_page
    panel = calibration_page.golden_panel(live=True)
    panel.controls["draws"].value = 200  # a continuous panel: each change runs
    first = bytes(panel.image.value)
    assert panel.error is None and first[:4] == b"\x89PNG"
    assert panel.result.hyperparams["epsilon"] == pytest.approx(1e-4) and panel.result.loss_trace.shape[1] == 200
    panel.controls["epsilon"].value = 1e-3
    assert panel.result.hyperparams["epsilon"] == pytest.approx(1e-3) and bytes(panel.image.value) != first
    with pytest.raises(ValueError, match="unknown golden case"):
        calibration_page.golden_run("a cubic", 1e-4, 0.0, 100.0, 100)


@pytest.mark.parametrize("make, values, check", [
    (panels.bias_panel, {"c": 10.0, "switch_step": 50, "seed": 2, "steps": 100},
     lambda cfg: (cfg["attn_bias_c"], cfg["attn_bias_from"], cfg["seed"], cfg["steps"]) == (10.0, 50, 2, 100)),
    (panels.init_panel, {"groups": ("kq", "embed"), "seed": 2, "steps": 100},
     lambda cfg: (tuple(cfg["copy_groups"]), cfg["seed"], cfg["steps"]) == (("kq", "embed"), 2, 100)),
    (panels.task_panel, {"task": "repeat_1", "steps": 40},
     lambda cfg: (cfg["task"], cfg["task_kwargs"]["k"], cfg["steps"]) == ("repeat", 1, 40)),
])
def test_the_bias_init_and_task_panels_train_the_chosen_config(make, values, check, tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    panel = make(live=True)
    for name, value in values.items():
        panel.controls[name].value = value
    panel.button.click()
    assert panel.error is None, panel.error
    assert check(panel.result.config) and panel.image.value[:4] == b"\x89PNG"


def test_bad_combinations_are_one_line_in_the_panel(tmp_path, use_store):
    use_store(local=tmp_path / "local")
    panel = panels.bias_panel(live=True)
    panel.controls["switch_step"].value, panel.controls["steps"].value = 250, 200
    panel.button.click()
    assert panel.error == "ValueError: the switch step (250) must be below steps (200)"
    task = panels.task_panel(live=True)
    task.controls["task"].value, task.controls["steps"].value = "repeat_1", 500
    task.button.click()
    assert task.error == "ValueError: steps must be between 1 and the repeat_1 miniature's 60, got 500"
    assert not list((tmp_path / "local").glob("train-*"))  # refused before any compute


def test_the_icl_panels_train_the_chosen_config_and_low_m_redraws_at_once(tmp_path, use_store):
    from plateau_lib.icl import panels as icl_panels
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    stages = icl_panels.stages_panel(live=True)
    stages.controls["steps"].value, stages.controls["d_model"].value = 500, 16
    stages.button.click()
    assert stages.error is None and (stages.result.config["steps"], stages.result.config["d_model"]) == (500, 16)
    ridge = icl_panels.ridge_panel(live=True)
    ridge.controls["M"].value, ridge.controls["steps"].value = "2", 500
    ridge.button.click()
    assert ridge.error is None and ridge.result.config["task_kwargs"]["M"] == 2 and ridge.result.config["steps"] == 500
    low = icl_panels.low_m_panel(live=True)
    low.controls["M"].value = 4
    first = bytes(low.image.value)
    low.controls["noise_var"].value = 0.5
    assert low.error is None and first[:4] == b"\x89PNG" and bytes(low.image.value) != first
    with pytest.raises(ValueError, match="M must be one of"):
        icl_panels.ridge_run("3", 500)


def test_the_collapse_panel_redraws_one_prompt_and_offers_each_models_checkpoints():
    """Committed analyses only (no training): moving the prompt or the checkpoint redraws at once, the chosen values
    reach the run, switching the model offers that model's checkpoints, and a step never analysed is refused."""
    from plateau_lib.llm import page as lp, panels as llm_panels
    models = lp.load("cpu", "miniature", None, None, None, None, 100, 0, {}, True, "cpu", True, progress=False,
                     olmo=True)
    panel = llm_panels.collapse_panel(models, live=True)
    panel.controls["prompt"].value = 5
    first = bytes(panel.image.value)
    panel.controls["step"].value = 512
    assert panel.error is None and bytes(panel.image.value) != first
    assert panel.result == {"model": models[0].label, "step": 512, "prompt": 5}
    olmo = next(m for m in models if m.arch == "olmo2")
    panel.controls["model"].value = olmo.label
    assert 600 in panel.controls["step"].options and panel.result["model"] == olmo.label
    with pytest.raises(ValueError, match=r"parameter 'step' must be an analysed checkpoint .* got 3"):
        llm_panels.collapse_run(models, models[0].label, 3, 1)
    with pytest.raises(ValueError, match="parameter 'prompt' must be between 1 and 100"):
        llm_panels.collapse_run(models, models[0].label, 0, 101)
