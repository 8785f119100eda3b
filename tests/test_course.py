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
