"""Exercises at the end of every chapter, read from the built site: numbered, each with a folded solution
whose checks were executed at build time, reached the ledger, and still answer the exercise they follow."""

from __future__ import annotations

import ast
import io
import re
from contextlib import redirect_stdout
from unittest.mock import patch
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup, Tag

import checks
import checks.teaching.records
from checks.sphinx import ledger

from ..helpers import embedded_records, page
from ..toc import toc_chapters

CHAPTERS = toc_chapters()
FIRST = CHAPTERS[0]
# An input as an exercise states it, in inline code (`x = [1.0, 2.0]`, or by its own name, `beta = [...]`) or
# in its code (witness(e, 2.0, ...)).
# A list may nest one level (a batch of rows).
LITERAL = r"(\[(?:[^\[\]]|\[[^\[\]]*\])*\]|-?\d+(?:\.\d*)?(?:e-?\d+)?)"
INPUT = re.compile(rf"\b\w+\s*=\s*{LITERAL}")


def exercises(soup: BeautifulSoup) -> list[tuple[Tag, Tag]]:
    """(exercise, solution) pairs in page order; a solution names its exercise by a link to it."""
    solutions = {}
    for solution in soup.select("div.solution"):
        link = solution.select_one(".admonition-title a[href^='#']")
        assert link is not None, f"a solution without a link to its exercise: {solution.get_text()[:80]}"
        solutions[link["href"][1:]] = solution
    pairs = []
    for exercise in soup.select("div.exercise"):
        assert exercise.get("id") in solutions, f"exercise {exercise.get('id')} has no solution"
        pairs.append((exercise, solutions[exercise["id"]]))
    return pairs


def code_cells(block: Tag) -> list[str]:
    return [cell.get_text() for cell in block.select("div.cell div.cell_input pre")]


def stated_inputs(exercise: Tag) -> list[torch.Tensor]:
    text = " ".join(code.get_text() for code in exercise.find_all("code")) + " ".join(code_cells(exercise))
    stated = [torch.tensor(ast.literal_eval(found), dtype=torch.float64) for found in INPUT.findall(text)]
    for call in re.findall(rf"witness\(\w+,\s*{LITERAL}", " ".join(code_cells(exercise))):
        stated.append(torch.tensor(ast.literal_eval(call), dtype=torch.float64))
    return stated


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_ends_with_numbered_exercises_and_folded_solutions(book_html: Path, chapter: str) -> None:
    soup = page(book_html, f"{chapter}.html")
    sections = soup.select("main section")
    last = [section for section in sections if section.find_parent("section") is not None and
            section.find_parent("section").find_parent("section") is None][-1]
    assert last.find("h2").get_text(strip=True).rstrip("#") == "Exercises", f"{chapter}: last section is not Exercises"
    pairs = exercises(soup)
    assert len(pairs) >= 2, f"{chapter}: {len(pairs)} exercise(s)"
    for number, (exercise, solution) in enumerate(pairs, start=1):
        assert exercise.find_parent("section") is last and solution.find_parent("section") is last
        title = exercise.select_one(".admonition-title").get_text(" ", strip=True)
        assert re.fullmatch(r"Exercise \d+", title), title
        assert solution.select_one(".admonition-title").get_text(" ", strip=True) == f"Solution to {title}"
        assert "dropdown" in solution["class"], f"{chapter}: the solution to {title} is not folded"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solutions_are_executed_and_reach_the_ledger(book_html: Path, chapter: str) -> None:
    in_ledger = {(item["page"], item["anchor"]) for item in ledger.load(book_html)}
    for exercise, solution in exercises(page(book_html, f"{chapter}.html")):
        records = embedded_records(solution)
        title = exercise.select_one(".admonition-title").get_text(strip=True)
        assert records, f"{chapter}, {title}: the solution shows no executed check"
        assert all(record["executed"] for record in records)
        missing = [record["check"] for record in records if (f"{chapter}.html", record["id"]) not in in_ledger]
        assert not missing, f"{chapter}, {title}: solution checks missing from the ledger: {missing}"


def normalized(code: str) -> str:
    """Code as Python reads it (x**3 and x ** 3 alike; exp(x) and torch.exp(x) alike), or as written where it
    is not an expression."""
    try:
        return re.sub(r"\btorch\.", "", ast.unparse(ast.parse(code.strip(), mode="eval")))
    except SyntaxError:
        return code.strip()


def named_code(exercise: Tag) -> tuple[set[str], dict[str, torch.Tensor]]:
    """What the exercise names (its code spans; both sides of each assignment it writes, in its text or its
    cells) and the tensors that code computes from the inputs it states (h = 2*x from x = [1.0, -2.0])."""
    spans = [code.get_text() for code in exercise.find_all("code")]
    named = {normalized(span) for span in spans}
    named |= set(re.findall(r'function="([^"]+)"', " ".join(code_cells(exercise))))
    values: dict[str, torch.Tensor] = {}
    for source in [*spans, *code_cells(exercise)]:
        try:
            statements = ast.parse(source).body
        except SyntaxError:
            continue
        for statement in statements:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0], ast.Name):
                named.add(normalized(ast.unparse(statement.value)))
                try:
                    value = eval(compile(ast.Expression(statement.value), "exercise", "eval"),  # noqa: S307
                                 {"torch": torch, **values})
                    values[statement.targets[0].id] = torch.as_tensor(value, dtype=torch.float64)
                except Exception:  # noqa: BLE001 (code that needs more than the stated inputs: not an input)
                    pass
    return named, values


