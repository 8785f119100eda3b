"""The Otter-Grader assignments (book/assignments): ``otter assign`` builds every
master, the student notebooks hold no solution, no hidden test and no MyST, the
reference solutions pass every test, and deliberately wrong implementations fail
with the diagnosis a student needs (issue 11)."""

from __future__ import annotations

import csv
import json
import re
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

pytest.importorskip("otter", reason="otter-grader is in the test extra")

from otter.test_files import ExceptionTestFile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import assignments  # noqa: E402
import fresh_runtime  # noqa: E402
import install_cell  # noqa: E402

NAMES = [
    "alibi",
    "context_extension",
    "long_context",
    "performance",
    "rope",
    "sinusoidal",
    "t5_buckets",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("assignments")
    # the solutions are graded in-process below, which is faster than otter's run_tests
    assignments.build(None, out, run_tests=False)
    return out


def reference_environment(built: Path, name: str) -> dict:
    """The globals after running the solutions notebook's code (Otter's cells left out)."""
    env: dict = {"__name__": "__main__"}
    notebook = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "otter" in source or "grader" in source:
            continue
        exec(compile(source, f"{name}.ipynb", "exec"), env)
    return env


def run_question(built: Path, name: str, question: str, env: dict) -> ExceptionTestFile:
    source = assignments.test_files(built / name)[question]
    tests = ExceptionTestFile.from_string(source, path=f"{question}.py")
    tests.run(env)
    return tests


def test_the_masters_are_the_expected_ones():
    assert [p.stem for p in assignments.masters()] == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_holds_no_solution_hidden_test_or_myst(built, name):
    master = assignments.MASTERS / f"{name}.ipynb"
    student = built / name / "student" / f"{name}.ipynb"
    assert assignments.student_problems(master, student) == []
    # the checker finds what it looks for: the solutions notebook has all three kinds
    solutions = built / name / "autograder" / f"{name}.ipynb"
    problems = assignments.student_problems(master, solutions)
    assert any(p.startswith("solution line left in") for p in problems)


def test_the_student_checker_flags_myst(tmp_path):
    master = assignments.MASTERS / "alibi.ipynb"
    notebook = json.loads(master.read_text())
    notebook["cells"].append(
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "As {cite:p}`press2022` showed.",
        }
    )
    student = tmp_path / "alibi.ipynb"
    student.write_text(json.dumps(notebook))
    assert any("MyST" in p for p in assignments.student_problems(master, student))


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_public_and_hidden_tests(built, name):
    files = assignments.test_files(built / name)
    assert files, name
    for question, source in files.items():
        assert "hidden=False" in source, (name, question)
        assert "hidden=True" in source, (name, question)


@pytest.mark.parametrize("name", NAMES)
def test_reference_solutions_pass_every_test(built, name):
    env = reference_environment(built, name)
    for question in assignments.test_files(built / name):
        tests = run_question(built, name, question, env)
        assert tests.passed_all, tests.summary()
        assert tests.score == tests.possible > 0


