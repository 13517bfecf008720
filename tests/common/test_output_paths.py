"""An output path no file system takes (a name longer than the file system allows) is a reason
like any other: ``output_error`` returns it instead of raising, so ``-o`` with such a name
exits 2 in one line; the API's writers check their path the same way (an InputError naming
the argument ``path``, nothing written)."""

from __future__ import annotations

import pytest

import opt.api as hetopt
from opt.app.cli import main
from opt.common.outpath import FILE, FOLDER, NEW_FILE, output_error

P1 = "heft-topcuoglu-2002"


@pytest.mark.parametrize("kind", [FILE, FOLDER, NEW_FILE])
def test_a_name_too_long_is_a_reason_not_an_oserror(tmp_path, kind):
    why = output_error(tmp_path / ("n" * 300 + ".json"), kind)
    assert why is not None and "too long" in why


def test_solve_with_a_name_too_long_exits_2_in_one_line(tmp_path, capsys):
    out = tmp_path / ("n" * 300 + ".json")
    assert main(["solve", P1, "--method", "heft", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--output" in err[0] and "too long" in err[0], err


@pytest.mark.parametrize("name", ["no-folder/x.json", "n" * 300 + ".json", ".", ""])
def test_api_writers_refuse_a_path_that_cannot_be_written(tmp_path, name):
    path = str(tmp_path / name) if name else name
    for write, doc in ((hetopt.write_instance, hetopt.load_instance(P1)),
                       (hetopt.write_result, hetopt.Result("placement", "heft", "ERROR"))):
        with pytest.raises(hetopt.InputError) as info:
            write(doc, path)
        assert info.value.field == "path" and path in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
