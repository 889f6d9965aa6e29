# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/_npu_smi.py over the recorded npu-smi answers in fixtures/."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils._npu_smi import (
    DRIVER_ERROR_MARKER,
    driver_error,
    driver_error_message,
    FAMILIES,
    expected_links,
    facts,
    judge_health,
    judge_topology,
    parse_info,
    parse_list,
    parse_topo,
    topo_family,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import (
    fixture_names,
    read_answer,
)

NPU_KEYS = sorted([
    "npu", "name", "health", "power_w", "temp_c", "chip", "phy_id", "bus_id", "aicore_pct", "memory_used_mb",
    "memory_total_mb", "hbm_used_mb", "hbm_total_mb", "hugepages_used", "hugepages_total",
])
PROCESS_KEYS = ["chip", "memory_mb", "name", "npu", "pid"]

# fixture -> (version, [npu id per chip row], [(npu, chip, pid, name, memory_mb)], idle npus)
INFO = {
    "npu_smi_info_reference.txt": ("24.1.0.3", [0], [], [0]),
    "npu_smi_info_910b2_running.txt": (
        "24.1.rc2.1", list(range(8)),
        [(0, 0, 784778, "VLLMWorker_DP", 30112), (1, 0, 784779, "VLLMWorker_DP", 30112),
         (2, 0, 784780, "VLLMWorker_DP", 30112), (3, 0, 784784, "VLLMWorker_DP", 30112),
         (4, 0, 784785, "VLLMWorker_DP", 30112), (5, 0, 784786, "VLLMWorker_DP", 30112),
         (6, 0, 784787, "VLLMWorker_DP", 30113), (7, 0, 784788, "VLLMWorker_DP", 30112)],
        []),
    "npu_smi_info_910b3_noname.txt": (
        "24.1.rc2", list(range(8)),
        [(0, 0, 277624, "", 51270), (1, 0, 277626, "", 51271), (2, 0, 277628, "", 51271),
         (3, 0, 277630, "", 51271), (4, 0, 1007953, "", 50080), (5, 0, 1008594, "", 50007),
         (6, 0, 1008595, "", 50079), (7, 0, 1008596, "", 50079)],
        []),
    "npu_smi_info_a3_idle.txt": ("25.2.1", [n for n in range(8) for _chip in (0, 1)], [], list(range(8))),
    "npu_smi_info_a3_running.txt": (
        "24.1.rc3.3", [n for n in range(8) for _chip in (0, 1)],
        [(4, 0, 957687, "pt_main_thread", 49207), (4, 1, 957770, "pt_main_thread", 49207),
         (5, 0, 957790, "pt_main_thread", 49207), (5, 1, 957852, "pt_main_thread", 49207),
         (6, 0, 957876, "pt_main_thread", 49207), (6, 1, 957912, "pt_main_thread", 49207),
         (7, 0, 957957, "pt_main_thread", 49207), (7, 1, 958011, "pt_main_thread", 49207)],
        [0, 1, 2, 3]),
    "npu_smi_info_a3_chip1_process.txt": ("25.2.0", [0, 0, 1, 1], [(1, 1, 990711, "python", 7746)], [0]),
    "npu_smi_info_910b4_single.txt": ("24.1.rc1", [0], [], [0]),
    "npu_smi_info_910b4_mixed.txt": (
        "24.1.rc3", list(range(8)),
        [(0, 0, 582939, "", 19502), (1, 0, 695171, "", 19498), (6, 0, 99910, "", 27977),
         (7, 0, 99976, "", 27977)],
        [2, 3, 4, 5]),
    "npu_smi_info_910b2c_trailing_blank.txt": ("23.0.2.1", [0, 1], [(0, 0, 124528, "python3.8", 17400)], []),
    "npu_smi_info_310b4_alarm.txt": ("23.0.0", [0], [], []),
    "npu_smi_info_310p3_multichip.txt": (
        "24.1.0.1", [1, 1, 2, 2],
        [(1, 0, 3277562, "mindie_llm_back", 14513), (1, 1, 3277565, "mindie_llm_back", 14513),
         (2, 0, 3034986, "mindie_llm_back", 34207), (2, 1, 3034989, "mindie_llm_back", 33740)],
        []),
    "npu_smi_info_910b3_wide.txt": ("25.2.3", [3], [], [3]),
}