# (assignment, question, wrong code, what the public test's failure says)
WRONG = [
    (
        "sinusoidal",
        "q1",
        """
        def sinusoidal_encoding(num_positions, dim):
            i = torch.arange(dim // 2)
            angles = torch.arange(num_positions)[:, None] * 10000.0 ** (-2 * i / dim)
            return torch.cat((angles.sin(), angles.cos()), dim=-1)
        """,
        "concatenated",
    ),
    (
        "sinusoidal",
        "q2",
        """
        def shift_matrix(k, dim):
            m = torch.zeros(dim, dim)
            for i in range(dim // 2):
                a = k * 10000.0 ** (-2 * i / dim)
                m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
                m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
            return m
        """,
        "+sin(k w)",
    ),
    (
        "rope",
        "q1",
        """
        def rope_frequencies(head_dim, base=10000.0):
            return base ** (-torch.arange(head_dim // 2) / head_dim)
        """,
        "base ** (-i / D)",
    ),
    (
        "rope",
        "q2",
        """
        def apply_rope(x, positions=None, *, pairing="half"):
            other = "interleaved" if pairing == "half" else "half"
            return reference_rope(x, positions, pairing=other)
        """,
        "pairing",
    ),
    (
        "rope",
        "q2",
        """
        def apply_rope(x, positions=None, *, pairing="half"):
            if positions is None:
                positions = torch.arange(1, x.shape[-2] + 1)
            return reference_rope(x, positions, pairing=pairing)
        """,
        "the positions are off by one",
    ),
    (
        "rope",
        "q2",
        """
        def apply_rope(x, positions=None, *, pairing="half"):
            return reference_rope(x, positions[...], pairing=pairing)
        """,
        "positions left out (0, 1, ..., 5), pairing='half') raised TypeError",
    ),
    (
        "sinusoidal",
        "q1",
        """
        import numpy as np

        def sinusoidal_encoding(num_positions, dim):
            i = np.arange(dim // 2)
            angles = np.arange(num_positions)[:, None] * 10000.0 ** (-2 * i / dim)
            return np.stack((np.sin(angles), np.cos(angles)), -1).reshape(num_positions, dim)
        """,
        "returned a numpy.ndarray, not a torch.Tensor",
    ),
    (
        "alibi",
        "q1",
        """
        def alibi_slopes(num_heads):
            return torch.tensor([2.0 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)])
        """,
        "right for powers of two",
    ),
    (
        "alibi",
        "q2",
        """
        def alibi_bias(num_heads, seq_len):
            i, j = torch.arange(seq_len)[:, None], torch.arange(seq_len)
            return -alibi_slopes(num_heads)[:, None, None] * (j - i).clamp(min=0).float()
        """,
        "transposed",
    ),
    (
        "alibi",
        "q2",
        """
        def alibi_bias(num_heads, seq_len):
            i, j = torch.arange(seq_len)[:, None], torch.arange(seq_len)
            return -alibi_slopes(num_heads)[:, None, None] * (i - j).float()
        """,
        "clamp the distance at 0",
    ),
    (
        "t5_buckets",
        "q1",
        """
        def t5_relative_position_bucket(relative_position, **options):
            return reference_bucket(relative_position, **options).float() + 0.4
        """,
        "fractional buckets",
    ),
    (
        "t5_buckets",
        "q2",
        """
        def t5_bias(table, seq_len):
            p = torch.arange(seq_len)
            return table[t5_relative_position_bucket(p[None, :] - p[:, None])].permute(2, 0, 1)
        """,
        "pass num_buckets=table.shape[0]",
    ),
    (
        "t5_buckets",
        "q1",
        """
        def t5_relative_position_bucket(relative_position, **options):
            return reference_bucket(-relative_position, **options)
        """,
        "reversed",
    ),
    (
        "t5_buckets",
        "q2",
        """
        def t5_bias(table, seq_len):
            p = torch.arange(seq_len)
            buckets = t5_relative_position_bucket(p[None, :] - p[:, None])
            return torch.tensor(table.tolist())[buckets].permute(2, 0, 1)
        """,
        "no gradient reaches the table",
    ),
    (
        "context_extension",
        "q1",
        """
        def interpolated_frequencies(head_dim, *, factor, base=10000.0):
            i = torch.arange(head_dim // 2, dtype=torch.float64)
            return (base ** (-2 * i / head_dim) * factor).float()
        """,
        "multiplied by the factor",
    ),
    (
        "context_extension",
        "q2",
        """
        def ntk_frequencies(head_dim, *, factor, base=10000.0):
            i = torch.arange(head_dim // 2, dtype=torch.float64)
            return ((base * factor) ** (-2 * i / head_dim)).float()
        """,
        "factor ** (D / (D - 2))",
    ),
    # chapter 10: RoPE on q and k at once, ALiBi's score_mod, the causal block mask
    (
        "performance",
        "q1",
        """
        def rope_qk(q, k, positions=None):
            half = q.shape[-1] // 2
            if positions is None:
                positions = torch.arange(q.shape[-2])
            theta = 10000.0 ** (-2 * torch.arange(half) / q.shape[-1])
            angles = positions[:, None].float() * theta
            cos, sin = angles.cos(), angles.sin()

            def turn(x):
                a, b = x[..., :half], x[..., half:]
                return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

            return turn(q), turn(k)
        """,
        "writes 4.07 times the bytes of q and k, more than 3.5",
    ),
    (
        "performance",
        "q1",
        """
        def rope_qk(q, k, positions=None):
            if positions is None:
                positions = torch.arange(q.shape[-2])
            return reference_rope(q, positions), reference_rope(k, positions)
        """,
        "computes cos 2 times; compute cos and sin once",
    ),
    (
        "performance",
        "q1",
        """
        def rope_qk(q, k, positions=None):
            return reference_rope(q, positions), k
        """,
        "k is returned as it was",
    ),
    (
        "performance",
        "q1",
        """
        def rope_qk(q, k, positions=None):
            return (
                reference_rope(q, positions, pairing="interleaved"),
                reference_rope(k, positions, pairing="interleaved"),
            )
        """,
        "this is the 'interleaved' pairing",
    ),
    (
        "performance",
        "q2",
        """
        def alibi_score_mod(num_heads):
            slopes = 2.0 ** (-8.0 * (torch.arange(num_heads) + 2) / num_heads)
            return lambda score, b, h, q_idx, kv_idx: score - slopes[h] * (q_idx - kv_idx)
        """,
        "head h uses the slope of head h + 1",
    ),
    (
        "performance",
        "q2",
        """
        def alibi_score_mod(num_heads):
            slopes = 2.0 ** (-8.0 * (torch.arange(num_heads) + 1) / num_heads)
            return lambda score, b, h, q_idx, kv_idx: score - slopes[h] * (kv_idx - q_idx)
        """,
        "a bonus instead of a penalty",
    ),
    (
        "performance",
        "q2",
        """
        def alibi_score_mod(num_heads):
            slopes = 2.0 ** (-8.0 * (torch.arange(num_heads) + 1) / num_heads)
            return lambda score, b, h, q_idx, kv_idx: (
                score - slopes.flip(0)[h] * (q_idx - kv_idx)
            )
        """,
        "the slopes are in reverse order",
    ),
    (
        "performance",
        "q3",
        """
        def causal_block_mask(seq_len):
            def causal(b, h, q_idx, kv_idx):
                return kv_idx < q_idx

            return create_block_mask(causal, None, None, seq_len, seq_len, device="cpu")
        """,
        "the mask skips too much: a query must also see its own key",
    ),
    (
        "performance",
        "q3",
        """
        def causal_block_mask(seq_len):
            def everything(b, h, q_idx, kv_idx):
                return kv_idx >= 0

            return create_block_mask(everything, None, None, seq_len, seq_len, device="cpu")
        """,
        "with no causal mask each query sees the keys after it",
    ),
    # chapters 11 and 12: windows and chunks, M-RoPE's ids, YaRN's factor
    (
        "long_context",
        "q1",
        """
        def sliding_window_mask(length, window):
            i, j = torch.arange(length)[:, None], torch.arange(length)
            return (j <= i) & (j >= i - window)
        """,
        "off by one: a query sees 4 keys, window + 1",
    ),
    (
        "long_context",
        "q1",
        """
        def sliding_window_mask(length, window):
            i, j = torch.arange(length)[:, None], torch.arange(length)
            return (i - j).abs() < window
        """,
        "the window is not causal",
    ),
    (
        "long_context",
        "q2",
        """
        def chunked_mask(length, chunk):
            i, j = torch.arange(length)[:, None], torch.arange(length)
            return (j <= i) & (j > i - chunk)
        """,
        "this is a sliding window of chunk keys, not chunks",
    ),
    (
        "long_context",
        "q2",
        """
        def chunked_mask(length, chunk):
            i, j = torch.arange(1, length + 1)[:, None], torch.arange(1, length + 1)
            return (j <= i) & (i // chunk == j // chunk)
        """,
        "the chunks' edges are off by one, so chunks cross them",
    ),
    (
        "long_context",
        "q3",
        """
        def mrope_position_ids(text_before, rows, columns, text_after):
            ids = [[n] * 3 for n in range(text_before)]
            for r in range(rows):
                for c in range(columns):
                    ids.append([text_before, text_before + r, text_before + c])
            start = len(ids)  # counts on after the last patch
            ids += [[n] * 3 for n in range(start, start + text_after)]
            return torch.tensor(ids).T
        """,
        "as if every patch were a token",
    ),
    (
        "long_context",
        "q3",
        """
        def mrope_position_ids(text_before, rows, columns, text_after):
            ids = [[n] * 3 for n in range(text_before)]
            for r in range(rows):
                for c in range(columns):
                    ids.append([text_before + r, text_before + c, text_before])
            start = text_before + max(rows, columns)
            ids += [[n] * 3 for n in range(start, start + text_after)]
            return torch.tensor(ids).T
        """,
        "the three rows are in the order (h, w, t); they are (t, h, w)",
    ),
    (
        "long_context",
        "q3",
        """
        def mrope_position_ids(text_before, rows, columns, text_after):
            ids = [[n] * 3 for n in range(text_before)]
            for r in range(rows):
                for c in range(columns):
                    ids.append([text_before, text_before + r, text_before + c])
            start = max(max(i) for i in ids)  # the image's largest position
            ids += [[n] * 3 for n in range(start, start + text_after)]
            return torch.tensor(ids).T
        """,
        "on the image's largest position; it resumes one past it",
    ),
    (
        "long_context",
        "q4",
        """
        def yarn_attention_factor(s):
            return 1.0 if s <= 1 else 0.1 * math.log10(s) + 1
        """,
        "the log is base 10",
    ),
    (
        "long_context",
        "q4",
        """
        def yarn_attention_factor(s):
            return 1.0 if s <= 1 else 0.1 * math.log(s)
        """,
        "the + 1 is missing",
    ),
]


