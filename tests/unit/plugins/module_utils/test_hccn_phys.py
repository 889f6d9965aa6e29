# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/_hccn_phys.py (hccn_tool -optical / -link_stat / -stat) over the recorded
answers in fixtures/ (real ones and the RECONSTRUCTED ones their notes describe), plus property tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils._hccn_phys import (
    CHECKS,
    judge,
    judge_link_stat,
    judge_optical,
    parse_link_stat,
    parse_optical,
    parse_stat,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import fixture_names, read_answer

# fixture -> (ok, state, message fragments, raw line start)
OPTICAL = {
    "hccn_optical_not_present_910a.txt": (False, "fail", ["optical module not present"], "present"),
    "hccn_optical_rx_low_reconstructed.txt": (
        False, "fail",
        ["RX power lane 1 0.0054 mW below the module's low threshold 0.1445 mW",
         "TX power lane 0 4.4035 mW above the module's high threshold 3.5481 mW",
         "RX LOS flag 0xff (loss of signal)", "RX LOL flag 0xff (loss of lock)"],
        "Rx Power1"),
    "hccn_optical_present_reconstructed.txt": (True, "ok", ["optical module present", "temperature 47 C",
                                                            "within the module's thresholds"], "present"),
    "hccn_optical_dbm_toolkit.txt": (True, "ok", ["RX power -11.5 dBm", "no thresholds reported"], None),
    "hccn_optical_unreachable.txt": (False, "fail", ["Control link unreachable"], "Control link unreachable"),
}
# fixture -> (up count, down count, records, flaps, current time)
LINK_STAT = {
    "hccn_link_stat_910a.txt": (2, None, 3, 1, "Wed Aug 2 03:09:26 2022"),
    "hccn_link_stat_910a_after.txt": (2, None, 4, 2, "Wed Aug 2 03:36:43 2022"),
    "hccn_link_stat_down_count_toolkit.txt": (5, 2, 3, 4, "Feb 1 2026 10:00:00 2026"),
}
STAT = {"hccn_stat_910a.txt": {"roce_rx_err_pkt_num": 0, "roce_tx_err_pkt_num": 0}}


def _answer(name):
    return read_answer(name)


def test_every_physical_fixture_is_exercised_and_names_its_source():
    names = fixture_names("hccn_optical_") + fixture_names("hccn_link_stat_") + fixture_names("hccn_stat_")
    assert set(names) == set(OPTICAL) | set(LINK_STAT) | set(STAT)
    for name in names:
        ans = _answer(name)
        assert ans["sources"], name
        if "reconstructed" in name or "toolkit" in name or "unreachable" in name:
            assert any("RECONSTRUCTED" in n for n in ans["notes"]), name


@pytest.mark.parametrize("name", sorted(OPTICAL))
def test_optical_recorded(name):
    ok, state, fragments, raw = OPTICAL[name]
    ans = _answer(name)
    verdict = judge_optical(ans["rc"], ans["stdout"], ans["stderr"])
    assert (verdict["check"], verdict["ok"], verdict["state"]) == ("optical", ok, state)
    for fragment in fragments:
        assert fragment in verdict["message"]
    assert (verdict["raw"] or "").startswith(raw) if raw else verdict["raw"] is None


def test_optical_reads_the_real_module_thresholds_and_lanes():
    value = parse_optical(_answer("hccn_optical_not_present_910a.txt")["stdout"])
    assert value["present"] is False
    assert value["temperature"] == (47.0, "C") and value["vcc"] == (3262.9, "mV")
    assert sorted(value["power"]["rx"]) == [0, 1, 2, 3] and value["power"]["tx"][0] == (4.4035, "mW")
    assert value["thresholds"]["temp"] == {"high": (70.0, "C"), "low": (0.0, "C")}
    assert value["thresholds"]["rxpower"]["low"] == (0.1445, "mW")
    assert value["flags"] == {"tx_los": 0, "rx_los": 0xff, "tx_lol": 0, "rx_lol": 0xff}
    assert value["fields"]["host snr lane0"] == "not supported"


def test_temperature_alarm_against_the_modules_own_limit():
    text = _answer("hccn_optical_present_reconstructed.txt")["stdout"].replace(
        "temperature          : 47 C", "temperature          : 75 C")
    verdict = judge_optical(0, text, "")
    assert verdict["state"] == "fail"
    assert_names(verdict["message"], "temperature 75 C", "high threshold 70 C")
    assert verdict["raw"] == "temperature          : 75 C"


def test_power_compared_in_dbm_when_units_differ():
    text = "optical info:\npresent : present\nRx Power0 : -20.5 dBm\nRxPower Low Thres : 0.1445 mW\n"
    verdict = judge_optical(0, text, "")
    assert verdict["state"] == "fail"
    assert_names(verdict["message"], "RX power lane 0", "-20.5 dBm below")


@pytest.mark.parametrize("answer,state", [
    (("hccn_tool is busy, please try again.", "", 11), "busy"),
    (("", "Get invalid device id.", 4), "error"),
    (("", "", 0), "error"),
    (("garbage", "", 0), "error"),
])
def test_optical_tool_errors(answer, state):
    out, err, rc = answer
    assert judge_optical(rc, out, err)["state"] == state


@pytest.mark.parametrize("name", sorted(LINK_STAT))
def test_link_stat_recorded(name):
    up, down, records, flaps, now = LINK_STAT[name]
    value = parse_link_stat(_answer(name)["stdout"])
    assert (value["up_count"], value["down_count"], len(value["records"]), value["flaps"]) == (up, down, records,
                                                                                               flaps)
    assert value["current_time"] == now


def test_link_stat_threshold():
    ans = _answer("hccn_link_stat_910a_after.txt")
    verdict = judge_link_stat(ans["rc"], ans["stdout"], ans["stderr"], flap_threshold=2)
    assert verdict["ok"]
    assert_names(verdict["message"], "link went down 2 time(s)", "since boot", "link up count 2")
    verdict = judge_link_stat(ans["rc"], ans["stdout"], ans["stderr"], flap_threshold=1)
    assert (verdict["ok"], verdict["state"]) == (False, "fail")
    assert_names(verdict["message"], "last change", "Tue Aug 1 14:44:40 2022", "LINK DOWN")
    assert verdict["raw"] == "[devid 0]link up count       : 2"


def test_link_stat_not_understood_and_errors():
    assert judge_link_stat(0, "hello", "")["state"] == "error"
    assert judge_link_stat(4, "", "Get invalid device id.")["state"] == "error"
    assert judge_link_stat(11, "hccn_tool is busy, please try again.", "")["state"] == "busy"


def test_stat_recorded():
    for name, counters in STAT.items():
        parsed = parse_stat(_answer(name)["stdout"])
        assert parsed == {"counters": counters, "errors": {}}
    assert parse_stat("roce_rx_err_pkt_num:12\nmac_rx_total_pkt_num:900\n")["errors"] == {"roce_rx_err_pkt_num": 12}


def test_unknown_check_is_the_collections_own_error():
    with pytest.raises(ValueError, match="unknown physical hccn check"):
        judge("speed", 0, "", "")


# --------------------------------------------------------------------------------------------------
# property tests: arbitrary text in, a verdict out (or the collection's own ValueError), nothing else

_WORDS = st.sampled_from([
    "optical info:", "present : present", "present : not present", "temperature : 80 C", "Temp High Thres : 70 C",
    "Rx Power0 : 0.0 mW", "RxPower Low Thres : 0.1445 mW", "Rx Los Flag : 0xff", "Control link unreachable",
    "[devid 0]link up count       : 9", "link down count : 3", "Tue Aug  1 14:43:40 2022    LINK DOWN",
    "hccn_tool is busy, please try again.", "Get invalid device id.", "nan mW", "inf C", ":", "\n", "\r\n",
])
_TEXT = st.one_of(st.text(max_size=300), st.lists(_WORDS, max_size=30).map("\n".join))


def _is_verdict(verdict, check):
    assert sorted(verdict) == ["check", "message", "ok", "raw", "state", "value"]
    assert verdict["check"] == check and isinstance(verdict["ok"], bool)
    assert verdict["state"] in ("ok", "fail", "busy", "error")
    assert isinstance(verdict["message"], str) and verdict["message"]
    assert verdict["raw"] is None or isinstance(verdict["raw"], str)
    assert verdict["ok"] == (verdict["state"] == "ok")


@settings(max_examples=300, deadline=None)
@given(check=st.sampled_from(CHECKS), rc=st.integers(-255, 255), out=_TEXT, err=_TEXT,
       threshold=st.integers(0, 100))
def test_any_answer_gives_a_verdict(check, rc, out, err, threshold):
    _is_verdict(judge(check, rc, out, err, threshold), check)


@settings(max_examples=200, deadline=None)
@given(text=_TEXT)
def test_parsers_take_any_text(text):
    value = parse_optical(text)
    assert value["present"] in (True, False, None)
    value = parse_link_stat(text)
    assert value["flaps"] is None or value["flaps"] >= 0
    assert all(isinstance(v, int) for v in parse_stat(text)["counters"].values())


@settings(max_examples=100, deadline=None)
@given(check=st.text(max_size=10).filter(lambda c: c not in CHECKS))
def test_unknown_checks_raise_only_value_error(check):
    with pytest.raises(ValueError):
        judge(check, 0, "", "")