DRIVER_ERRORS = {
    "npu_smi_driver_error.txt": "dcmi module initialize failed. ret is -8005",
    "npu_smi_device_in_use.txt": "dcmi model initialized failed, because the device is used. ret is -8020",
}

LISTS = ["npu_smi_list_blank_lines.txt", "npu_smi_list_compact.txt"]

# fixture -> (label, ids, legend words)
TOPO = {
    "npu_smi_topo_910b3.txt": ("NPU", list(range(8)), ["HCCS", "NA", "PHB", "PIX", "PXB", "SYS", "X"]),
    "npu_smi_topo_a3_partial.txt": ("Phy-ID", [2, 3, 12, 13], []),
}


def _info(name):
    return parse_info(read_answer(name)["stdout"])


def test_every_npu_smi_fixture_is_exercised():
    assert set(fixture_names("npu_smi_")) == (set(INFO) | set(DRIVER_ERRORS) | set(LISTS) | set(TOPO)
                                              | {"npu_smi_list_one_npu.txt"})


def test_the_one_npu_list_goes_with_the_one_npu_tables():
    listing = read_answer("npu_smi_list_one_npu.txt")
    assert parse_list(listing["stdout"]) == {"total": 1, "npus": [{"npu": 0, "chip_count": 1}]}
    for table in ("npu_smi_info_910b4_single.txt", "npu_smi_info_310b4_alarm.txt"):
        got = facts(_run(table), _run("npu_smi_list_one_npu.txt"))
        assert not got.get("failed") and got["count"] == 1, got


@pytest.mark.parametrize("name", sorted(INFO))
def test_parse_info_recorded(name):
    version, npu_ids, processes, idle = INFO[name]
    parsed = parse_info(read_answer(name)["stdout"])
    assert sorted(parsed) == ["idle_npus", "npus", "processes", "version"]
    assert parsed["version"] == version
    assert [n["npu"] for n in parsed["npus"]] == npu_ids
    for npu in parsed["npus"]:
        assert sorted(npu) == NPU_KEYS
        assert npu["health"] == "OK" or name == "npu_smi_info_310b4_alarm.txt"
        assert npu["bus_id"]
        assert npu["temp_c"] is not None
        assert npu["memory_total_mb"] is not None
    assert [(p["npu"], p["chip"], p["pid"], p["name"], p["memory_mb"]) for p in parsed["processes"]] == processes
    for proc in parsed["processes"]:
        assert sorted(proc) == PROCESS_KEYS
    assert parsed["idle_npus"] == idle


def test_parse_info_reference_row_values():
    (npu,) = _info("npu_smi_info_reference.txt")["npus"]
    assert npu == {
        "npu": 0, "name": "910B3", "health": "OK", "power_w": 98.9, "temp_c": 38.0, "chip": 0, "phy_id": None,
        "bus_id": "0000:C1:00.0", "aicore_pct": 0.0, "memory_used_mb": 0, "memory_total_mb": 0,
        "hbm_used_mb": 3382, "hbm_total_mb": 65536, "hugepages_used": 0, "hugepages_total": 0,
    }


def test_parse_info_hbm_without_blank_before_slash():
    npus = _info("npu_smi_info_910b2_running.txt")["npus"]
    assert [(n["hbm_used_mb"], n["hbm_total_mb"]) for n in npus][:2] == [(33429, 65536), (33427, 65536)]
    mixed = _info("npu_smi_info_910b4_mixed.txt")["npus"]
    assert (mixed[6]["aicore_pct"], mixed[6]["power_w"], mixed[6]["hbm_used_mb"]) == (82.0, 263.2, 30759)