@pytest.mark.parametrize(
    "name, question, wrong, says",
    WRONG,
    ids=[f"{n}-{q}-{i}" for i, (n, q, *_) in enumerate(WRONG)],
)
def test_wrong_implementations_fail(built, name, question, wrong, says):
    from pe_tutorial.encodings.relative import t5_relative_position_bucket
    from pe_tutorial.encodings.rope import apply_rope

    env = reference_environment(built, name)
    env.update(reference_rope=apply_rope, reference_bucket=t5_relative_position_bucket)
    exec(textwrap.dedent(wrong), env)
    tests = run_question(built, name, question, env)
    assert not tests.passed_all
    assert tests.score < tests.possible
    public = [r for r in tests.test_case_results if not r.test_case.hidden]
    failed = [r.message for r in public if not r.passed]
    assert failed and says in failed[0], failed


IMPORTED = [
    (
        "sinusoidal",
        "q1",
        "from pe_tutorial.encodings.absolute import sinusoidal_encoding",
    ),
    ("rope", "q2", "from pe_tutorial.encodings.rope import apply_rope"),
    ("alibi", "q1", "from pe_tutorial.encodings.alibi import alibi_slopes"),
    (
        "t5_buckets",
        "q1",
        "from pe_tutorial.encodings.relative import t5_relative_position_bucket",
    ),
    ("performance", "q1", "from pe_tutorial import apply_rope_qk as rope_qk"),
    (
        "long_context",
        "q1",
        "from pe_tutorial.attention.local_global import sliding_window_mask",
    ),
]