def calls(code: str) -> set[str]:
    """The functions an expression calls, by their last name (torch.relu(y).sum() -> relu, sum)."""
    try:
        tree = ast.parse(code.strip(), mode="eval")
    except SyntaxError:
        return set()
    return {(call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", ""))
            for call in ast.walk(tree) if isinstance(call, ast.Call)}


# Reducing to a scalar is how every loss reaches backward(); an exercise need not name it.
REDUCTIONS = {"sum", "mean"}


def answers(function: str, named: set[str]) -> bool:
    """The function is one the exercise names, or one made of the functions it names (a fixed version of
    the exercise's function: where(x > 0, log(safe), 0.0) after where(x > 0, log(x), 0.0))."""
    if normalized(function) in named:
        return True
    used = calls(function) - REDUCTIONS
    known = {name for code in named for name in calls(code) | {code.strip()}}
    return bool(used) and used <= known


def unanswered(exercise: Tag, solution: Tag) -> list[str]:
    """The solution's records that check a function or an input the exercise does not name. A record of an
    error (checks.raises) names the statement that raised: one of the calls the exercise names."""
    named, values = named_code(exercise)
    inputs = stated_inputs(exercise) + list(values.values())
    found = []
    for record in embedded_records(solution):
        if record["gradient_formula"].startswith("raises "):
            calls = {f"{call}()" for call in re.findall(r"\.?(\w+)\(", record["function"])}
            if not calls & {name.rsplit(".", 1)[-1] for name in named} and not any(
                    normalized(record["function"]) in name for name in named):
                found.append(f"solution expects {record['function']!r} to raise; the exercise names {sorted(named)}")
            continue
        # A demonstration (an expected failure) may check the wrong thing on purpose; its input is still stated.
        if not answers(record["function"], named) and not record["expected_failure"]:
            found.append(f"solution checks {record['function']!r}, the exercise names {sorted(named)}")
        x = torch.tensor(record["x"], dtype=torch.float64)
        # A record keeps its input as its dtype holds it (0.1 in float16 is 0.0999755859375).
        rounded = [stated.to(getattr(torch, record["dtype"])).double() for stated in inputs]
        if not any(x.shape == stated.shape and torch.equal(x, stated) for stated in rounded):
            found.append(f"solution checks x={record['x']}, not an input the exercise states")
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_solution_checks_the_function_and_input_its_exercise_names(book_html: Path, chapter: str) -> None:
    for exercise, solution in exercises(page(book_html, f"{chapter}.html")):
        title = exercise.select_one(".admonition-title").get_text(strip=True)
        assert not unanswered(exercise, solution), f"{chapter}, {title}: {unanswered(exercise, solution)}"


def test_the_first_chapter_lets_the_reader_fill_in_a_blank_and_be_judged(book_html: Path) -> None:
    pairs = [(exercise, solution) for exercise, solution in exercises(page(book_html, f"{FIRST}.html"))
             if any("..." in code for code in code_cells(exercise))]
    assert pairs, f"{FIRST}: no exercise leaves a blank (...) to fill in"
    exercise, solution = pairs[0]
    blank = code_cells(exercise)[0]
    # The solution is the exercise's own cell with every blank filled in, and nothing else changed.
    pattern = "".join("(.+?)" if part == "..." else re.escape(part) for part in re.split(r"(\.\.\.)", blank))
    filled = re.fullmatch(pattern, code_cells(solution)[0], re.DOTALL)
    assert filled, f"the solution's first cell is not the exercise's cell filled in:\n{blank}\n---\n{code_cells(solution)[0]}"
    assert all(answer.strip() not in ("", "...") for answer in filled.groups())
    # Run as printed, blanks and all (a notebook's "Run all"), the check says what to fill in and records nothing.
    namespace = {"torch": torch, "checks": checks}
    collected = []
    with redirect_stdout(io.StringIO()) as said, patch.object(checks.teaching.records, "collect", collected.append):
        exec(compile(blank, "exercise", "exec"), namespace)
    assert "fill in the blank" in said.getvalue() and not collected, said.getvalue()
    # The solution shows both outcomes a reader can meet: a pass, and the book's failure record.
    outcomes = {ledger.entry(checks.Record.from_dict(record), chapter="", page="")["status"]
                for record in embedded_records(solution)}
    assert {"pass", "expected failure"} <= outcomes
    assert solution.select(".checks-failure"), "the solution shows no failure record"


def test_a_blank_left_in_an_expectation_is_named_and_nothing_runs() -> None:
    blank = checks.Expectation("x*x", lambda x: x * x, ..., lambda x: 2 * x, "...")
    ran = []
    said = checks.witness(blank, 3.0, lambda x: ran.append(x))
    assert not ran and "fill in the blanks (...) of the expectation (gradient, source)" in repr(said)
    for use in (lambda: said.one(), lambda: list(said), lambda: said.passed):
        with pytest.raises(checks.CheckInputError, match=r"no check ran: .*\(gradient, source\)"):
            use()
    with pytest.raises(checks.CheckInputError, match=r"gradient, source are still a blank"):
        checks.plan(blank, 3.0)
    df_blank = checks.Expectation("x*x", lambda x: x * x, "2*x", lambda x: ..., "power rule")
    assert "of the expectation (df)" in repr(checks.witness(df_blank, 3.0, lambda x: x))
    with pytest.raises(checks.CheckInputError, match=r"df returned \.\.\., a blank"):
        checks.plan(df_blank, 3.0)
    # Not a blank: text left empty is still refused where the expectation is written.
    with pytest.raises(checks.CheckInputError, match=r"gradient written out as text"):
        checks.Expectation("x*x", lambda x: x * x, "  ", lambda x: 2 * x, "power rule")