def test_parse_info_a3_dies():
    npus = _info("npu_smi_info_a3_idle.txt")["npus"]
    assert len(npus) == 16
    assert [n["chip"] for n in npus] == [0, 1] * 8
    assert [n["phy_id"] for n in npus] == list(range(16))
    assert [n["power_w"] for n in npus[:4]] == [162.2, None, 167.3, None]
    assert (npus[1]["name"], npus[1]["bus_id"], npus[1]["hbm_used_mb"]) == ("Ascend910", "0000:9F:00.0", 2887)
    assert npus[15]["temp_c"] == 38.0


def test_parse_info_310b4_alarm_without_hbm():
    (npu,) = _info("npu_smi_info_310b4_alarm.txt")["npus"]
    assert npu["health"] == "Alarm"
    assert judge_health(npu["health"]) is False
    assert (npu["bus_id"], npu["phy_id"], npu["power_w"], npu["temp_c"]) == ("NA", 0, 0.0, 65.0)
    assert (npu["memory_used_mb"], npu["memory_total_mb"]) == (3628, 15609)
    assert (npu["hbm_used_mb"], npu["hbm_total_mb"]) == (None, None)
    assert (npu["hugepages_used"], npu["hugepages_total"]) == (15, 15)


def test_parse_info_310p3_power_na():
    npus = _info("npu_smi_info_310p3_multichip.txt")["npus"]
    assert [n["power_w"] for n in npus] == [None, None, None, None]
    assert [(n["hugepages_used"], n["hugepages_total"]) for n in npus] == [
        (7210, 7210), (7210, 7210), (17057, 17057), (16823, 16823)]
    assert [(n["memory_used_mb"], n["memory_total_mb"]) for n in npus] == [
        (16302, 44280), (15543, 43693), (35563, 44280), (35204, 43693)]


@pytest.mark.parametrize("health", ["Warning", "Alarm", "Critical", "warning", "NotExist"])
def test_parse_info_unhealthy_values(health):
    text = read_answer("npu_smi_info_910b2_running.txt")["stdout"]
    row = "| 3     910B2               | OK            |"
    assert row in text
    text = text.replace(row, "| 3     910B2               | %-14s|" % health)
    npus = parse_info(text)["npus"]
    assert len(npus) == 8
    assert npus[3]["health"] == health
    assert judge_health(npus[3]["health"]) is False
    assert all(judge_health(n["health"]) for i, n in enumerate(npus) if i != 3)


@pytest.mark.parametrize("health,ok", [
    ("OK", True), ("ok", True), (" Ok \r", True), ("Warning", False), ("Alarm", False), ("Critical", False),
    ("Error", False), ("", False), (None, False), ("OK!", False),
])
def test_judge_health(health, ok):
    assert judge_health(health) is ok


def _crlf(text):
    return text.replace("\n", "\r\n")


def _trailing_blanks(text):
    return "\n".join(line + "   " if line else line for line in text.split("\n"))


def _log_noise_first(text):
    return "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n\n" + text


def _no_final_newline(text):
    return text.rstrip("\n")


def _as_bytes(text):
    return text.encode("utf-8")


UGLY = [_crlf, _trailing_blanks, _log_noise_first, _no_final_newline, _as_bytes]


@pytest.mark.parametrize("transform", UGLY, ids=[t.__name__.strip("_") for t in UGLY])
@pytest.mark.parametrize("name", sorted(INFO))
def test_parse_info_survives_ugly_text(name, transform):
    text = read_answer(name)["stdout"]
    assert parse_info(transform(text)) == parse_info(text)


@pytest.mark.parametrize("text", ["", None, "\n\n", "garbage\n+----+\n| not | a | row |\n"])
def test_parse_info_empty(text):
    assert parse_info(text) == {"version": None, "npus": [], "processes": [], "idle_npus": []}