@pytest.mark.parametrize(
    "name, question, imported", IMPORTED, ids=[i[0] for i in IMPORTED]
)
def test_an_imported_answer_fails_the_public_and_the_hidden_tests(
    built, name, question, imported
):
    env = reference_environment(built, name)
    exec(imported, env)
    tests = run_question(built, name, question, env)
    hidden = [r for r in tests.test_case_results if r.test_case.hidden]
    assert hidden and not any(r.passed for r in tests.test_case_results)
    for result in tests.test_case_results:
        assert "pe_tutorial's implementation" in result.message, result.message


def instructor_page_table() -> list[str]:
    """The grade table the instructor page shows (book/instructors.md)."""
    page = (ROOT / "book" / "instructors.md").read_text()
    block = page.split("```text\nsubmission,", 1)[1].split("```", 1)[0]
    return ("submission," + block).strip().splitlines()


def test_grading_a_folder_writes_the_grade_table(built, tmp_path):
    """The instructor's path: graded by Otter (a kernel per submission), one CSV row each.

    The solutions and the untouched student notebook give the rows the instructor
    page shows; a transposed bias loses question 2 only.
    """
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    solutions = json.loads((built / "alibi" / "autograder" / "alibi.ipynb").read_text())
    (submissions / "right.ipynb").write_text(json.dumps(solutions))
    student = built / "alibi" / "student" / "alibi.ipynb"
    (submissions / "blank.ipynb").write_text(student.read_text())
    for cell in solutions["cells"]:
        source = "".join(cell["source"])
        if source.startswith("def alibi_bias"):
            # transposed: every score of question 2's public test is lost
            cell["source"] = source.replace("(i - j)", "(j - i)")
    (submissions / "bob.ipynb").write_text(json.dumps(solutions))
    table = tmp_path / "grades.csv"
    assignments.grade(built / "alibi", submissions, table)
    lines = table.read_text().strip().splitlines()
    shown = instructor_page_table()
    assert [line for line in lines if not line.startswith("bob")] == shown
    rows = {row["submission"]: row for row in csv.DictReader(lines)}
    assert float(rows["right.ipynb"]["total"]) == float(rows["right.ipynb"]["possible"])
    assert float(rows["bob.ipynb"]["q1"]) == 4
    assert float(rows["bob.ipynb"]["q2"]) < 4


