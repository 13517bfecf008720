"""Hardware catalog: contents, JSON round trip, user extensions, conversion chains, bad input."""

import json

import pytest

from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import read_json
from opt.costlib.hardware import catalog_from_dict, load_catalog


def test_catalog_contents(catalog):
    assert {"Ascend-910B", "AiM", "H100", "A100", "L40S", "H20", "B200", "host"} <= set(
        catalog.devices)
    for name, pims in {"HP0": 0, "HP32": 2, "HP64": 4, "HP128": 8}.items():
        plat = catalog.platform(name)
        kinds = [catalog.device(t).device_class for _, t in plat.device_names()]
        assert kinds.count("npu") == 1 and kinds.count("pim") == pims
        assert plat.fabric.bandwidth_bytes_per_s == 31.5e9
    h100 = catalog.device("h100")  # case-insensitive
    assert (h100.peak_flops, h100.mem_bw_bytes_per_s, h100.memory_bytes) == (989e12, 3350e9, 80e9)
    assert h100.price_usd_per_hour == 3.49
    assert catalog.node_type("H100").gpus_per_node == 8
    for dev in catalog.devices.values():
        assert dev.source, f"{dev.name} has no source"


def test_round_trip(catalog, tmp_path):
    path = tmp_path / "cat.json"
    catalog.write(path)
    again = catalog_from_dict(read_json(path), str(path))
    assert again == catalog


def test_user_catalog_adds_device_and_platform(tmp_path):
    user = {"devices": [{"name": "MyPIM", "class": "pim", "peak_flops": 32e12,
                         "mem_bw_bytes_per_s": 32e12, "memory_bytes": 32e9,
                         "native_format": "pim_opt",
                         "latency_model": {"type": "efficiency_roofline", "eta_c": 0.5,
                                           "eta_m": 0.5, "t0_s": 1e-6}}],
            "platforms": [{"name": "HPX", "host": "host",
                           "devices": [{"device": "Ascend-910B", "count": 1, "prefix": "NPU"},
                                       {"device": "MyPIM", "count": 3, "prefix": "P"}],
                           "fabric": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 64e9},
                           "host_link": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 64e9}}]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(user))
    cat = load_catalog(path)
    assert cat.device("MyPIM").latency_s("gemm", 1e9, 0) == pytest.approx(1e-6 + 1e9 / 16e12)
    assert [n for n, _ in cat.platform("HPX").device_names()] == ["NPU0", "P0", "P1", "P2"]
    assert "H100" in cat.devices  # bundled entries stay


def test_unknown_names_list_known(catalog):
    with pytest.raises(UnknownNameError) as err:
        catalog.device("V100")
    msg = str(err.value)
    assert "V100" in msg and "H100" in msg and "L40S" in msg and "\n" not in msg
    with pytest.raises(UnknownNameError, match="HP32"):
        catalog.platform("HP16")


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["devices"][0].pop("peak_flops"), "devices[0].peak_flops"),
    (lambda d: d["devices"][0].update(mem_bw_bytes_per_s=-1), "devices[0].mem_bw_bytes_per_s"),
    (lambda d: d["devices"][0].update({"class": "tpu"}), "devices[0].class"),
    (lambda d: d["devices"][0]["latency_model"].update(type="magic"),
     "devices[0].latency_model.type"),
    (lambda d: d["devices"][0]["latency_model"]["kernel_overhead_s"].update(conv=1e-6),
     "devices[0].latency_model.kernel_overhead_s"),
    (lambda d: d["platforms"][0]["devices"][0].update(device="TPUv9"),
     "platforms[0].devices[0].device"),
    (lambda d: d["devices"][0].update(pice=1.0), "devices[0].pice"),
])
def test_malformed_catalog_names_file_and_field(catalog, tmp_path, mutate, field):
    data = catalog.to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        catalog_from_dict(read_json(path), str(path))
    assert str(path) in str(err.value) and f"'{field}'" in str(err.value)


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"devices": [\n  {"name": "x",,}\n]}')
    with pytest.raises(InputError) as err:
        load_catalog(path)
    assert str(path) in str(err.value) and "line 2" in str(err.value)


def test_conversion_chains_follow_spec(catalog):
    npu, pim = catalog.device("Ascend-910B"), catalog.device("AiM")
    b = 64e6
    steps, t = npu.conversion_chain("pim_opt", b)
    assert [(s.src, s.dst) for s in steps] == [("pim_opt", "linear"), ("linear", "npu_opt")]
    assert t == pytest.approx(b / 280e9 + b / 672.1e9 + 0.011e-6)
    steps, t = pim.conversion_chain("npu_opt", b)
    assert [(s.src, s.dst) for s in steps] == [("npu_opt", "linear"), ("linear", "pim_opt")]
    assert t == pytest.approx(b / 480e9 + 4e-6 + b / 16.2e9 + 2e-6)
    assert npu.conversion_chain("npu_opt", b)[1] == 0 == pim.conversion_chain("dual", b)[1]
    link = catalog.platform("HP32").host_link
    assert pim.load_s(b, "linear", link) == pytest.approx(1e-6 + b / 31.5e9 + b / 16.2e9 + 2e-6)
    with pytest.raises(InputError, match="no conversion chain"):
        catalog.device("H100").conversion_chain("pim_opt", b)


# ---- prices > 0 and sane capacities at load; a missing file is an error ----------------------

@pytest.mark.parametrize("key, value, message", [
    ("price_usd_per_hour", 0, "must be > 0"),
    ("price_usd_per_hour", -1.0, "must be > 0"),
    ("memory_bytes", 1e300, "must be ≤ 2^62 bytes"),
    ("memory_bytes", 0.5, "must be ≥ 1"),
])
def test_device_prices_and_memory_are_checked_at_load(catalog, tmp_path, key, value, message):
    from opt.costlib.hardware import load_catalog

    dev = {**catalog.device("H100").to_dict(), "name": "H100x", key: value}
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"devices": [dev]}))
    with pytest.raises(InputError) as err:
        load_catalog(path)
    assert str(err.value).startswith(f"{path}: field 'devices[0].{key}'") and \
        message in str(err.value)


def test_a_missing_catalog_or_models_file_is_an_error_for_every_command(capsys):
    from opt.app.cli import main

    for argv in (["models", "--catalog", "nope.json"], ["instances", "--models-file", "nope.json"],
                 ["hardware", "--catalog", "nope.json"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and "nope.json: file not found" in capsys.readouterr().err