@pytest.mark.parametrize("name", sorted(DRIVER_ERRORS))
def test_driver_error_recorded(name):
    ans = read_answer(name)
    assert driver_error(ans["stdout"] + ans["stderr"]) == DRIVER_ERRORS[name]
    assert parse_info(ans["stdout"])["npus"] == []


def test_driver_error_marker_and_negatives():
    assert DRIVER_ERROR_MARKER == "dcmi module initialize failed"
    loud = "DCMI MODULE INITIALIZE FAILED. ret is -8005"
    assert driver_error("  %s  \r\n" % loud) == loud
    assert driver_error(b"dcmi module initialize failed. ret is -8005\n") == DRIVER_ERRORS["npu_smi_driver_error.txt"]
    for name in sorted(INFO):
        assert driver_error(read_answer(name)["stdout"]) is None
    assert driver_error("") is None
    assert driver_error(None) is None


def test_driver_error_message():
    assert "driver not loaded" in driver_error_message(DRIVER_ERRORS["npu_smi_driver_error.txt"])
    assert "in use by another process" in driver_error_message(DRIVER_ERRORS["npu_smi_device_in_use.txt"])
    assert driver_error_message(None) is None


@pytest.mark.parametrize("name", LISTS)
def test_parse_list_recorded(name):
    parsed = parse_list(read_answer(name)["stdout"])
    assert parsed == {"total": 8, "npus": [{"npu": n, "chip_count": 1} for n in range(8)]}


@pytest.mark.parametrize("transform", UGLY, ids=[t.__name__.strip("_") for t in UGLY])
@pytest.mark.parametrize("name", LISTS)
def test_parse_list_survives_ugly_text(name, transform):
    text = read_answer(name)["stdout"]
    assert parse_list(transform(text)) == parse_list(text)


@pytest.mark.parametrize("text,expected", [
    ("", {"total": None, "npus": []}),
    (None, {"total": None, "npus": []}),
    ("Total Count:2\nNPU ID:4\nChip Count:2\nNPU ID:5\n", {"total": 2, "npus": [
        {"npu": 4, "chip_count": 2}, {"npu": 5, "chip_count": None}]}),
    ("\tTotal Count                    : 0\n", {"total": 0, "npus": []}),
    ("\tChip Count : 1\n\tNPU ID : x\n", {"total": None, "npus": []}),
])
def test_parse_list_edges(text, expected):
    assert parse_list(text) == expected


def _run(name):
    ans = read_answer(name)
    return {"rc": ans["rc"], "stdout": ans["stdout"], "stderr": ans["stderr"]}


def test_facts_of_a_node_with_a_vllm_on_every_npu():
    got = facts(_run("npu_smi_info_910b2_running.txt"), _run("npu_smi_list_compact.txt"))
    assert got["driver_loaded"] is True and got["version"] == "24.1.rc2.1" and got["count"] == 8
    assert got["healthy_npus"] == list(range(8)) and got["unhealthy_npus"] == []
    assert got["busy_npus"] == list(range(8)) and got["processes"][0]["name"] == "VLLMWorker_DP"


def test_facts_name_the_unhealthy_npu_with_its_raw_row():
    got = facts(_run("npu_smi_info_310b4_alarm.txt"), {"rc": 1, "stdout": "", "stderr": "not supported"})
    assert got["driver_loaded"] is True and got["unhealthy_npus"]
    bad = got["unhealthy_npus"][0]
    assert bad["health"] == "Alarm" and "Alarm" in bad["raw"]
    assert got["count"] == len(set(n["npu"] for n in got["npus"]))   # no -l answer: counted from the table


def test_facts_when_the_driver_is_not_loaded_or_npu_smi_fails():
    got = facts(_run("npu_smi_driver_error.txt"), _run("npu_smi_driver_error.txt"))
    assert got["driver_loaded"] is False and "driver not loaded" in got["driver_message"] and got["count"] == 0
    got = facts({"rc": 2, "stdout": "", "stderr": "Segmentation fault"}, {"rc": 2, "stdout": "", "stderr": ""})
    assert sorted(got) == ["failed", "msg"] and got["failed"] is True
    assert_names(got["msg"], "npu-smi info failed", "rc 2", "Segmentation fault")