def alibi_submission(built: Path, slopes_cell: str | None) -> str:
    """The alibi solutions with the cell defining alibi_slopes replaced (None: as is)."""
    notebook = json.loads((built / "alibi" / "autograder" / "alibi.ipynb").read_text())
    for cell in notebook["cells"]:
        if slopes_cell is not None and "".join(cell["source"]).startswith(
            "def alibi_slopes"
        ):
            cell["source"] = slopes_cell
    return json.dumps(notebook)


def test_grading_survives_a_class(built, tmp_path, capsys):
    """A corrupt notebook, an endless loop, an imported answer, a NaN and a right one:
    five rows with five reasons, and the run ends normally; a second run skips them."""
    submissions = tmp_path / "class"
    submissions.mkdir()
    (submissions / "corrupt.ipynb").write_text("this is not a notebook")
    # an endless loop that waits rather than spins: the grader's clock is the same,
    # and the cores stay free for the tests beside it
    (submissions / "loop.ipynb").write_text(
        alibi_submission(built, "import time\n\nwhile True:\n    time.sleep(0.5)\n")
    )
    (submissions / "imported.ipynb").write_text(
        alibi_submission(
            built, "from pe_tutorial.encodings.alibi import alibi_slopes\n"
        )
    )
    (submissions / "nan.ipynb").write_text(
        alibi_submission(
            built,
            "def alibi_slopes(num_heads):\n"
            "    return torch.full((num_heads,), float('nan'))\n",
        )
    )
    (submissions / "right.ipynb").write_text(alibi_submission(built, None))
    args = [
        "grade",
        "alibi",
        str(submissions),
        "--built",
        str(built),
        "--timeout",
        "30",
    ]
    assignments.main(args)
    table = submissions / "grades.csv"
    rows = {row["submission"]: row for row in csv.DictReader(table.open())}
    assert (rows["corrupt.ipynb"]["status"], rows["corrupt.ipynb"]["reason"]) == (
        "failed",
        "not a notebook",
    )
    assert rows["loop.ipynb"]["status"] == "timed out"
    assert rows["loop.ipynb"]["reason"] == "timed out after 30 s"
    assert "pe_tutorial's implementation" in rows["imported.ipynb"]["reason"]
    assert float(rows["imported.ipynb"]["q1"]) == 0
    assert "holds nan at index" in rows["nan.ipynb"]["reason"]
    assert rows["right.ipynb"]["total"] == rows["right.ipynb"]["possible"] == "8.0"
    assert rows["right.ipynb"]["reason"] == ""
    feedback = (submissions / "feedback" / "imported.txt").read_text()
    assert "q1:" in feedback and "not yours" in feedback
    assert not (submissions / "feedback" / "right.txt").exists()
    out = capsys.readouterr().out
    assert "(3 graded, 1 failed, 1 timed out)" in out
    # a second run grades nothing again and keeps one row per submission
    assignments.main(args)
    assert "already in grades.csv, skipped" in capsys.readouterr().out
    assert len(list(csv.DictReader(table.open()))) == 5


