"""plateau_lib.book.run: parameters a notebook does not declare are refused before anything runs."""
import os
import subprocess
import sys

import nbformat
import pytest

from plateau_lib.book.run import check_parameters, parse_mapping, parse_value


@pytest.fixture
def notebook(tmp_path):
    """A notebook declaring a = 1 and b = "x" whose second cell writes a and b to tmp_path/marker.txt."""
    marker = tmp_path / "marker.txt"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('a = 1\nb = "x"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write(f'{{a!r}} {{b!r}}')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path, marker


def test_unknown_parameter_is_named_with_the_allowed_ones(notebook):
    path, _ = notebook
    with pytest.raises(ValueError) as err:
        check_parameters(path, {"a": 2, "lrr": 0.1})
    assert f"{path} has no parameter 'lrr'; allowed: a, b" == str(err.value)
    with pytest.raises(ValueError, match=r"has no parameters 'c', 'd'; allowed: a, b"):
        check_parameters(path, {"c": 1, "d": 2})


def test_declared_parameters_pass(notebook):
    check_parameters(notebook[0], {"a": 2, "b": "y"})
    check_parameters(notebook[0], {})


def test_a_notebook_without_parameters_cell_accepts_none(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, tmp_path / "plain.ipynb")
    check_parameters(tmp_path / "plain.ipynb", {})
    with pytest.raises(ValueError, match="no parameter 'x'; allowed: none"):
        check_parameters(tmp_path / "plain.ipynb", {"x": 2}, label="plain")


def test_values_are_typed_like_papermill():
    assert [parse_value(v) for v in ("0.1", "3", "False", "None", "cpu", "1e-05")] == \
        [0.1, 3, False, None, "cpu", 1e-05]
    assert parse_mapping("{seeds: [0, 1], overrides: {lr: 0.01}}") == {"seeds": [0, 1], "overrides": {"lr": 0.01}}
    assert parse_mapping('{"lr": 1e-05}') == {"lr": 1e-05}  # JSON first: PyYAML would read a string
    with pytest.raises(ValueError, match="mapping"):
        parse_mapping("[1, 2]")


def cli(*args, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "plateau_lib", "notebook", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_refuses_an_unknown_parameter_before_running(notebook, tmp_path):
    path, marker = notebook
    result = cli(path, tmp_path / "out.ipynb", "-p", "a", "2", "-p", "lrr", "0.1", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr  # one line
    assert "has no parameter 'lrr'; allowed: a, b" in result.stderr
    assert not marker.exists() and not (tmp_path / "out.ipynb").exists()


def test_cli_runs_with_injected_parameters(notebook, tmp_path):
    path, marker = notebook
    out = tmp_path / "out.ipynb"
    result = cli(path, out, "-p", "a", "2", "-y", "{b: yes please}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert marker.read_text() == "2 'yes please'"
    executed = nbformat.read(out, as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)


def test_every_command_is_listed_and_a_bad_option_is_refused_in_one_line_before_any_compute(tmp_path):
    """``python -m plateau_lib``: each command has its options; a bad value names the option and what is allowed."""
    from plateau_lib import commands
    parser = commands.build_parser()
    assert set(commands.COMMANDS) == {"notebook", "paper", "stages", "stages-run", "diversity", "transient-search",
                                      "plateau-llc", "probe", "collapse", "rerun"}
    for name in commands.COMMANDS:
        assert parser.parse_args([name] if name not in ("notebook", "stages-run") else
                                 [name, "a", "b"] if name == "notebook" else [name, "status"]).command == name
    for argv, message in ((["stages-run", "llc", "--shard", "x"], "--shard must be K/N"),
                          (["stages-run", "llc", "--budget-s", "0"], "--budget-s must be positive"),
                          (["stages-run", "train", "--seed", "7"], "--seed must be one of the paper's seeds"),
                          (["probe", "--cpu-budget"], "--cpu-budget goes with --preset paper only"),
                          (["transient-search"], "give a trial to run"),
                          (["paper", "--workers", "0"], "--workers must be >= 1"),
                          (["paper", "--page", "nowhere", "--list"], "--page: unknown page(s) ['nowhere']")):
        result = subprocess.run([sys.executable, "-m", "plateau_lib", *argv], capture_output=True, text=True,
                                timeout=120, cwd=tmp_path)
        assert result.returncode == 2 and message in result.stderr, (argv, result.stderr)
        assert result.stderr.strip().count("\n") == 0, result.stderr