# --------------------------------------------------------------------------------------------------
# npu-smi info -t topo


@pytest.mark.parametrize("name", sorted(TOPO))
def test_parse_topo_recorded(name):
    label, ids, legend = TOPO[name]
    topo = parse_topo(read_answer(name)["stdout"])
    assert topo["label"] == label and topo["ids"] == ids
    assert sorted(topo["legend"]) == legend
    for me, row in topo["links"].items():
        assert row[me] == "X"
        assert sorted(int(k) for k in row) == ids


def test_910b3_matrix_is_hccs_between_every_pair_and_keeps_the_cpu_affinity():
    topo = parse_topo(read_answer("npu_smi_topo_910b3.txt")["stdout"])
    assert all(link == "HCCS" for a, row in topo["links"].items() for b, link in row.items() if a != b)
    assert topo["affinity"]["0"] == "144-167" and topo["affinity"]["7"] == "48-71"
    assert topo["rows"]["3"].startswith("NPU3")
    findings, family = judge_topology(topo, [list(range(8))], "910B3")
    assert (findings, family) == ([], "a2")


def test_a3_matrix_sio_inside_a_module_hccs_sw_between_modules():
    topo = parse_topo(read_answer("npu_smi_topo_a3_partial.txt")["stdout"])
    assert topo["links"]["2"]["3"] == "SIO" and topo["links"]["3"]["12"] == "HCCS_SW"
    # Rows 12 and 13 are not in the published excerpt: the pairs are read from rows 2 and 3 (the matrix is
    # symmetric); the pair 12-13 itself is unknown and named.
    findings, family = judge_topology(topo, [[2, 3, 12, 13]], "Ascend910")
    assert family == "a3"
    assert [(f["npu"], f["state"]) for f in findings] == [(12, "fail")]
    assert_names(findings[0]["message"], "NPU 12 <-> NPU 13", "not reported", "expected SIO")


@pytest.mark.parametrize("name,family", [
    ("npu_smi_info_910b2_running.txt", "a2"), ("npu_smi_info_910b3_noname.txt", "a2"),
    ("npu_smi_info_910b4_mixed.txt", "a2"), ("npu_smi_info_910b2c_trailing_blank.txt", "a2"),
    ("npu_smi_info_a3_idle.txt", "a3"), ("npu_smi_info_310p3_multichip.txt", "inference"),
    ("npu_smi_info_310b4_alarm.txt", "inference"),
])
def test_family_from_the_recorded_chip_names(name, family):
    assert topo_family(_info(name)["npus"][0]["name"]) == family


def test_family_of_other_names():
    assert topo_family("Ascend 910A") == "training" and topo_family("910ProB") == "training"
    assert topo_family(None, "Phy-ID") == "a3" and topo_family("") == "generic"
    assert set(FAMILIES) == {"a2", "a3", "training", "inference", "generic"}


def test_expected_links_per_family():
    assert expected_links("a2", 0, 7) == ("HCCS",) and expected_links("a2", 7, 8) == ()
    assert expected_links("training", 0, 3) == ("HCCS",) and expected_links("training", 3, 4) == ()
    assert expected_links("a3", 4, 5) == ("SIO",) and "HCCS_SW" in expected_links("a3", 5, 6)
    assert expected_links("inference", 0, 1) is None


def _matrix(ids, link, bad=None):
    rows = ["        " + "   ".join("NPU%d" % i for i in ids) + "   CPU Affinity"]
    for a in ids:
        cells = ["X" if a == b else (bad[1] if bad and {a, b} == set(bad[0]) else link) for b in ids]
        rows.append("NPU%d   %s   0-23" % (a, "   ".join(cells)))
    return "\n".join(rows)