# --- the notebooks under Colab's conditions -----------------------------------------
# On Colab the kernel works in /content and the notebook is not a file there, and Otter
# takes the kernel for Colab's by its shell's class (google.colab._shell.Shell). The
# notebooks run alone in an empty folder, never written there, in a kernel started with
# Colab's kernel and shell classes (tools/fresh_runtime.py: fake_colab_kernel); the
# student and solutions notebooks each in a fresh environment that holds only Colab's
# preinstalled packages, so they install otter-grader and pe_tutorial themselves.

PROBE = """\
import glob, os
import google.colab
from otter.check.utils import IPythonInterpreter
print(repr(str(get_ipython())), IPythonInterpreter.COLAB.value.running(), os.getcwd())
print(sorted(glob.glob("*") + glob.glob(".*")))
"""


def test_the_fake_colab_kernel_is_colab_to_otter(tmp_path):
    """What Otter sees: google.colab imports, get_ipython() is Colab's shell class, the
    kernel works in the empty folder, and no notebook file is there."""
    import nbformat

    kernels = fresh_runtime.fake_colab_kernel(tmp_path / "fake")
    folder = tmp_path / "content"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    node = fresh_runtime.execute(notebook, folder, kernels)
    text = "".join(output.get("text", "") for output in node.cells[0].outputs)
    assert "<google.colab._shell.Shell object at" in text, node.cells[0].outputs
    assert f"True {folder}" in text
    assert text.rstrip().endswith("[]"), text  # nothing in the working directory


def built_wheel(built: Path) -> Path:
    return next((built / "wheels").glob("pe_tutorial-*.whl"))


# From nothing, each notebook takes about 12 s of a core: `make test` runs one student and
# one solutions notebook (and the seeded failing one below); the nightly `make colab-all`
# runs every student and solutions notebook through the same check (issue 64).
@pytest.mark.parametrize(
    "name, version", [("sinusoidal", "student"), ("rope", "solutions")]
)
def test_a_student_and_a_solutions_notebook_run_on_a_fresh_colab_runtime(
    built, name, version
):
    """Alone, its file absent, in an environment with only Colab's preinstalled
    packages: it installs otter-grader and the package, no cell raises, every check of
    the solutions passes, and the last cell says how to hand in on Colab."""
    problems = assignments.check_colab(built / name, built_wheel(built), (version,))
    assert problems == [], "\n".join(problems)


def test_the_colab_check_refuses_a_version_it_does_not_know(built):
    with pytest.raises(ValueError, match=r"\['solution'\]: each is one of"):
        assignments.check_colab(built / "rope", built_wheel(built), ("solution",))


def test_a_student_notebook_that_does_not_install_otter_fails_on_a_fresh_runtime(
    built, tmp_path
):
    """The bug of issue 46, seeded: the install cell installs the package only."""
    notebook = json.loads((built / "rope" / "student" / "rope.ipynb").read_text())
    cell = install_cell.install_cell_of(notebook)
    package, needs = install_cell.parse(install_cell.cell_source(cell))
    assert needs == {"otter": install_cell.otter_requirement()}
    cell["source"] = install_cell.render("edition", package, {})
    assert install_cell.problems(notebook, "rope.ipynb")  # the static check sees it
    node = fresh_runtime.run_as_on_colab(notebook, tmp_path, wheel=built_wheel(built))
    problems = assignments.colab_problems(node, "rope", "student", tmp_path / "content")
    assert problems[0].startswith("rope (student, on Colab): cell "), problems
    assert "raised ModuleNotFoundError: No module named 'otter'" in problems[0]


def solved_student_notebook(
    built: Path, name: str, *, wrong: dict | None = None
) -> dict:
    """The student notebook with the answers of the solutions notebook (by cell id);
    ``wrong`` replaces the answer cell that starts with a key by its value."""
    student = json.loads((built / name / "student" / f"{name}.ipynb").read_text())
    solutions = json.loads((built / name / "autograder" / f"{name}.ipynb").read_text())
    answers = {cell["id"]: cell["source"] for cell in solutions["cells"]}
    for cell in student["cells"]:
        cell["source"] = answers[cell["id"]]
        for start, source in (wrong or {}).items():
            if "".join(cell["source"]).startswith(start):
                cell["source"] = source
    return student


