"""pe_tutorial.course: the assignments' public tests, written beside a notebook opened alone."""

from __future__ import annotations

import pytest

from pe_tutorial import course


def test_public_tests_are_written_into_a_tests_folder(tmp_path):
    folder = course.write_public_tests("rope", tmp_path)
    assert folder == tmp_path / "tests"
    written = {p.stem: p.read_text() for p in folder.glob("*.py")}
    assert written == course.public_tests("rope")
    assert all("check_" in source for source in written.values())


def test_test_files_already_there_are_kept(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "q1.py").write_text("# the instructor's own\n")
    course.write_public_tests("rope", tmp_path)
    assert (tmp_path / "tests" / "q1.py").read_text() == "# the instructor's own\n"
    assert (tmp_path / "tests" / "q2.py").is_file()


def test_an_unknown_assignment_is_named():
    with pytest.raises(ValueError, match="no assignment 'attention'"):
        course.public_tests("attention")


def test_no_hidden_test_ships_to_students():
    for name in course.assignments():
        for source in course.public_tests(name).values():
            assert "hidden=True" not in source


class _Grader:
    """Stands in for otter.Notebook in export(): its interpreter and what export does."""

    def __init__(self, interpreter=None, error=None):
        self.interpreter, self.error, self.exported = interpreter, error, False

    def export(self, **options):
        if self.error:
            raise self.error
        self.exported = options


def test_export_writes_otter_s_zip_off_colab():
    grader = _Grader()
    course.export(grader)
    assert grader.exported == {"pdf": False, "run_tests": True}


def test_export_on_colab_says_how_to_hand_in_the_notebook(capsys):
    from otter.check.utils import IPythonInterpreter

    grader = _Grader(IPythonInterpreter.COLAB)
    course.export(grader)
    assert not grader.exported
    out = capsys.readouterr().out
    assert out.strip() == course.COLAB_HAND_IN
    assert "File > Download > Download .ipynb" in out


def test_export_without_the_notebook_file_says_to_hand_in_the_notebook(capsys):
    """Off Colab with no notebook Otter can find (renamed, beside others): advice, not a
    traceback; any other error of Otter's is raised."""
    course.export(_Grader(error=ValueError("Could not resolve notebook path")))
    assert capsys.readouterr().out.strip() == course.NO_NOTEBOOK_FILE
    with pytest.raises(ValueError, match="empty"):
        course.export(_Grader(error=ValueError("Notebook 'x.ipynb' is empty.")))