def test_a_degraded_pair_is_named_with_its_row():
    topo = parse_topo(_matrix(range(8), "HCCS", ((3, 6), "PIX")))
    findings, _family = judge_topology(topo, [[0, 1, 2, 3], [4, 5, 6, 7]], "910B3")
    assert findings == []  # 3 and 6 are in different instances
    findings, _family = judge_topology(topo, [[2, 3, 6]], "910B3")
    assert [(f["npu"], f["check"], f["ok"]) for f in findings] == [(3, "topology", False)]
    assert_names(findings[0]["message"], "NPU 3 <-> NPU 6", "PIX", "expected HCCS", "Atlas A2")
    assert findings[0]["raw"].startswith("NPU3")


def test_training_series_instance_across_rings_is_named():
    topo = parse_topo(_matrix(range(8), "HCCS"))
    findings, family = judge_topology(topo, [[2, 3, 4, 5]], "910A")
    assert family == "training"
    assert [(f["npu"]) for f in findings] == [2, 2, 3, 3]  # 2-4, 2-5, 3-4, 3-5 cross the two rings
    assert_names(findings[0]["message"], "not HCCS-connected", "this model")


def test_inference_cards_have_no_hccs_to_check():
    topo = parse_topo(_matrix(range(2), "PIX"))
    assert judge_topology(topo, [[0, 1]], "310P3") == ([], "inference")


def test_npu_missing_from_the_matrix_is_named():
    topo = parse_topo(_matrix(range(4), "HCCS"))
    findings, _family = judge_topology(topo, [[0, 9]], "910B3")
    assert [(f["npu"], f["state"]) for f in findings] == [(9, "error")]


def test_facts_with_topology():
    ok = {"rc": 0, "stdout": read_answer("npu_smi_info_910b2_running.txt")["stdout"], "stderr": ""}
    listing = {"rc": 0, "stdout": read_answer("npu_smi_list_compact.txt")["stdout"], "stderr": ""}
    topo = {"rc": 0, "stdout": read_answer("npu_smi_topo_910b3.txt")["stdout"], "stderr": ""}
    res = facts(ok, listing, topo)
    assert res["topology"]["family"] == "a2" and "error" not in res["topology"]
    res = facts(ok, listing, {"rc": 1, "stdout": "", "stderr": "Unknown type topo"})
    assert "Unknown type topo" in res["topology"]["error"]
    assert "topology" not in facts(ok, listing)


# --------------------------------------------------------------------------------------------------
# property tests: any text in, a parse / a list of findings out, never an exception

from hypothesis import given, settings, strategies as st  # noqa: E402

_TOPO_WORDS = st.sampled_from(["NPU0", "NPU1", "NPU12", "Phy-ID3", "X", "HCCS", "HCCS_SW", "SIO", "SYS", "PIX",
                               "CPU", "Affinity", "Legend:", "=", "0-23", "\t", "  ", "\n", "NA"])
_TOPO_TEXT = st.one_of(st.text(max_size=400), st.lists(_TOPO_WORDS, max_size=60).map(" ".join))


@settings(max_examples=200, deadline=None)
@given(text=_TOPO_TEXT, chip=st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["910B3", "Ascend910"])),
       groups=st.lists(st.lists(st.integers(0, 15), max_size=6), max_size=3))
def test_topo_parser_and_judge_take_any_text(text, chip, groups):
    topo = parse_topo(text)
    assert sorted(topo) == ["affinity", "ids", "label", "legend", "links", "rows"]
    for row in topo["links"].values():
        assert all(isinstance(link, str) for link in row.values())
    findings, family = judge_topology(topo, groups, chip)
    assert family in FAMILIES
    for f in findings:
        assert f["check"] == "topology" and f["ok"] is False and f["state"] in ("fail", "error")
        assert isinstance(f["message"], str) and isinstance(f["npu"], int)