def execute_in(node, folder: Path) -> None:
    """Run notebook ``node`` in place, its kernel working in ``folder``."""
    from nbclient import NotebookClient

    NotebookClient(
        node,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": folder}},
    ).execute()


def test_a_wrong_answer_fails_its_check_on_colab(built, tmp_path):
    """The student notebook answered, with slopes right only for powers of two: q1's
    check shows the diagnosis, and the check (held to the solutions' standard) says so."""
    wrong = {
        "def alibi_slopes": "def alibi_slopes(num_heads):\n"
        "    return torch.tensor([2.0 ** (-(h + 1)) for h in range(num_heads)])\n"
    }
    notebook = solved_student_notebook(built, "alibi", wrong=wrong)
    folder = tmp_path / "content"
    folder.mkdir()
    kernels = fresh_runtime.fake_colab_kernel(tmp_path / "fake")
    node = fresh_runtime.execute(notebook, folder, kernels)
    q1 = next(
        "".join(
            o.get("text", "") + o.get("data", {}).get("text/plain", "")
            for o in c.outputs
        )
        for c in node.cells
        if "".join(c.source) == 'grader.check("q1")'
    )
    assert "All test cases passed" not in q1 and "fn(" in q1, q1
    problems = assignments.colab_problems(node, "alibi", "solutions", folder)
    assert problems and not any(" raised " in p for p in problems), problems
    assert problems[0].startswith(
        'alibi (solutions, on Colab): `grader.check("q1")` failed q1'
    ), problems


def test_the_check_names_an_init_cell_that_needs_the_notebook_file(built, tmp_path):
    """Otter given the notebook's path on Colab, where that file is not: the check says
    which line raised what (the bug it guards against)."""
    notebook = json.loads((built / "alibi" / "student" / "alibi.ipynb").read_text())
    init = next(
        c for c in notebook["cells"] if "otter.Notebook(" in "".join(c["source"])
    )
    init["source"], seeded = re.subn(
        r"if os\.path\.isfile.*",
        'grader = otter.Notebook("alibi.ipynb")',
        "".join(init["source"]),
        flags=re.S,
    )
    assert seeded == 1
    folder = tmp_path / "content"
    folder.mkdir()
    kernels = fresh_runtime.fake_colab_kernel(tmp_path / "fake")
    node = fresh_runtime.execute(notebook, folder, kernels)
    problems = assignments.colab_problems(node, "alibi", "student", folder)
    assert len(problems) == 1, problems
    assert re.fullmatch(
        r"alibi \(student, on Colab\): cell \d+ of \d+ at "
        r'`grader = otter\.Notebook\("alibi\.ipynb"\)` raised FileNotFoundError: '
        r"\[Errno 2\] No such file or directory: 'alibi\.ipynb' "
        r"\(and \d+ later cell\(s\) raised too\)",
        problems[0],
    ), problems


def test_the_package_ships_the_public_tests_otter_assign_writes(built):
    """pe_tutorial/course/assignment_tests.json is what `make assignments` last wrote: in step."""
    from pe_tutorial import course

    assert course.assignments() == NAMES
    for name in NAMES:
        built_tests = assignments.student_tests(built / name)
        assert course.public_tests(name) == built_tests, (
            f"the package's public tests of {name} are stale: run make assignments"
        )
        assert all("hidden=True" not in source for source in built_tests.values())


def test_a_notebook_handed_out_alone_installs_the_commit_it_was_built_from(built):
    """No release is published: outside a checkout, the student and the solutions
    notebooks install this commit, and otter-grader in the range the package accepts."""
    from colab_edition import current_commit

    package = install_cell.repository_package(current_commit())
    for name in NAMES:
        for version in ("student", "autograder"):
            notebook = json.loads(
                (built / name / version / f"{name}.ipynb").read_text()
            )
            assert install_cell.problems(notebook, name) == []
            source = install_cell.cell_source(install_cell.install_cell_of(notebook))
            assert install_cell.parse(source) == (
                package,
                {"otter": install_cell.otter_requirement()},
            ), (name, version)
            assert "checkout" not in source


def test_an_autograder_zip_lists_a_pinned_environment_and_carries_the_wheel(
    built, tmp_path
):
    """What check-autograders installs (make test grades the solutions with it)."""
    archive = assignments.autograder_zip(built / "rope")
    python, requirements = assignments.zip_environment(archive, tmp_path)
    assert python == "3.11"
    pinned = [r for r in requirements if "==" in r]
    assert {r.split("==")[0] for r in pinned} >= {
        "torch",
        "numpy",
        "otter-grader[grading,plugins]",
    }
    wheel = next(r for r in requirements if r.endswith(".whl"))
    assert wheel.startswith(str(tmp_path / "files" / "wheels" / "pe_tutorial-"))
    with zipfile.ZipFile(archive) as zipped:
        assert Path(wheel).relative_to(tmp_path).as_posix() in zipped.namelist()


def test_a_student_notebook_alone_off_colab_exports_a_zip(built, tmp_path):
    """Alone in a folder on a laptop or a JupyterHub: the checks run and Otter's zip is written."""
    import nbformat

    folder = tmp_path / "laptop"
    folder.mkdir()
    node = nbformat.reads(
        json.dumps(solved_student_notebook(built, "alibi")), as_version=4
    )
    nbformat.write(node, folder / "alibi.ipynb")
    execute_in(node, folder)
    zips = list(folder.glob("alibi_*.zip"))
    assert len(zips) == 1, sorted(p.name for p in folder.iterdir())
    with zipfile.ZipFile(zips[0]) as archive:
        assert "alibi.ipynb" in archive.namelist()


def test_the_instructor_page_quotes_what_the_rotate_half_formula_writes():
    """The page's number is the count ``check_rope_qk`` holds a student to, not a
    typed one: the rotate-half formula's writes, in copies of q and k."""
    from pe_tutorial import benchmarks
    from pe_tutorial.checks.performance import ROPE_QK_BUDGET

    q, k = torch.randn(2, 2, 4, 32, 16)
    fn = benchmarks.peers.rotate_half(q, k, torch.arange(32), 1e4)
    written = sum(n for _, n in benchmarks.tensors_written(fn)) / (2 * q.nbytes)
    page = (ROOT / "book" / "instructors.md").read_text()
    assert f"the rotate-half formula writes {written:.1f}," in page
    assert written > ROPE_QK_BUDGET


def test_the_autograder_gradings_run_side_by_side_in_the_environment_made_for_them(
    tmp_path, monkeypatch, capsys
):
    """check-autograders --jobs 2: one environment for the zips that list the same
    requirements, made before their gradings; a zip with other requirements waits until
    the gradings in the present environment are done (remaking it would pull it from
    under them); the lines come out in the assignments' order."""
    import threading
    import time

    import assignment_checks

    events, lock = [], threading.Lock()
    wants = {"a": "one", "b": "one", "c": "two", "d": "two"}
    for name in wants:
        (tmp_path / name / "autograder").mkdir(parents=True)
    monkeypatch.setattr(assignment_checks, "autograder_zip", lambda r: make_zip(r))

    def make_zip(result):
        path = result / "autograder" / f"{result.name}.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("want", wants[result.name])
        return path

    def environment(archive, source):
        return ".".join(map(str, sys.version_info[:2])), [(source / "want").read_text()]

    def clean_venv(venv, requirements, source):
        with lock:
            events.append(("made", requirements[0]))
        return venv / "bin" / "python"

    def grade(result, archive, python, venv, folder):
        time.sleep(0.2 if result.name in "ac" else 0.01)  # the first ones finish last
        with lock:
            events.append(("graded", wants[result.name]))
        return [], f"{result.name}: graded"

    monkeypatch.setattr(assignment_checks, "zip_environment", environment)
    monkeypatch.setattr(assignment_checks, "clean_venv", clean_venv)
    monkeypatch.setattr(assignment_checks, "_grade_in_venv", grade)
    assert assignment_checks.check_autograders(tmp_path, tmp_path / "venv", 2) == []
    assert events == [
        ("made", "one"),
        ("made", "one"),
        ("graded", "one"),
        ("graded", "one"),
        ("made", "two"),
        ("made", "two"),
        ("graded", "two"),
        ("graded", "two"),
    ]
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["a: graded", "b: graded", "c: graded", "d: graded"]
